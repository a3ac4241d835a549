package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
)

// gcTarget returns GC's view of the engine and the media of its files: on
// PostgreSQL over its pool (runs under the lease), on the embedded default
// the engine's own (one process owns the data directory: no lease).
func (s *Server) gcTarget() (gc.Meta, *localfs.Media, bool) {
	switch e := s.engine.(type) {
	case interface{ Pool() *pgxpool.Pool }:
		return pg.NewGC(e.Pool()), s.media, true
	case *embedded.Engine:
		return e.GC(), e.Media(), true
	}
	return nil, nil, false
}

// startGC runs online GC while ctx lives (S3GATE_GC_INTERVAL=0 disables it).
// The returned channel closes when it stopped.
func (s *Server) startGC(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	db, media, ok := s.gcTarget()
	if !ok || s.cfg.GCInterval <= 0 || s.readOnly { // a replica deletes nothing
		close(done)
		return done
	}
	if s.gcMetrics == nil { // the embedded engine's: New registers PostgreSQL's
		m := &gc.Metrics{}
		if err := registerGCMetrics(s.metrics.Registry(), m); err != nil {
			s.log.Error("online GC metrics not exported", "err", err)
		} else {
			s.gcMetrics = m
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.work, cancel) // lost ownership stops GC too
	go func() {
		defer close(done)
		defer stop()
		defer cancel()
		opts := s.gcOptions()
		opts.Media = media
		r, err := gc.NewRunner(ctx, db, media, opts)
		if err != nil {
			s.log.Error("online GC not started", "err", err)
			return
		}
		if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Error("online GC stopped", "err", err)
		}
	}()
	return done
}

func (s *Server) gcOptions() gc.Options {
	return gc.Options{
		Interval:     time.Duration(s.cfg.GCInterval),
		Grace:        time.Duration(s.cfg.GCGrace),
		UploadExpiry: time.Duration(s.cfg.UploadExpiry),
		Media:        s.media,
		Logger:       s.log,
		Metrics:      s.gcMetrics,
		Holder:       string(s.InstanceID()), // fleet mode: the registry's id; else host:pid
	}
}

// registerGCMetrics exports the online GC's counters.
func registerGCMetrics(reg prometheus.Registerer, m *gc.Metrics) error {
	load := func(v interface{ Load() int64 }) func() float64 { return func() float64 { return float64(v.Load()) } }
	counter := func(name, help string, v interface{ Load() int64 }) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "gc", Name: name, Help: help}, load(v))
	}
	gauge := func(name, help string, v interface{ Load() int64 }) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metrics.Namespace, Subsystem: "gc", Name: name, Help: help}, load(v))
	}
	for _, c := range []prometheus.Collector{
		counter("sweeps_total", "GC runs that completed under a lease still held at the end.", &m.SweepsRun),
		counter("sweeps_failed_total", "GC runs that failed or were not counted (lease lost).", &m.SweepsFailed),
		counter("reclaimed_blobs_total", "Blobs deleted by GC.", &m.BlobsReclaimed),
		counter("reclaimed_bytes_total", "Bytes of the blobs deleted by GC.", &m.BytesReclaimed),
		counter("uploads_aborted_total", "Expired multipart uploads aborted by GC.", &m.UploadsAborted),
		counter("orphans_removed_total", "Crash leftovers removed: large objects, stage files, blob files without a row.", &m.OrphansFound),
		gauge("lease_held", "1 while this instance holds the GC lease.", &m.LeaseHeld),
		counter("lease_acquired_total", "GC lease grants taken.", &m.LeaseAcquired),
		counter("lease_busy_total", "GC lease attempts that found it held elsewhere.", &m.LeaseBusy),
		counter("lease_lost_total", "GC lease grants lost before their run finished.", &m.LeaseLost),
		gauge("last_sweep_timestamp_seconds", "Unix time of the last counted GC run (0 before the first).", &m.LastSweepUnix),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: gc: %w", err)
		}
	}
	return nil
}
