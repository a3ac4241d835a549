package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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

// instrument creates the metrics registry, registers the engine's collectors
// and wraps the S3 handler in the request metrics middleware.
func (s *Server) instrument() error {
	m := metrics.New(s.log)
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
	domain := s.cfg.Domain
	s.handler = m.Middleware(s.handler, func(r *http.Request) string {
		op, _, _, _ := s3api.ResolveOperation(r, domain)
		return op
	})
	s.metrics = m
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
		gauge("role", "1 for the role this instance has: owner (it holds the database's writer claim, or owns its embedded data directory); 0 once that ownership is lost and the instance stops.", prometheus.Labels{"role": "owner"}, func() float64 {
			select {
			case <-s.lostClaim():
				return 0
			default:
				return 1
			}
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

// MetricsHandler serves /metrics, /healthz and /readyz.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.Handler(s.Ready) }

// ServeMetrics serves MetricsHandler on ln (plain HTTP) until ctx is
// cancelled. Stop it after Serve returned, so that probes see the drain.
func (s *Server) ServeMetrics(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.MetricsHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve metrics: %w", err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithDeadline(context.Background(), s.deadline(metricsShutdown)) // within the shutdown budget
	defer cancel()
	if err := hs.Shutdown(stop); err != nil {
		return errors.Join(fmt.Errorf("stop metrics: %w", err), hs.Close())
	}
	return nil
}
