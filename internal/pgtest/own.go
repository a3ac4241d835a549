package pgtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/s3gate/s3gate/internal/freeport"
	"github.com/s3gate/s3gate/internal/testreq"
)

// Server is a PostgreSQL server of one test's own, which the test stops and
// starts (outage tests, operations tests). Its port is fixed when it is created, so a gateway
// can be pointed at it before it first starts.
type Server struct {
	s    *server
	bin  string
	data string
	cred *syscall.Credential
}

// NewServer initializes a server's data directory and picks its port, without
// starting it; it is stopped and removed when the test ends. When no
// PostgreSQL binaries exist (S3GATE_TEST_DATABASE_URL cannot help: a shared
// server cannot be stopped) it skips the test, or fails it in CI
// (internal/testreq).
func NewServer(t testing.TB) *Server { return newServer(t, true) }

func newServer(t testing.TB, initdb bool) *Server {
	t.Helper()
	bin, ok := Binaries()
	if !ok {
		testreq.Missing(t, "pgtest: no PostgreSQL binaries (initdb, postgres) found; set "+EnvBinDir+" to run this test")
	}
	cred, err := serverCredential()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgtest-own-")
	if err != nil {
		t.Fatalf("pgtest: temp dir: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("pgtest: remove %s: %v", dir, err)
		}
	})
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("pgtest: chown %s: %v", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	if initdb {
		initdb := exec.Command(filepath.Join(bin, "initdb"),
			"-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
		initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		initdb.Dir = dir
		if out, err := initdb.CombinedOutput(); err != nil {
			t.Fatalf("pgtest: initdb: %v\n%s", err, out)
		}
	}
	port, err := freeport.Port()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s := &Server{s: &server{dir: dir, port: port, logPath: filepath.Join(dir, "postgres.log")}, bin: bin, data: data, cred: cred}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}

// DSN is the URL of the server's postgres database.
func (s *Server) DSN() string { return s.s.url("postgres") }

// Start starts the server and waits until it accepts connections.
func (s *Server) Start() error {
	if s.running() {
		return errors.New("pgtest: server already running")
	}
	if err := s.s.launch(s.bin, s.data, s.cred); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

// Stop shuts the server down (fast shutdown: sessions are terminated) and
// waits for it to exit. Stopping a stopped server does nothing.
func (s *Server) Stop() error {
	if !s.running() {
		return nil
	}
	return s.s.kill()
}

func (s *Server) running() bool {
	if s.s.cmd == nil || s.s.exited == nil {
		return false
	}
	select {
	case <-s.s.exited:
		return false
	default:
		return true
	}
}
