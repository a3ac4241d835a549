package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/config"
)

// serveRun is one run of the real serve path.
type serveRun struct {
	code   int
	msgs   []string // the log messages, in order
	stdout string
}

// runServe loads environ (beside an embedded default on a free port) and
// runs serve until it exits, or until it logs "s3gate serving", when it is
// stopped.
func runServe(t *testing.T, environ ...string) serveRun {
	t.Helper()
	cfg, err := config.Load(nil, append([]string{
		"S3GATE_ADDR=127.0.0.1:0", "S3GATE_METRICS_ADDR=off", "S3GATE_DATA_DIR=" + t.TempDir(),
		"S3GATE_LOG_FORMAT=json", "S3GATE_DRAIN_TIMEOUT=5s",
	}, environ...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var r serveRun
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			var line struct{ Msg string }
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Errorf("log line %q: %v", sc.Text(), err)
			}
			r.msgs = append(r.msgs, line.Msg)
			if line.Msg == "s3gate serving" {
				cancel()
			}
		}
	}()
	var stdout bytes.Buffer
	r.code = serve(ctx, cfg, newLogger(cfg, pw), &stdout)
	_ = pw.Close()
	wg.Wait()
	r.stdout = stdout.String()
	return r
}

func (r serveRun) logged(prefix string) bool {
	for _, m := range r.msgs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

// TestServeStartupChecks: a bad file or database setting stops serve with
// exit 1 and one line naming the setting, before any "serving" line; an
// unknown S3GATE_ variable is warned about and does not stop it.
func TestServeStartupChecks(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	badPEM := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(badPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	closed := freeAddr(t) // nothing listens there
	_, port, _ := net.SplitHostPort(closed)
	tests := []struct {
		name    string
		env     []string
		code    int
		want    string // the start-up failure (empty: serves)
		warning string
	}{
		{name: "unknown variable", env: []string{"S3GATE_FOO=1", "S3GATE_INLINMAX=1MiB"}, code: 0,
			warning: "unknown setting ignored: S3GATE_FOO"},
		{name: "nearest name", env: []string{"S3GATE_INLINMAX=1MiB"}, code: 0,
			warning: "unknown setting ignored: S3GATE_INLINMAX (did you mean S3GATE_INLINE_MAX?)"},
		{name: "missing TLS file", env: []string{"S3GATE_TLS_CERT_FILE=" + filepath.Join(dir, "none.pem"), "S3GATE_TLS_KEY_FILE=" + badPEM, "S3GATE_FOO=1"},
			code: 1, warning: "unknown setting ignored: S3GATE_FOO",
			want: "start-up failed: S3GATE_TLS_CERT_FILE (-tls-cert-file) / S3GATE_TLS_KEY_FILE (-tls-key-file): open " + filepath.Join(dir, "none.pem") + ": no such file or directory"},
		{name: "TLS file not PEM", env: []string{"S3GATE_TLS_CERT_FILE=" + badPEM, "S3GATE_TLS_KEY_FILE=" + badPEM}, code: 1,
			want: "start-up failed: S3GATE_TLS_CERT_FILE (-tls-cert-file) / S3GATE_TLS_KEY_FILE (-tls-key-file): tls: failed to find any PEM data in certificate input"},
		{name: "data dir a file", env: []string{"S3GATE_DATA_DIR=" + notDir}, code: 1,
			want: "start-up failed: S3GATE_DATA_DIR (-data-dir): " + notDir + " is not a directory"},
		{name: "database down", env: []string{"S3GATE_DATABASE_URL=postgres://u:hunter2-pw@localhost:" + port + "/db", "S3GATE_DB_WAIT=0s",
			"S3GATE_ROOT_ACCESS_KEY=admin", "S3GATE_ROOT_SECRET_KEY=secret-secret"}, code: 1,
			want: "start-up failed: S3GATE_DATABASE_URL: PostgreSQL at localhost:" + port + " not reachable after 0s (S3GATE_DB_WAIT): failed to connect to `user=u database=db`: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runServe(t, tc.env...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d; log %q", r.code, tc.code, r.msgs)
			}
			if tc.warning != "" && !r.logged(tc.warning) {
				t.Errorf("no warning %q in the log %q", tc.warning, r.msgs)
			}
			if tc.want == "" {
				if !r.logged("s3gate serving") {
					t.Errorf("did not serve: %q", r.msgs)
				}
				return
			}
			last := r.msgs[len(r.msgs)-1]
			if !strings.HasPrefix(last, tc.want) {
				t.Errorf("last log line\n %q\nwant one starting\n %q", last, tc.want)
			}
			if r.logged("s3gate serving") || strings.ContainsAny(last, "\n\t") || strings.Contains(last, "hunter2-pw") {
				t.Errorf("served, or the failure spans lines or shows the password: %q", r.msgs)
			}
		})
	}
}

// TestServeShowsGeneratedKeyOnFailure: a first start that fails after it
// generated the root key pair (the embedded store cannot open; the port is
// taken) still shows the pair, the only start that can.
func TestServeShowsGeneratedKeyOnFailure(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for name, setup := range map[string]func(dir string) []string{
		"store fails": func(dir string) []string {
			if err := os.Mkdir(filepath.Join(dir, "meta.db"), 0o700); err != nil { // not a database file
				t.Fatal(err)
			}
			return nil
		},
		"listen fails": func(string) []string { return []string{"S3GATE_ADDR=" + busy.Addr().String()} },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			r := runServe(t, append(setup(dir), "S3GATE_DATA_DIR="+dir)...)
			if r.code != 1 || r.logged("s3gate serving") {
				t.Fatalf("exit %d, log %q: want a failed start", r.code, r.msgs)
			}
			creds, err := os.ReadFile(filepath.Join(dir, "root-credentials"))
			if err != nil {
				t.Fatal(err)
			}
			var secret string
			for _, line := range strings.Split(string(creds), "\n") {
				if v, ok := strings.CutPrefix(line, "S3GATE_ROOT_SECRET_KEY="); ok {
					secret = v
				}
			}
			if secret == "" || !strings.Contains(r.stdout, "generated a root key pair") || !strings.Contains(r.stdout, "secret key  "+secret+"\n") {
				t.Fatalf("the generated secret was not shown; stdout:\n%s", r.stdout)
			}
		})
	}
}

// TestSecondServeOnOneDataDir: a second serve on the data directory of a
// running one exits 1 with one line naming the directory, before serving;
// the first keeps serving and stops cleanly.
func TestSecondServeOnOneDataDir(t *testing.T) {
	dir := t.TempDir()
	_, stop := startServe(t, "off", "S3GATE_DATA_DIR="+dir)
	r := runServe(t, "S3GATE_DATA_DIR="+dir)
	if code := stop(); code != 0 {
		t.Errorf("the first serve exited %d", code)
	}
	if r.code != 1 || r.logged("s3gate serving") {
		t.Fatalf("second serve: exit %d, log %q; want exit 1 before serving", r.code, r.msgs)
	}
	last := r.msgs[len(r.msgs)-1]
	if !strings.Contains(last, dir) || !strings.Contains(last, "in use") || strings.ContainsAny(last, "\n\t") {
		t.Errorf("last log line %q: want one line naming %s in use", last, dir)
	}
}
