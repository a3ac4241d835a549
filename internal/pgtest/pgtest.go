// Package pgtest gives tests a fresh, empty PostgreSQL database.
//
// One throwaway PostgreSQL server is started per test process, from the
// installed binaries, on 127.0.0.1 and a free port, with its data directory in a
// temporary directory. When the process runs as root the server runs as the
// `postgres` OS user (initdb refuses root). Durability is switched off
// (fsync=off, synchronous_commit=off, full_page_writes=off): the cluster is thrown
// away, and tests only need correctness, not crash safety.
//
// If S3GATE_TEST_DATABASE_URL is set, no server is started: each DSN call creates
// a fresh database on that server instead (CI may provide one) and drops it when
// the test ends.
//
// Use it as:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestX(t *testing.T) { dsn := pgtest.DSN(t); ... }
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/freeport"
	"github.com/s3gate/s3gate/internal/testreq"
)

// EnvDatabaseURL names the environment variable that points the tests at an
// existing server instead of a throwaway one. Its user must be allowed to
// CREATE DATABASE.
const EnvDatabaseURL = "S3GATE_TEST_DATABASE_URL"

// EnvBinDir names the environment variable that overrides where the PostgreSQL
// binaries (initdb, postgres) are looked up.
const EnvBinDir = "S3GATE_PG_BINDIR"

// DefaultBinDir is where Debian 12 installs PostgreSQL 15.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

const (
	startTimeout = 60 * time.Second
	stopTimeout  = 30 * time.Second
	adminTimeout = 30 * time.Second
)

// Binaries reports the directory holding initdb and postgres: $S3GATE_PG_BINDIR,
// else /usr/lib/postgresql/15/bin, else the newest /usr/lib/postgresql/*/bin,
// else the directory of initdb on $PATH.
func Binaries() (dir string, ok bool) {
	var candidates []string
	if d := os.Getenv(EnvBinDir); d != "" {
		// An explicit override is the only candidate: silently falling back to
		// other binaries would hide a misconfiguration.
		candidates = []string{d}
	} else {
		candidates = append(candidates, DefaultBinDir)
		others, _ := filepath.Glob("/usr/lib/postgresql/*/bin") // pattern is constant: no error possible
		sort.Slice(others, func(i, j int) bool { return versionOf(others[i]) > versionOf(others[j]) })
		candidates = append(candidates, others...)
		if p, err := exec.LookPath("initdb"); err == nil {
			candidates = append(candidates, filepath.Dir(p))
		}
	}
	for _, d := range candidates {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, true
		}
	}
	return "", false
}

func versionOf(binDir string) int {
	v, err := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	if err != nil {
		return -1
	}
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// server is the throwaway PostgreSQL of this test process.
type server struct {
	dir     string // temporary directory: data/ and the socket live here
	port    int
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the postmaster has exited
	waitErr error         // valid after exited is closed
	logPath string
	extra   []string // further "name=value" settings of a test's own server (ops.go)
}

var (
	startOnce sync.Once
	srv       *server
	startErr  error
	skipMsg   string

	adminMu sync.Mutex // serializes CREATE DATABASE (template1 must be idle)
	dbSeq   atomic.Int64
)

// DSN returns the URL of a fresh, empty database. It starts the process's
// throwaway server on first use (or uses S3GATE_TEST_DATABASE_URL) and calls
// t.Skip if no PostgreSQL binaries exist.
func DSN(t testing.TB) string {
	t.Helper()
	if base := os.Getenv(EnvDatabaseURL); base != "" {
		return externalDSN(t, base)
	}
	startOnce.Do(func() { srv, skipMsg, startErr = start() })
	if skipMsg != "" {
		testreq.Missing(t, skipMsg)
	}
	if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	name := fmt.Sprintf("t_%d", dbSeq.Add(1))
	if err := createDatabase(srv.url("postgres"), name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return srv.url(name)
}

// Main runs the package's tests and then stops the throwaway server (if one was
// started) and removes its directory. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// externalDSN creates a uniquely named database on an existing server and drops
// it when the test ends. Names carry the PID and a random suffix because several
// test processes (one per package) share that server.
func externalDSN(t testing.TB, base string) string {
	t.Helper()
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatalf("pgtest: random name: %v", err)
	}
	name := fmt.Sprintf("t_%d_%d_%s", os.Getpid(), dbSeq.Add(1), hex.EncodeToString(rnd[:]))
	if err := createDatabase(base, name); err != nil {
		t.Fatalf("pgtest: %s: %v", EnvDatabaseURL, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		if err := adminExec(ctx, base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	u, err := withDatabase(base, name)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvDatabaseURL, err)
	}
	return u
}

func createDatabase(adminURL, name string) error {
	adminMu.Lock()
	defer adminMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := adminExec(ctx, adminURL, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func adminExec(ctx context.Context, adminURL, sql string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx) // closing an admin connection; the statement's outcome is what matters
	}()
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// withDatabase returns base with its database name replaced.
func withDatabase(base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse url: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", fmt.Errorf("want a postgres:// URL, got scheme %q", u.Scheme)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func (s *server) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// start initializes and starts the server. It returns a skip message when no
// binaries exist, and an error when they exist but the server cannot start.
func start() (*server, string, error) {
	bin, ok := Binaries()
	if !ok {
		return nil, "pgtest: no PostgreSQL binaries (initdb, postgres) found in " + DefaultBinDir +
			", /usr/lib/postgresql/*/bin or $PATH; set " + EnvBinDir + " or " + EnvDatabaseURL +
			" to run PostgreSQL-backed tests", nil
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, "", fmt.Errorf("temp dir: %w", err)
	}
	s := &server{dir: dir, logPath: filepath.Join(dir, "postgres.log")}
	fail := func(err error) (*server, string, error) {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", dir, rmErr))
		}
		return nil, "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fail(fmt.Errorf("chown %s: %w", dir, err))
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %w\n%s", err, out))
	}
	// A free port can be taken between probing and binding: retry a few times.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freeport.Port()
		if err != nil {
			return fail(err)
		}
		s.port = port
		if lastErr = s.launch(bin, data, cred); lastErr == nil {
			return s, "", nil
		}
	}
	return fail(lastErr)
}

// serverCredential returns the credential to run PostgreSQL with: the postgres
// user when we are root, nil (ourselves) otherwise.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses root: need the 'postgres' OS user: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("uid of postgres %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("gid of postgres %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// launch starts the postmaster and waits until it accepts connections.
func (s *server) launch(bin, data string, cred *syscall.Credential) error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("server log: %w", err)
	}
	defer logf.Close() // the child keeps its own descriptor
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", data,
		"-p", strconv.Itoa(s.port),
		"-k", s.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "shared_buffers=64MB",
		"-c", "max_locks_per_transaction=128",
	)
	for _, kv := range s.extra {
		cmd.Args = append(cmd.Args, "-c", kv)
	}
	cmd.Dir = s.dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Pdeathsig: if the test binary dies without running Main (kill, timeout
	// panic), the postmaster gets SIGQUIT (immediate shutdown) instead of
	// lingering. Go applies it after switching credentials, so it survives the
	// switch. Its trigger is the exit of the creating OS thread, hence the
	// dedicated, locked thread below that lives as long as the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	started := make(chan error, 1)
	s.exited = make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, after the server
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, s.url("postgres"))
		if err == nil {
			err = conn.Close(ctx)
			cancel()
			if err != nil {
				return fmt.Errorf("close probe connection: %w", err)
			}
			return nil
		}
		cancel()
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited on port %d: %v\n%s", s.port, s.waitErr, s.tailLog())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			killErr := s.kill()
			return errors.Join(fmt.Errorf("postgres not ready after %s: %w\n%s", startTimeout, err, s.tailLog()), killErr)
		}
	}
}

func (s *server) tailLog() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no server log: %v)", err)
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}

// kill stops the postmaster by PID: SIGINT is PostgreSQL's "fast" shutdown
// (what pg_ctl stop -m fast sends); SIGKILL of the postmaster follows if it
// hangs, and the children then exit on their own as they see it gone.
func (s *server) kill() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	select {
	case <-s.exited:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postgres (pid %d): %w", s.cmd.Process.Pid, err)
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill postgres (pid %d): %w", s.cmd.Process.Pid, err)
	}
	<-s.exited
	return fmt.Errorf("postgres (pid %d) ignored fast shutdown for %s and was killed", s.cmd.Process.Pid, stopTimeout)
}

// stop shuts the throwaway server down and removes its directory.
func stop() error {
	if srv == nil {
		return nil
	}
	s := srv
	srv = nil
	err := s.kill()
	if rmErr := os.RemoveAll(s.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove %s: %w", s.dir, rmErr))
	}
	return err
}
