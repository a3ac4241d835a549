package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/s3api"
)

// metricsShutdown bounds the stop of the metrics listener: its requests are
// short (a scrape, a probe).
const metricsShutdown = 5 * time.Second

// Roles of an instance, the label of s3gate_role.
const (
	// RoleOwner serves: it holds the writer claim on PostgreSQL, or runs the
	// embedded default.
	RoleOwner = "owner"
	// RoleStandby waits for the writer claim; it serves only its health and
	// metrics endpoints.
	RoleStandby = "standby"
)

// newMetrics creates the metrics registry with s3gate_role, first thing in
// New: a standby serves it while it waits.
func (s *Server) newMetrics() error {
	s.metrics = metrics.New(s.log)
	s.role.Store(RoleOwner)
	c := roleCollector{s: s, desc: prometheus.NewDesc(prometheus.BuildFQName(metrics.Namespace, "", "role"),
		"The instance's role, one series: owner (it holds the database's writer claim, or runs the embedded default), standby (it waits for the claim) or replica (read-only, no claim). The owner series turns 0 once the claim is lost and the instance stops.",
		[]string{"role"}, nil)}
	if err := s.metrics.Registry().Register(c); err != nil {
		return fmt.Errorf("metrics: role: %w", err)
	}
	return nil
}

// roleCollector exports s3gate_role: only the current role's series, so that
// a standby reports no owner series that an alert would read as a lost claim.
type roleCollector struct {
	s    *Server
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c roleCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c roleCollector) Collect(ch chan<- prometheus.Metric) {
	v := 1.0
	if c.s.started.Load() { // s.claim is set for good by then
		select {
		case <-c.s.lostClaim():
			v = 0
		default:
		}
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, c.s.Role())
}

// Role is the instance's current role: RoleOwner or RoleStandby.
func (s *Server) Role() string { return s.role.Load().(string) }

// instrument registers the engine's collectors and wraps the S3 handler in
// the request metrics middleware.
func (s *Server) instrument() error {
	m := s.metrics
	if p, ok := s.engine.(interface{ Pool() *pgxpool.Pool }); ok {
		if err := m.RegisterPool(p.Pool().Stat); err != nil {
			return fmt.Errorf("metrics: pool: %w", err)
		}
	}
	if err := m.RegisterBlobStats(s.engine.BlobStats, time.Duration(s.cfg.MetricsStatsTTL)); err != nil {
		return fmt.Errorf("metrics: blob stats: %w", err)
	}
	if err := s.registerStateMetrics(m.Registry()); err != nil {
		return err
	}
	if err := s.registerDBMetrics(m.Registry()); err != nil {
		return err
	}
	// The route is resolved once, here, and carried to the S3 handler.
	domain := s.cfg.Domain
	counted := m.Middleware(s.handler, func(r *http.Request) string { return s3api.RouteOf(r, domain).Op })
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counted.ServeHTTP(w, s3api.WithRoute(r, domain))
	})
	return nil
}

// registerStateMetrics exports what an operator alerts on beside the
// counters: readiness (the /readyz check, run at scrape time), the role and
// the pin cap.
func (s *Server) registerStateMetrics(reg prometheus.Registerer) error {
	gauge := func(name, help string, labels prometheus.Labels, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Name: name, Help: help, ConstLabels: labels}, f)
	}
	for _, c := range []prometheus.Collector{
		gauge("ready", "1 while the instance can serve S3 requests (what /readyz answers 200 for), 0 while it cannot or drains.", nil, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), metrics.DefaultReadyTimeout)
			defer cancel()
			if s.Ready(ctx) != nil {
				return 0
			}
			return 1
		}),
		gauge("pins_max", "The per-instance pin cap ("+config.Prefix+"MAX_PINS): s3gate_pins_held at this value refuses GETs with 503 SlowDown.", nil, func() float64 { return float64(s.cfg.MaxPins) }),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: state: %w", err)
		}
	}
	return nil
}

// Metrics is the gateway's metrics registry, for further collectors.
func (s *Server) Metrics() *metrics.Metrics { return s.metrics }

// Ready reports whether the gateway can serve S3 requests: it is not draining,
// the database answers, the schema is current and the storage is writable.
func (s *Server) Ready(ctx context.Context) error {
	if s.draining.Load() {
		return metrics.ErrDraining
	}
	if err := s.engine.Ready(ctx); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	return nil
}

// MetricsHandler serves /metrics, /healthz and /readyz. Until New has
// returned /readyz answers 503 "standby" (waiting for the writer claim) or
// "starting", without a log line per probe.
func (s *Server) MetricsHandler() http.Handler {
	h := s.metrics.Handler(s.Ready)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/readyz" && !s.started.Load() {
			state := "starting"
			if s.Role() == RoleStandby {
				state = RoleStandby
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, state+"\n")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// metricsServer serves MetricsHandler on one listener.
type metricsServer struct {
	ln   net.Listener
	hs   *http.Server
	errc chan error // Serve's end
	once sync.Once
	err  error // of stop
}

func (s *Server) startMetrics(ln net.Listener) *metricsServer {
	m := &metricsServer{ln: ln, errc: make(chan error, 1), hs: &http.Server{
		Handler:           s.MetricsHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}}
	go func() { m.errc <- m.hs.Serve(ln) }()
	return m
}

// stop shuts the server down (once) by the deadline.
func (m *metricsServer) stop(by time.Time) error {
	m.once.Do(func() {
		ctx, cancel := context.WithDeadline(context.Background(), by)
		defer cancel()
		if err := m.hs.Shutdown(ctx); err != nil {
			m.err = errors.Join(fmt.Errorf("stop metrics: %w", err), m.hs.Close())
		}
	})
	return m.err
}

// serveStandbyMetrics opens METRICS_ADDR while New waits as a standby, so
// that probes and scrapes see it alive; serve hands the listener on to
// ServeMetrics (MetricsListener).
func (s *Server) serveStandbyMetrics() error {
	if s.cfg.MetricsAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("listen on %sMETRICS_ADDR: %w", config.Prefix, err)
	}
	m := s.startMetrics(ln)
	s.standbyMetrics = m
	s.onClose("stop the standby's metrics listener", func() error {
		return m.stop(s.deadline(metricsShutdown))
	})
	s.log.Info("standby: health and metrics served", "metrics", "http://"+ln.Addr().String())
	return nil
}

// MetricsListener is the listener of METRICS_ADDR that New opened, already
// serving, while it waited as a standby; nil if it opened none. Pass it to
// ServeMetrics instead of listening again.
func (s *Server) MetricsListener() net.Listener {
	if s.standbyMetrics == nil {
		return nil
	}
	return s.standbyMetrics.ln
}

// ServeMetrics serves MetricsHandler on ln (plain HTTP) until ctx is
// cancelled. Stop it after Serve returned, so that probes see the drain.
func (s *Server) ServeMetrics(ctx context.Context, ln net.Listener) error {
	m := s.standbyMetrics
	if m == nil || m.ln != ln {
		m = s.startMetrics(ln)
	}
	select {
	case err := <-m.errc:
		return fmt.Errorf("serve metrics: %w", err)
	case <-ctx.Done():
	}
	return m.stop(s.deadline(metricsShutdown)) // within the shutdown budget
}
