package server_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
)

const unsignedPayload = "UNSIGNED-PAYLOAD"

// drainGateway is a gateway on the embedded engine whose Serve context the
// test controls.
type drainGateway struct {
	srv      *server.Server
	addr     string // S3 listener
	metrics  string // base URL of the metrics listener
	cancel   context.CancelFunc
	served   chan error // Serve's result
	stopMets context.CancelFunc
	metsDone chan struct{} // closed when ServeMetrics returned metsErr
	metsErr  error
}

func startDrainGateway(t *testing.T, drain string) *drainGateway {
	t.Helper()
	return startGateway(t, gatewaySetup{env: []string{"S3GATE_DATA_DIR=" + t.TempDir(), "S3GATE_DRAIN_TIMEOUT=" + drain}})
}

// gatewaySetup chooses a gateway for startGateway.
type gatewaySetup struct {
	env      []string     // settings beyond the root key
	log      *slog.Logger // nil: discarded
	stepHook func(string) // server.SetStepHook, if set
}

// startGateway builds a gateway with server.New and serves it on 127.0.0.1.
func startGateway(t *testing.T, gs gatewaySetup) *drainGateway {
	t.Helper()
	cfg, err := config.Load(nil, append([]string{
		"S3GATE_ROOT_ACCESS_KEY=" + testgw.AccessKey,
		"S3GATE_ROOT_SECRET_KEY=" + testgw.SecretKey,
	}, gs.env...), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if gs.log == nil {
		gs.log = slog.New(slog.DiscardHandler)
	}
	srv, err := server.New(context.Background(), cfg, gs.log)
	if err != nil {
		t.Fatal(err)
	}
	if gs.stepHook != nil {
		server.SetStepHook(srv, gs.stepHook)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mctx, mcancel := context.WithCancel(context.Background())
	g := &drainGateway{srv: srv, addr: ln.Addr().String(), metrics: "http://" + mln.Addr().String(),
		cancel: cancel, served: make(chan error, 1), stopMets: mcancel, metsDone: make(chan struct{})}
	go func() { g.served <- srv.Serve(ctx, ln) }()
	go func() { g.metsErr = srv.ServeMetrics(mctx, mln); close(g.metsDone) }()
	t.Cleanup(func() {
		cancel()
		mcancel()
		if <-g.metsDone; g.metsErr != nil {
			t.Errorf("metrics listener: %v", g.metsErr)
		}
		srv.Close()
	})
	return g
}

func (g *drainGateway) request(t *testing.T, method, path string, body io.Reader, size int64, hash string) *http.Request {
	return signedRequest(t, method, "http://"+g.addr+path, body, size, hash, "us-east-1", testgw.AccessKey, testgw.SecretKey)
}

func emptyHash() string { h := sha256.Sum256(nil); return hex.EncodeToString(h[:]) }

// startSlowPut creates the bucket and starts a PUT whose body the test feeds:
// the first half is sent, and the call returns once the gateway counts the
// request in flight.
func startSlowPut(t *testing.T, g *drainGateway, content []byte) (*io.PipeWriter, chan *http.Response, chan error) {
	t.Helper()
	resp, err := http.DefaultClient.Do(g.request(t, http.MethodPut, "/drain", nil, 0, emptyHash()))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("CreateBucket: %d", resp.StatusCode)
	}
	pr, pw := io.Pipe()
	req := g.request(t, http.MethodPut, "/drain/slow", pr, int64(len(content)), unsignedPayload)
	// A client of its own: the slow request must not share a connection.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resps, errs := make(chan *http.Response, 1), make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			errs <- err
			return
		}
		resps <- resp
	}()
	if _, err := pw.Write(content[:len(content)/2]); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for scrapeMetrics(t, g.metrics).v("s3gate_requests_in_flight") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the slow PUT never showed up in flight")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return pw, resps, errs
}

// TestDrainCompletesInFlightRequest proves the graceful shutdown: once the
// Serve context is cancelled, new connections are refused and /readyz answers
// 503, while a PUT already in flight still completes and is stored.
func TestDrainCompletesInFlightRequest(t *testing.T) {
	g := startDrainGateway(t, "60s")
	content := bytes.Repeat([]byte("drain me "), 20000) // 180 kB, inline
	pw, resps, errs := startSlowPut(t, g, content)

	g.cancel() // what the first SIGTERM does in cmd/s3gate

	deadline := time.Now().Add(waitLimit)
	for {
		c, err := net.Dial("tcp", g.addr)
		if errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		switch {
		case errors.Is(err, syscall.ECONNRESET):
			// Queued in the backlog as the listener closed: dropped.
		case err != nil:
			t.Fatalf("dial during the drain: %v, want connection refused", err)
		default:
			_ = c.Close() // an open new connection would hold up the drain
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener still accepts during the drain")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, body := get(t, g.metrics+"/readyz"); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("/readyz during the drain: %d %q", code, body)
	}
	select {
	case err := <-g.served:
		t.Fatalf("Serve returned while a request was in flight: %v", err)
	default:
	}

	if _, err := pw.Write(content[len(content)/2:]); err != nil {
		t.Fatalf("finish the body: %v", err)
	}
	_ = pw.Close()
	var resp *http.Response
	select {
	case resp = <-resps:
	case err := <-errs:
		t.Fatalf("the in-flight PUT failed during the drain: %v", err)
	}
	_ = resp.Body.Close()
	sum := md5.Sum(content)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != `"`+hex.EncodeToString(sum[:])+`"` {
		t.Fatalf("in-flight PUT: %d ETag %s", resp.StatusCode, resp.Header.Get("ETag"))
	}
	if err := <-g.served; err != nil {
		t.Fatalf("Serve after the drain: %v", err)
	}
	// The object is stored: read it back through the handler.
	rec := httptest.NewRecorder()
	g.srv.Handler().ServeHTTP(rec, g.request(t, http.MethodGet, "/drain/slow", nil, 0, emptyHash()))
	if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), content) {
		t.Fatalf("GET after the drain: %d, %d bytes", rec.Code, rec.Body.Len())
	}
}

// TestDrainIsBounded: a request that never finishes does not hold the
// shutdown beyond the drain timeout; Serve reports the cut drain.
func TestDrainIsBounded(t *testing.T) {
	g := startDrainGateway(t, "100ms")
	pw, _, _ := startSlowPut(t, g, make([]byte, 4096))
	defer pw.Close()
	g.cancel()
	err := <-g.served
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Serve with a stuck request: %v, want the drain deadline", err)
	}
}

// TestShutdownStepsAreBounded: a step after the HTTP drain that never ends
// (injected through the step hook) does not hold the shutdown — Serve, the
// metrics listener's stop and Close — past the drain timeout; it is logged
// and abandoned.
func TestShutdownStepsAreBounded(t *testing.T) {
	const drain = 2 * time.Second
	for _, step := range []string{"stop online GC", "close database pool"} {
		t.Run(step, func(t *testing.T) {
			block := make(chan struct{})
			defer close(block) // lets the abandoned step end
			log := newLogSink()
			g := startGateway(t, gatewaySetup{env: pgEnv(t, pgtest.DSN(t), "S3GATE_DRAIN_TIMEOUT="+drain.String()),
				log: log.logger(), stepHook: func(name string) {
					if name == step {
						<-block
					}
				}})
			start := time.Now()
			g.cancel()
			if err := <-g.served; err != nil {
				t.Fatalf("Serve: %v", err)
			}
			g.stopMets()
			<-g.metsDone
			g.srv.Close()
			// The slack covers scheduling only; without the bound the
			// shutdown would wait for the step forever.
			if took := time.Since(start); took > drain+time.Second {
				t.Fatalf("shutdown took %v with %q blocked, want at most the drain timeout %v", took, step, drain)
			}
			log.waitFor(t, `msg="shutdown step abandoned: not done within S3GATE_DRAIN_TIMEOUT" step="`+step+`"`)
		})
	}
}
