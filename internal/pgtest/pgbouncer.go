package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/s3gate/s3gate/internal/freeport"
	"github.com/s3gate/s3gate/internal/testreq"
)

// StartPgBouncer runs a real pgbouncer (the Debian package) in transaction
// mode on 127.0.0.1 in front of the PostgreSQL server of dsn, forwarding
// every database name, and returns dsn through it. It runs as the postgres
// user when we are root (pgbouncer refuses root) and stops with t. Without
// pgbouncer installed the test skips, or fails under S3GATE_TEST_REQUIRE.
// The pool's start-up parameters that pgbouncer does not forward are
// ignored; through a pooler, set them on the server (ALTER ROLE).
func StartPgBouncer(t testing.TB, dsn string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		testreq.Missing(t, "pgbouncer not installed (Debian package pgbouncer)")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	bport, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 400
default_pool_size = 40
ignore_startup_parameters = extra_float_digits,statement_timeout,idle_in_transaction_session_timeout
`, host, port, bport, filepath.Join(dir, "users.txt"))
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": `"postgres" ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cred, err := serverCredential()
	if err != nil {
		t.Fatalf("pgbouncer: %v", err)
	}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("pgbouncer log:\n%s", logs.String())
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(bport))
	deadline := time.Now().Add(30 * time.Second) // hang guard only
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("pgbouncer exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer does not listen on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	u.Host = addr
	return u.String()
}
