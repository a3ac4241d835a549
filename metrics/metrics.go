// Package metrics exports the gateway's Prometheus metrics and its health
// endpoints on a listener of their own (S3GATE_METRICS_ADDR): request counts,
// durations and bytes by S3 operation, in-flight requests, database pool
// statistics, blob counts and bytes by tier and dedup savings; /healthz
// (the process is alive) and /readyz (the engine can serve).
//
// Everything is registered on a registry of its own, never on the global
// default, so that several gateways in one test process do not collide.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric name.
const Namespace = "s3gate"

// DefaultReadyTimeout bounds one readiness check.
const DefaultReadyTimeout = 5 * time.Second

// durationBuckets span small requests (milliseconds) to large transfers
// (minutes): S3 latency is dominated by object size.
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics is the registry of one gateway and its request metrics.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	bytesIn   *prometheus.CounterVec
	bytesOut  *prometheus.CounterVec
	inFlight  prometheus.Gauge
	log       *slog.Logger
	readyTime time.Duration
}

// New returns a registry with the Go runtime and process collectors,
// s3gate_build_info and the request metrics. log receives readiness failures
// (nil: discarded).
func New(log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "requests_total",
			Help: "S3 requests answered, by operation and status class (2xx, 4xx, ...; aborted: the handler gave up mid-answer).",
		}, []string{"operation", "status_class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "request_duration_seconds",
			Help:    "Time from receiving an S3 request's headers to the end of its answer, by operation.",
			Buckets: durationBuckets,
		}, []string{"operation"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "request_bytes_total",
			Help: "Request body bytes read (as sent: aws-chunked framing included), by operation.",
		}, []string{"operation"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "response_bytes_total",
			Help: "Response body bytes written, by operation.",
		}, []string{"operation"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "requests_in_flight",
			Help: "S3 requests being served.",
		}),
		log:       log,
		readyTime: DefaultReadyTimeout,
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.duration, m.bytesIn, m.bytesOut, m.inFlight,
		newBuildInfo(),
	)
	return m
}

// Registry is the registry behind /metrics, for further collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ReadyFunc reports whether the gateway can serve; its error is the reason.
type ReadyFunc func(ctx context.Context) error

// Handler serves /metrics, /healthz and /readyz. ready may be nil (always
// ready).
func (m *Metrics) Handler(ready ReadyFunc) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failing collector drops its own metrics, not the whole scrape.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(m.log.Handler(), slog.LevelWarn),
		Registry:      m.reg, // promhttp_metric_handler_errors_total
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		plain(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if ready == nil {
			plain(w, http.StatusOK, "ready")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), m.readyTime)
		defer cancel()
		if err := ready(ctx); err != nil {
			m.log.Warn("not ready", "err", err)
			plain(w, http.StatusServiceUnavailable, "not ready: "+reason(err))
			return
		}
		plain(w, http.StatusOK, "ready")
	})
	return mux
}

// ErrDraining is the readiness error of a gateway that is shutting down.
var ErrDraining = errors.New("draining")

// maxReason caps the reason in a /readyz answer: one short line.
const maxReason = 200

func reason(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > maxReason {
		s = strings.ToValidUTF8(s[:maxReason], "") + "..."
	}
	return s
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body + "\n")) // the client hung up: nothing to do
}
