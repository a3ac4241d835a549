package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/s3gate/s3gate/fleet/lease"
)

// LeaseKind is the job lease under which one instance of a fleet runs
// lifecycle at a time.
const LeaseKind = "lifecycle"

// finishTimeout bounds the lease's Finish at the end of a run.
const finishTimeout = 2 * time.Second

// Runner applies lifecycle rules every Interval. With a lease store (a
// database several gateways may share) each run holds the lifecycle lease;
// without one (the embedded engine: one process owns the data) it just runs.
type Runner struct {
	Store    Store
	Options  Options
	Interval time.Duration
	// Leases and Lease configure the job lease (nil Leases: no lease).
	Leases lease.Store
	Lease  lease.Config
}

// Run runs until ctx ends; a run that fails or finds the lease held is
// logged and tried again at the next interval.
func (r *Runner) Run(ctx context.Context) error {
	log := r.Options.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for {
		st, err := r.RunOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, lease.ErrHeld):
			log.Debug("lifecycle: another instance holds the lease")
		case err != nil:
			log.Error("lifecycle: run failed", "err", err, "expired", st.Expired, "noncurrent", st.Noncurrent,
				"markers", st.Markers, "aborted", st.Aborted, "refused", st.Refused)
		default:
			lvl := slog.LevelInfo
			if st.Expired+st.Noncurrent+st.Markers+st.Aborted+st.Refused == 0 {
				lvl = slog.LevelDebug // a run that found nothing is no news
			}
			log.Log(ctx, lvl, "lifecycle: run done", "buckets", st.Buckets, "expired", st.Expired,
				"noncurrent", st.Noncurrent, "markers", st.Markers, "aborted", st.Aborted,
				"refused", st.Refused, "changed", st.Changed)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.Interval):
		}
	}
}

// RunOnce runs once, under the lease if there is one: an error wrapping
// lease.ErrHeld means another instance holds it. A lost lease stops the run
// before its next deletion.
func (r *Runner) RunOnce(ctx context.Context) (st Stats, err error) {
	if r.Leases == nil {
		return RunOnce(ctx, r.Store, r.Options)
	}
	cfg := r.Lease
	cfg.Kind = LeaseKind
	grant, err := lease.Acquire(ctx, r.Leases, cfg)
	if err != nil {
		return st, fmt.Errorf("lifecycle: %w", err)
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		done, ferr := grant.Finish(fctx)
		switch {
		case ferr != nil:
			err = errors.Join(err, fmt.Errorf("lifecycle: %w", ferr))
		case !done:
			err = errors.Join(err, fmt.Errorf("lifecycle: %w before the run ended", lease.ErrLost))
		}
	}()
	opts := r.Options
	opts.Guard = grant.Err
	return RunOnce(grant.Context(), r.Store, opts)
}
