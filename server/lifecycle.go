package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/lifecycle"
	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/store"
)

// clockTimeout bounds one read of the database clock.
const clockTimeout = 5 * time.Second

// lifecycleRunner builds the runner of the bucket lifecycle rules: on
// PostgreSQL under the lifecycle lease and on the database's clock (which
// stamped every LastModified); on the embedded default without a lease (one
// process owns the data directory) on this process's clock (which stamped
// them there).
func (s *Server) lifecycleRunner(ctx context.Context, m *lifecycle.Metrics) (*lifecycle.Runner, error) {
	r := &lifecycle.Runner{
		Store:    store.New(s.engine),
		Interval: time.Duration(s.cfg.LifecycleInterval),
		Options: lifecycle.Options{
			Day:     time.Duration(s.cfg.LifecycleDay),
			Logger:  s.log,
			Metrics: m,
			Now:     func(context.Context) (time.Time, error) { return time.Now(), nil },
		},
		Lease: lease.Config{Holder: string(s.InstanceID())},
	}
	if r.Lease.Holder == "" { // not in fleet mode: this process
		host, err := os.Hostname()
		if err != nil {
			host = "unknown"
		}
		r.Lease.Holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if e, ok := s.engine.(interface{ Pool() *pgxpool.Pool }); ok {
		pool := e.Pool()
		leases, err := lease.NewPGStore(ctx, pool)
		if err != nil {
			return nil, fmt.Errorf("lifecycle: %w", err)
		}
		r.Leases = leases
		r.Options.Now = func(ctx context.Context) (t time.Time, err error) {
			ctx, cancel := context.WithTimeout(ctx, clockTimeout)
			defer cancel()
			if err := pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
				return t, fmt.Errorf("database clock: %w", err)
			}
			return t, nil
		}
	}
	return r, nil
}

// startLifecycle applies the lifecycle rules every LIFECYCLE_INTERVAL while
// ctx lives (0 disables it; a replica deletes nothing). The returned channel
// closes when it stopped.
func (s *Server) startLifecycle(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if s.cfg.LifecycleInterval <= 0 || s.readOnly || s.lcMetrics == nil {
		close(done)
		return done
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.work, cancel) // lost ownership stops it too
	go func() {
		defer close(done)
		defer stop()
		defer cancel()
		r, err := s.lifecycleRunner(ctx, s.lcMetrics)
		if err != nil {
			s.log.Error("lifecycle runner not started", "err", err)
			return
		}
		if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error("lifecycle runner stopped", "err", err)
		}
	}()
	return done
}

// registerLifecycleMetrics exports the runner's counters.
func registerLifecycleMetrics(reg prometheus.Registerer, m *lifecycle.Metrics) error {
	for _, c := range []struct {
		name, help string
		v          interface{ Load() int64 }
	}{
		{"runs_total", "Lifecycle runs that completed.", &m.Runs},
		{"errors_total", "Lifecycle runs that failed (a store error, a lost lease).", &m.Failed},
		{"expired_objects_total", "Current versions expired by an Expiration rule (removed, or a delete marker made on a versioned bucket).", &m.Expired},
		{"noncurrent_versions_total", "Noncurrent versions removed by a NoncurrentVersionExpiration rule.", &m.Noncurrent},
		{"delete_markers_total", "Expired object delete markers removed.", &m.Markers},
		{"aborted_uploads_total", "Multipart uploads aborted by an AbortIncompleteMultipartUpload rule.", &m.Aborted},
		{"refused_deletes_total", "Lifecycle deletions the store refused (Object Lock, ...): skipped.", &m.Refused},
	} {
		v := c.v
		err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "lifecycle",
			Name: c.name, Help: c.help}, func() float64 { return float64(v.Load()) }))
		if err != nil {
			return fmt.Errorf("metrics: lifecycle: %w", err)
		}
	}
	return nil
}
