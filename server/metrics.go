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
	domain := s.cfg.Domain
	s.handler = m.Middleware(s.handler, func(r *http.Request) string {
		op, _, _, _ := s3api.ResolveOperation(r, domain)
		return op
	})
	s.metrics = m
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
