package metrics

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/s3gate/s3gate/store"
)

func fixedOp(op string) func(*http.Request) string { return func(*http.Request) string { return op } }

func TestMiddlewareCounts(t *testing.T) {
	tests := []struct {
		name      string
		body      string // request body
		handler   http.HandlerFunc
		wantClass string
		wantIn    float64
		wantOut   float64
	}{
		{name: "implicit 200", handler: func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "hello")
		}, wantClass: "2xx", wantOut: 5},
		{name: "nothing written", handler: func(http.ResponseWriter, *http.Request) {}, wantClass: "2xx"},
		{name: "created", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "ab")
		}, wantClass: "2xx", wantOut: 2},
		{name: "not found", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "<Error/>")
		}, wantClass: "4xx", wantOut: 8},
		{name: "unavailable", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}, wantClass: "5xx"},
		{name: "not modified", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusNotModified)
		}, wantClass: "3xx"},
		{name: "continue is not final", body: "0123456789", handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusContinue)
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				t.Error(err)
			}
			w.WriteHeader(http.StatusNoContent)
		}, wantClass: "2xx", wantIn: 10},
		{name: "body read", body: strings.Repeat("x", 1000), handler: func(w http.ResponseWriter, r *http.Request) {
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil || n != 1000 {
				t.Errorf("read %d, %v", n, err)
			}
			w.WriteHeader(http.StatusOK)
		}, wantClass: "2xx", wantIn: 1000},
		{name: "body partly read", body: strings.Repeat("x", 1000), handler: func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.ReadFull(r.Body, make([]byte, 300)); err != nil {
				t.Error(err)
			}
			w.WriteHeader(http.StatusBadRequest)
		}, wantClass: "4xx", wantIn: 300},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New(nil)
			h := m.Middleware(tc.handler, fixedOp("PutObject"))
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/b/k", body))
			if got := testutil.ToFloat64(m.requests.WithLabelValues("PutObject", tc.wantClass)); got != 1 {
				t.Errorf("requests_total{PutObject,%s} = %v, want 1", tc.wantClass, got)
			}
			if got := testutil.CollectAndCount(m.requests); got != 1 {
				t.Errorf("%d request series, want exactly one", got)
			}
			if got := testutil.ToFloat64(m.bytesIn.WithLabelValues("PutObject")); got != tc.wantIn {
				t.Errorf("request bytes %v, want %v", got, tc.wantIn)
			}
			if got := testutil.ToFloat64(m.bytesOut.WithLabelValues("PutObject")); got != tc.wantOut {
				t.Errorf("response bytes %v, want %v", got, tc.wantOut)
			}
			if got := histogramCount(t, m.duration, "PutObject"); got != 1 {
				t.Errorf("duration observations %d, want 1", got)
			}
			if got := testutil.ToFloat64(m.inFlight); got != 0 {
				t.Errorf("in flight after the request: %v", got)
			}
		})
	}
}

func histogramCount(t *testing.T, h *prometheus.HistogramVec, op string) uint64 {
	t.Helper()
	var pb dto.Metric
	if err := h.WithLabelValues(op).(prometheus.Metric).Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetHistogram().GetSampleCount()
}

func TestMiddlewareInFlightAndPanic(t *testing.T) {
	m := New(nil)
	var during float64
	h := m.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		during = testutil.ToFloat64(m.inFlight)
		if r.URL.Path == "/abort" {
			w.WriteHeader(http.StatusOK)
			panic(http.ErrAbortHandler)
		}
	}), func(r *http.Request) string { return "GetObject" })

	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/ok", nil))
	if during != 1 {
		t.Fatalf("in flight during the request: %v, want 1", during)
	}
	func() {
		defer func() {
			if rec := recover(); rec != http.ErrAbortHandler { //nolint:errorlint // sentinel identity
				t.Fatalf("panic %v was not passed on", rec)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/abort", nil))
	}()
	if got := testutil.ToFloat64(m.requests.WithLabelValues("GetObject", StatusAborted)); got != 1 {
		t.Fatalf("aborted requests %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("GetObject", "2xx")); got != 1 {
		t.Fatalf("2xx requests %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.inFlight); got != 0 {
		t.Fatalf("in flight after a panic: %v", got)
	}
}

// TestMiddlewareKeepsResponseController proves that a handler behind the
// middleware can still flush (the client receives the first bytes while the
// handler waits) and set per-write deadlines.
func TestMiddlewareKeepsResponseController(t *testing.T) {
	m := New(nil)
	release := make(chan struct{})
	errs := make(chan error, 3)
	h := m.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rc := http.NewResponseController(w)
		errs <- rc.SetWriteDeadline(time.Now().Add(time.Minute))
		if _, ok := w.(http.Flusher); !ok {
			errs <- errors.New("the wrapped writer is no http.Flusher")
		}
		_, _ = io.WriteString(w, "first\n")
		errs <- rc.Flush()
		<-release // the client must see "first" before we go on
		_, _ = io.WriteString(w, "second\n")
	}), fixedOp("GetObject"))
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	if rest, err := io.ReadAll(br); err != nil || string(rest) != "second\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("response controller: %v", err)
		}
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if got := testutil.ToFloat64(m.bytesOut.WithLabelValues("GetObject")); got != 13 {
		t.Fatalf("response bytes %v, want 13", got)
	}
}

func TestHealthHandler(t *testing.T) {
	long := strings.Repeat("é", 300)
	tests := []struct {
		name     string
		ready    ReadyFunc
		path     string
		wantCode int
		wantBody string
	}{
		{name: "healthz", path: "/healthz", ready: func(context.Context) error { return errors.New("db down") },
			wantCode: 200, wantBody: "ok"},
		{name: "ready", path: "/readyz", ready: func(context.Context) error { return nil }, wantCode: 200, wantBody: "ready"},
		{name: "nil ready", path: "/readyz", wantCode: 200, wantBody: "ready"},
		{name: "not ready", path: "/readyz", ready: func(context.Context) error {
			return errors.New("database: connection\nrefused")
		}, wantCode: 503, wantBody: "not ready: database: connection refused"},
		{name: "draining", path: "/readyz", ready: func(context.Context) error { return ErrDraining },
			wantCode: 503, wantBody: "not ready: draining"},
		{name: "deadline", path: "/readyz", ready: func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline")
			}
			return nil
		}, wantCode: 200, wantBody: "ready"},
		{name: "long reason", path: "/readyz", ready: func(context.Context) error { return errors.New(long) },
			wantCode: 503, wantBody: "not ready: " + strings.Repeat("é", 100) + "..."},
		{name: "unknown path", path: "/nope", wantCode: 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := New(nil).Handler(tc.ready)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.wantCode {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.wantCode, rec.Body)
			}
			if tc.wantBody != "" && strings.TrimSpace(rec.Body.String()) != tc.wantBody {
				t.Fatalf("body %q, want %q", rec.Body, tc.wantBody)
			}
		})
	}
}

func TestMetricsEndpoint(t *testing.T) {
	m := New(nil)
	m.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), fixedOp("ListBuckets")).
		ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	rec := httptest.NewRecorder()
	m.Handler(nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`s3gate_requests_total{operation="ListBuckets",status_class="2xx"} 1`,
		`s3gate_request_duration_seconds_count{operation="ListBuckets"} 1`,
		`s3gate_requests_in_flight 0`,
		`go_goroutines `,
		`process_cpu_seconds_total `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// fakeStats is a BlobStatsFunc that counts its calls.
type fakeStats struct {
	mu    sync.Mutex
	calls int
	st    store.BlobStats
	err   error
}

func (f *fakeStats) get(context.Context) (store.BlobStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.st, f.err
}

func TestBlobCollectorCachesAndReports(t *testing.T) {
	src := &fakeStats{st: store.BlobStats{
		Tiers:           map[string]store.TierStats{store.TierInline: {Blobs: 3, Bytes: 300}, store.TierLocal: {Blobs: 1, Bytes: 5000}},
		LogicalBytes:    9000,
		ReferencedBytes: 5200,
		Buckets: []store.BucketUsage{{Bucket: "backups", Objects: 4, ObjectBytes: 8000, NoncurrentVersions: 2, NoncurrentBytes: 1000, DeleteMarkers: 1, Uploads: 3},
			{Bucket: "empty"}},
	}}
	now := time.Unix(1000, 0)
	c := newBlobCollector(src.get, 10*time.Second, func() time.Time { return now }, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)

	want := `
# HELP s3gate_blob_bytes Bytes of stored blobs by tier, unreferenced ones awaiting GC included.
# TYPE s3gate_blob_bytes gauge
s3gate_blob_bytes{tier="inline"} 300
s3gate_blob_bytes{tier="local"} 5000
# HELP s3gate_blobs Stored blobs (distinct contents) by tier, unreferenced ones awaiting GC included.
# TYPE s3gate_blobs gauge
s3gate_blobs{tier="inline"} 3
s3gate_blobs{tier="local"} 1
# HELP s3gate_bucket_delete_markers Delete markers by bucket, latest or not.
# TYPE s3gate_bucket_delete_markers gauge
s3gate_bucket_delete_markers{bucket="backups"} 1
s3gate_bucket_delete_markers{bucket="empty"} 0
# HELP s3gate_bucket_noncurrent_versions Noncurrent versions (delete markers not included) by bucket.
# TYPE s3gate_bucket_noncurrent_versions gauge
s3gate_bucket_noncurrent_versions{bucket="backups"} 2
s3gate_bucket_noncurrent_versions{bucket="empty"} 0
# HELP s3gate_bucket_object_bytes Bytes of the current objects by bucket.
# TYPE s3gate_bucket_object_bytes gauge
s3gate_bucket_object_bytes{bucket="backups"} 8000
s3gate_bucket_object_bytes{bucket="empty"} 0
# HELP s3gate_bucket_objects Current objects (latest versions that are not delete markers) by bucket.
# TYPE s3gate_bucket_objects gauge
s3gate_bucket_objects{bucket="backups"} 4
s3gate_bucket_objects{bucket="empty"} 0
# HELP s3gate_bucket_uploads Multipart uploads in progress by bucket.
# TYPE s3gate_bucket_uploads gauge
s3gate_bucket_uploads{bucket="backups"} 3
s3gate_bucket_uploads{bucket="empty"} 0
# HELP s3gate_dedup_saved_bytes Bytes saved by deduplication: logical bytes of objects minus the bytes of the distinct blobs they reference.
# TYPE s3gate_dedup_saved_bytes gauge
s3gate_dedup_saved_bytes 3800
# HELP s3gate_object_logical_bytes Sum of the sizes of all objects, as clients see them.
# TYPE s3gate_object_logical_bytes gauge
s3gate_object_logical_bytes 9000
`
	names := []string{"s3gate_blobs", "s3gate_blob_bytes", "s3gate_dedup_saved_bytes", "s3gate_object_logical_bytes",
		"s3gate_bucket_objects", "s3gate_bucket_object_bytes", "s3gate_bucket_noncurrent_versions", "s3gate_bucket_delete_markers", "s3gate_bucket_uploads"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// Within the TTL a scrape reuses the result.
	now = now.Add(9 * time.Second)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if src.calls != 1 {
		t.Fatalf("%d computations within the TTL, want 1", src.calls)
	}
	// After it, the source is asked again; a failure drops the blob metrics
	// and counts the error, and is itself cached.
	now = now.Add(2 * time.Second)
	src.err = errors.New("database down")
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != 0 {
		t.Fatalf("%d blob series while the source fails (%v), want none", n, err)
	}
	if got := errorCount(t, reg); got != 1 {
		t.Fatalf("errors_total %v, want 1", got)
	}
	if _, err := testutil.GatherAndCount(reg); err != nil {
		t.Fatal(err)
	}
	if src.calls != 2 {
		t.Fatalf("%d computations, want 2 (the failure is cached for the TTL)", src.calls)
	}
	// Recovery.
	now = now.Add(11 * time.Second)
	src.err = nil
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if got := errorCount(t, reg); got != 1 {
		t.Fatalf("errors_total %v after recovery, want still 1", got)
	}
}

func TestBlobCollectorWithoutCache(t *testing.T) {
	src := &fakeStats{st: store.BlobStats{Tiers: map[string]store.TierStats{}}}
	c := newBlobCollector(src.get, 0, time.Now, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for range 3 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	if src.calls != 3 {
		t.Fatalf("%d computations for 3 scrapes with TTL 0", src.calls)
	}
}

func errorCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "s3gate_blob_stats_errors_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no s3gate_blob_stats_errors_total")
	return 0
}

func TestPoolCollector(t *testing.T) {
	// pgxpool connects lazily: a pool that never dialled still has statistics.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?pool_max_conns=7")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m := New(nil)
	if err := m.RegisterPool(pool.Stat); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP s3gate_db_pool_max_connections Largest size of the pool.
# TYPE s3gate_db_pool_max_connections gauge
s3gate_db_pool_max_connections 7
# HELP s3gate_db_pool_total_connections Connections in the pool: acquired, idle and being opened.
# TYPE s3gate_db_pool_total_connections gauge
s3gate_db_pool_total_connections 0
# HELP s3gate_db_pool_acquires_total Successful connection acquisitions.
# TYPE s3gate_db_pool_acquires_total counter
s3gate_db_pool_acquires_total 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"s3gate_db_pool_max_connections", "s3gate_db_pool_total_connections", "s3gate_db_pool_acquires_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(m.Registry()); err != nil || n == 0 {
		t.Fatalf("gather: %d, %v", n, err)
	}
	// A second pool collector would collide with the first.
	if err := m.RegisterPool(pool.Stat); err == nil {
		t.Fatal("registering the pool twice succeeded")
	}
}

// TestNamingConventions runs Prometheus' own linter (what promtool check
// metrics does) over every s3gate_ metric.
func TestNamingConventions(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m := New(nil)
	if err := m.RegisterPool(pool.Stat); err != nil {
		t.Fatal(err)
	}
	src := &fakeStats{st: store.BlobStats{Tiers: map[string]store.TierStats{store.TierInline: {Blobs: 1, Bytes: 2}}}}
	if err := m.RegisterBlobStats(src.get, 0); err != nil {
		t.Fatal(err)
	}
	h := m.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "x")
	}), fixedOp("PutObject"))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPut, "/b/k", strings.NewReader("body")))

	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ours []*dto.MetricFamily
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), Namespace+"_") {
			ours = append(ours, mf)
		}
	}
	if len(ours) < 20 {
		t.Fatalf("only %d s3gate metric families gathered", len(ours))
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
