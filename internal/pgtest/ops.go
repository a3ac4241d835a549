package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// The helpers below let operations tests (backups, recovery, replicas) run a
// test's own servers with settings of their own and PostgreSQL's client
// tools against them.

// NewBlankServer is NewServer without initdb: the test fills DataDir itself
// (pg_basebackup through Tool) before Start.
func NewBlankServer(t testing.TB) *Server {
	t.Helper()
	return newServer(t, false)
}

// Set adds settings ("name=value", as postgres -c takes them) to every later
// Start; they win over postgresql.conf.
func (s *Server) Set(settings ...string) { s.s.extra = append(s.s.extra, settings...) }

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.s.port }

// URL is the URL of database db on the server.
func (s *Server) URL(db string) string { return s.s.url(db) }

// Dir is a scratch directory that the server's OS user owns (archives,
// dumps); it is removed with the server.
func (s *Server) Dir() string { return s.s.dir }

// DataDir is the server's data directory (Dir()/data).
func (s *Server) DataDir() string { return s.data }

// Log is the end of the server's log, for failure messages.
func (s *Server) Log() string { return s.s.tailLog() }

// Mkdir creates Dir()/name, owned by the server's OS user, and returns its path.
func (s *Server) Mkdir(name string) (string, error) {
	p := filepath.Join(s.s.dir, name)
	if err := os.MkdirAll(p, 0o700); err != nil {
		return "", fmt.Errorf("pgtest: mkdir %s: %w", p, err)
	}
	return p, s.chown(p)
}

// WriteFile writes name (relative to the data directory, e.g.
// "recovery.signal"), owned by the server's OS user.
func (s *Server) WriteFile(name string, data []byte) error {
	p := filepath.Join(s.data, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return fmt.Errorf("pgtest: write %s: %w", p, err)
	}
	return s.chown(p)
}

func (s *Server) chown(p string) error {
	if s.cred == nil {
		return nil
	}
	if err := os.Chown(p, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
		return fmt.Errorf("pgtest: chown %s: %w", p, err)
	}
	return nil
}

// Tool runs one of PostgreSQL's programs (pg_dump, pg_restore,
// pg_basebackup, ...) from the server's binaries, as the server's OS user,
// in Dir, and returns its combined output.
func (s *Server) Tool(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	cmd.Dir = s.s.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgtest: %s: %w\n%s", name, err, out)
	}
	return string(out), nil
}

// CreateDatabase creates database name on the running server and returns
// its URL.
func (s *Server) CreateDatabase(name string) (string, error) {
	if err := createDatabase(s.s.url("postgres"), name); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return s.s.url(name), nil
}
