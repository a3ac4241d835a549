package pgtest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/testreq"
)

func TestMain(m *testing.M) { Main(m) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := conn.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return conn
}

func TestBinaries(t *testing.T) {
	dir, ok := Binaries()
	if !ok {
		if _, err := os.Stat(filepath.Join(DefaultBinDir, "initdb")); err == nil && os.Getenv(EnvBinDir) == "" {
			t.Fatalf("Binaries() = false although %s/initdb exists", DefaultBinDir)
		}
		testreq.Missing(t, "no PostgreSQL binaries on this machine")
	}
	for _, name := range []string{"initdb", "postgres"} {
		if !isExecutable(filepath.Join(dir, name)) {
			t.Errorf("Binaries() = %q, but %s is not executable there", dir, name)
		}
	}
}

func TestBinariesOverride(t *testing.T) {
	t.Setenv(EnvBinDir, t.TempDir()) // empty directory: must not fall back elsewhere
	if dir, ok := Binaries(); ok {
		t.Fatalf("Binaries() with an empty %s = %q, true; want false", EnvBinDir, dir)
	}
}

func TestWithDatabase(t *testing.T) {
	tests := []struct {
		base, name, want string
		wantErr          bool
	}{
		{"postgres://u:p@h:5432/postgres?sslmode=disable", "t_1", "postgres://u:p@h:5432/t_1?sslmode=disable", false},
		{"postgresql://h/", "x", "postgresql://h/x", false},
		{"postgres://h", "x", "postgres://h/x", false},
		{"host=h dbname=x", "x", "", true},
	}
	for _, tc := range tests {
		got, err := withDatabase(tc.base, tc.name)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("withDatabase(%q, %q) = %q, %v; want %q, err=%v", tc.base, tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestDSNFreshAndIsolated checks that every DSN is a distinct, empty database.
func TestDSNFreshAndIsolated(t *testing.T) {
	dsnA, dsnB := DSN(t), DSN(t)
	if dsnA == dsnB {
		t.Fatalf("two DSN calls returned the same URL %q", dsnA)
	}
	a, b := connect(t, dsnA), connect(t, dsnB)
	ctx := context.Background()
	for i, c := range []*pgx.Conn{a, b} {
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname NOT IN ('pg_catalog','information_schema','pg_toast')`).Scan(&n); err != nil {
			t.Fatalf("db %d: count relations: %v", i, err)
		}
		if n != 0 {
			t.Errorf("db %d: fresh database has %d user relations, want 0", i, n)
		}
	}
	if _, err := a.Exec(ctx, `CREATE TABLE only_in_a (x int)`); err != nil {
		t.Fatalf("create table: %v", err)
	}
	var reg *string
	if err := b.QueryRow(ctx, `SELECT to_regclass('only_in_a')::text`).Scan(&reg); err != nil {
		t.Fatalf("to_regclass: %v", err)
	}
	if reg != nil {
		t.Errorf("table created in database A is visible in database B")
	}
	var dbA, dbB string
	if err := a.QueryRow(ctx, `SELECT current_database()`).Scan(&dbA); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(ctx, `SELECT current_database()`).Scan(&dbB); err != nil {
		t.Fatal(err)
	}
	if dbA == dbB || !strings.HasPrefix(dbA, "t_") || !strings.HasPrefix(dbB, "t_") {
		t.Errorf("databases %q and %q: want two distinct t_* names", dbA, dbB)
	}
}

// TestServerSettings checks how the throwaway server was started.
func TestServerSettings(t *testing.T) {
	if os.Getenv(EnvDatabaseURL) != "" {
		t.Skip("external server: its settings are not ours")
	}
	c := connect(t, DSN(t))
	ctx := context.Background()
	tests := []struct{ setting, want string }{
		{"listen_addresses", "127.0.0.1"},
		{"max_connections", "200"},
		{"fsync", "off"},
		{"server_encoding", "UTF8"},
		{"lc_collate", "C"},
	}
	for _, tc := range tests {
		var got string
		if err := c.QueryRow(ctx, "SELECT current_setting($1)", tc.setting).Scan(&got); err != nil {
			t.Fatalf("%s: %v", tc.setting, err)
		}
		if got != tc.want {
			t.Errorf("%s = %q, want %q", tc.setting, got, tc.want)
		}
	}
	var major int
	if err := c.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&major); err != nil {
		t.Fatal(err)
	}
	if dir, _ := Binaries(); dir == DefaultBinDir && major != 15 {
		t.Errorf("server major version %d from %s, want 15", major, dir)
	}
	if os.Geteuid() == 0 {
		// The postmaster must not run as root (PostgreSQL refuses it anyway).
		if fi, err := os.Stat(filepath.Join(srv.dir, "data")); err != nil {
			t.Fatal(err)
		} else if fi.Sys().(*syscall.Stat_t).Uid == 0 {
			t.Errorf("data directory owned by root")
		}
	}
}

const helperEnv = "PGTEST_STOP_HELPER"

// TestStopHelper is not a test on its own: TestMainStopsServer runs this test
// binary again with helperEnv set, and this reports the server it started.
func TestStopHelper(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestMainStopsServer")
	}
	_ = DSN(t)
	// Written to stdout for the parent to parse.
	os.Stdout.WriteString("PGTEST pid=" + strconv.Itoa(srv.cmd.Process.Pid) + " dir=" + srv.dir + "\n")
}

// TestMainStopsServer runs a child test process that starts a server, and
// checks that Main stopped the postmaster and removed its directory when the
// child's tests ended.
func TestMainStopsServer(t *testing.T) {
	if os.Getenv(EnvDatabaseURL) != "" {
		t.Skip("external server: nothing is started")
	}
	if _, ok := Binaries(); !ok {
		testreq.Missing(t, "no PostgreSQL binaries on this machine")
	}
	if os.Getenv(helperEnv) == "1" {
		t.Skip("inside the helper")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStopHelper$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper failed: %v\n%s", err, out)
	}
	var pid int
	var dir string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "PGTEST "); ok {
			for _, f := range strings.Fields(rest) {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "pid":
					pid, _ = strconv.Atoi(v)
				case "dir":
					dir = v
				}
			}
		}
	}
	if pid == 0 || dir == "" {
		t.Fatalf("helper did not report its server:\n%s", out)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("postmaster pid %d still exists after Main (kill 0: %v)", pid, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("server directory %s still exists after Main (stat: %v)", dir, err)
	}
}
