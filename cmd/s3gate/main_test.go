package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/config"
)

func TestProbeAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"0.0.0.0:9001", "127.0.0.1:9001"},
		{":9001", "127.0.0.1:9001"},
		{"[::]:9001", "[::1]:9001"},
		{"127.0.0.1:9001", "127.0.0.1:9001"},
		{"10.1.2.3:80", "10.1.2.3:80"},
		{"localhost:9001", "localhost:9001"},
	} {
		if got := probeAddr(tc.in); got != tc.want {
			t.Errorf("probeAddr(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestHealthcheck(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if !ready {
			http.Error(w, "not ready: database: down", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	closed := httptest.NewServer(http.NotFoundHandler())
	closedAddr := strings.TrimPrefix(closed.URL, "http://")
	closed.Close() // nothing listens there any more

	tests := []struct {
		name       string
		args       []string
		ready      bool
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "ready", args: []string{"-metrics-addr", addr}, ready: true, wantCode: 0, wantStdout: "ready"},
		{name: "not ready", args: []string{"-metrics-addr", addr}, wantCode: 1, wantStderr: "503 not ready: database: down"},
		{name: "nothing listening", args: []string{"-metrics-addr", closedAddr}, ready: true, wantCode: 1, wantStderr: "refused"},
		{name: "metrics off", args: []string{"-metrics-addr", "off"}, ready: true, wantCode: 1, wantStderr: "METRICS_ADDR is off"},
		// A configuration error is unhealthy (1), never Docker's reserved 2.
		{name: "bad setting", args: []string{"-metrics-addr", "nope"}, ready: true, wantCode: 1, wantStderr: "S3GATE_METRICS_ADDR"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ready = tc.ready
			var stdout, stderr bytes.Buffer
			code := healthcheck(tc.args, nil, &stdout, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d (stdout %q, stderr %q)", code, tc.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Fatalf("stdout %q, stderr %q; want %q / %q", stdout.String(), stderr.String(), tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

// startServe runs `serve` on the embedded default with the S3 listener on a
// free port and returns the metrics address from its "s3gate serving" log
// line, a stop function and serve's exit code.
func startServe(t *testing.T, metricsAddr string, environ ...string) (metrics string, stop func() int) {
	t.Helper()
	cfg, err := config.Load(nil, append([]string{
		"S3GATE_ADDR=127.0.0.1:0",
		"S3GATE_METRICS_ADDR=" + metricsAddr,
		"S3GATE_DATA_DIR=" + t.TempDir(),
		"S3GATE_LOG_FORMAT=json",
		"S3GATE_DRAIN_TIMEOUT=5s",
	}, environ...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	serving := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() { // read every line, so that logging never blocks
			var line struct{ Msg, Metrics string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "s3gate serving" {
				serving <- line.Metrics
			}
		}
		close(serving)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- serve(ctx, cfg, newLogger(cfg, pw), io.Discard) }()
	stop = func() int {
		cancel()
		code := <-done
		_ = pw.Close()
		return code
	}
	metrics, ok := <-serving
	if !ok {
		t.Fatalf("serve exited %d before serving", stop())
	}
	return metrics, stop
}

// TestServeMetricsListener: the logged metrics address answers /healthz,
// /metrics and the healthcheck command, and stops with the gateway.
func TestServeMetricsListener(t *testing.T) {
	base, stop := startServe(t, "127.0.0.1:0")
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		stop()
		t.Fatalf("serving line logged metrics %q", base)
	}
	addr := strings.TrimPrefix(base, "http://")
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": "s3gate_requests_in_flight"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d %q (%v)", path, resp.StatusCode, b, err)
		}
	}
	var out bytes.Buffer
	if code := healthcheck([]string{"-metrics-addr", addr}, nil, &out, &out); code != 0 {
		t.Fatalf("healthcheck of a running gateway: exit %d: %s", code, out.String())
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	out.Reset()
	if code := healthcheck([]string{"-metrics-addr", addr}, nil, &out, &out); code != 1 {
		t.Fatalf("healthcheck after the stop: exit %d, want 1: %s", code, out.String())
	}
}

func TestServeMetricsOff(t *testing.T) {
	metrics, stop := startServe(t, "off")
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if metrics != "off" {
		t.Fatalf("the serving line logged metrics %q, want off", metrics)
	}
}
