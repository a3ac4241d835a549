package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/store/localfs"
)

// ErrNotCounted means a run's lease was lost before it finished: what it
// deleted was deleted safely (every deletion was guarded), but the run must
// not be counted as a completed sweep.
var ErrNotCounted = errors.New("gc: lease lost during the run; not counted as done")

// finishTimeout bounds the lease's Finish at the end of a run.
const finishTimeout = 2 * time.Second

// Runner runs the reapers and the sweep on a schedule. On an engine that
// several gateways may share (PostgreSQL) each run is under the "gc" lease,
// so that at most one instance collects at a time; on the embedded engine one
// process owns the data directory and no lease is needed.
type Runner struct {
	db    Meta
	opts  Options
	store lease.Store // nil: no lease
	fleet fleetWide   // nil: no lease, no sentinel, no pin window

	// progress, if set (`s3gate gc`), is told what a run waits for and
	// receives its progress (a bar on a terminal, plain lines otherwise).
	progress io.Writer

	// active, if set (tests), is told when a run starts deleting (+1) and
	// when it stops (-1).
	active func(delta int)
}

// NewRunner returns a runner over db and media (nil if no local files are
// used). It creates the lease and GC tables if needed.
func NewRunner(ctx context.Context, db Meta, media *localfs.Media, opts Options) (*Runner, error) {
	opts = opts.withDefaults()
	opts.Media = media
	if opts.Holder == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "unknown"
		}
		opts.Holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	r := &Runner{db: db, opts: opts}
	if f, ok := db.(fleetWide); ok {
		st, err := f.LeaseStore(ctx)
		if err != nil {
			return nil, fmt.Errorf("gc: %w", err)
		}
		r.store, r.fleet = st, f
	}
	if err := EnsureSchema(ctx, db); err != nil {
		return nil, err
	}
	return r, nil
}

// RunOnce collects once, now, under the lease where there is one (for
// `s3gate gc`): it returns an error wrapping lease.ErrHeld if another
// instance is collecting, and ErrNotCounted if the lease was lost before the
// run ended.
func RunOnce(ctx context.Context, db Meta, media *localfs.Media, opts Options) (Stats, error) {
	r, err := NewRunner(ctx, db, media, opts)
	if err != nil {
		return Stats{}, err
	}
	return r.RunOnce(ctx)
}

// Run collects every Interval until ctx ends. A run that finds the lease
// held, or fails, is logged and tried again at the next interval. It returns
// nil when ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	log := r.opts.Logger
	for {
		st, err := r.RunOnce(ctx)
		switch {
		case ctx.Err() != nil:
			if errors.Is(err, ErrNotCounted) {
				// Shutdown or a lost claim ended the run, and its lease
				// could not be released (the database may be gone): the
				// next holder waits for the lease's expiry.
				log.Warn("gc: run interrupted, its lease not released (it expires by itself)", "err", err)
			}
			return nil
		case errors.Is(err, lease.ErrHeld):
			log.Debug("gc: another instance holds the lease")
		case err != nil:
			log.Error("gc: run failed", "err", err, "blobs", st.BlobsDeleted, "bytes", st.BytesReclaimed)
		default:
			// A run every minute that found nothing is no news.
			lvl := slog.LevelInfo
			if st.reclaimedNothing() {
				lvl = slog.LevelDebug
			}
			log.Log(ctx, lvl, "gc: run done", "blobs", st.BlobsDeleted, "bytes", st.BytesReclaimed,
				"uploads_aborted", st.UploadsAborted, "orphan_los", st.LargeObjectsUnlinked,
				"stage_files", st.StageFilesRemoved, "stages", st.StagesReaped, "orphan_files", st.BlobFilesRemoved,
				"expired_instances", st.InstancesReaped, "expired_pins", st.PinsReaped,
				"skipped_pinned", st.SkippedPinned, "skipped_referenced", st.SkippedReferenced, "skipped_busy", st.SkippedBusy)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.opts.Interval):
		}
	}
}

// RunOnce performs one run: take the lease, open the sentinel session, wait
// the pin window, then reap uploads, sweep blobs, reap orphan large objects,
// stage files and blob files, and finish the lease. Without a lease (the
// embedded engine) it just collects.
func (r *Runner) RunOnce(ctx context.Context) (st Stats, err error) {
	if r.fleet == nil {
		return r.collect(ctx, r.opts)
	}
	lcfg := r.opts.Lease
	lcfg.Kind, lcfg.Holder = LeaseKind, r.opts.Holder
	m := r.opts.Metrics
	grant, err := lease.Acquire(ctx, r.store, lcfg)
	if err != nil {
		if errors.Is(err, lease.ErrHeld) {
			m.leaseBusy()
		}
		return st, fmt.Errorf("gc: %w", err)
	}
	m.leaseAcquired()
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		done, ferr := grant.Finish(fctx)
		switch {
		case ferr != nil:
			err = errors.Join(err, ErrNotCounted, fmt.Errorf("gc: %w", ferr))
		case !done:
			err = errors.Join(err, ErrNotCounted)
		}
		m.leaseReleased(errors.Is(err, ErrNotCounted))
		m.record(st)
		m.finished(err == nil, time.Now())
	}()
	job := grant.Context()

	// The sentinel is opened BEFORE the pin window: a backend crash resets
	// every session at once (pins included) but not the lease row, and the
	// sentinel dies with it. A deletion commits only after the sentinel
	// answered inside the deleting transaction, so no deletion commits after a
	// crash that streams have not had the pin window to notice.
	check, closeSentinel, err := r.fleet.Sentinel(job)
	if err != nil {
		return st, fmt.Errorf("gc: %w", err)
	}
	defer closeSentinel()
	if r.opts.PinWindow > 0 {
		if r.progress != nil {
			fmt.Fprintf(r.progress, "gc: waiting out the pin window (%s) before deleting, so that streams whose pins a database crash dropped have stopped\n", r.opts.PinWindow)
		}
		select {
		case <-job.Done():
			return st, fmt.Errorf("gc: waiting out the pin window: %w", context.Cause(job))
		case <-time.After(r.opts.PinWindow):
		}
	}
	opts := r.opts
	userGuard := opts.Guard
	opts.Guard = func(ctx context.Context) error {
		if err := grant.Err(); err != nil {
			return err
		}
		if err := check(ctx); err != nil {
			return fmt.Errorf("gc: %w", err)
		}
		if userGuard != nil {
			return userGuard(ctx)
		}
		return nil
	}
	if err := opts.Guard(job); err != nil {
		return st, fmt.Errorf("gc: after the pin window: %w", err)
	}
	st, err = r.collect(job, opts)
	if err != nil && job.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(job))
	}
	return st, err
}

// collect runs one collection; without a lease it records the metrics
// itself (with one, RunOnce records them when the lease is finished).
func (r *Runner) collect(ctx context.Context, opts Options) (Stats, error) {
	if r.active != nil {
		r.active(1)
		defer r.active(-1)
	}
	var plan Plan // the progress bars' totals
	if r.progress != nil {
		var err error
		if plan, err = PlanCollection(ctx, r.db, opts); err != nil {
			return Stats{}, err
		}
	}
	st, err := run(ctx, r.db, opts.withDefaults(), plan, r.progress)
	if r.fleet == nil {
		opts.Metrics.record(st)
		opts.Metrics.finished(err == nil, time.Now())
	}
	return st, err
}

// reclaimedNothing reports whether a run deleted or removed nothing (it may
// have skipped blobs: they are retried next time).
func (s Stats) reclaimedNothing() bool {
	return s.BlobsDeleted == 0 && s.UploadsAborted == 0 && s.StagesReaped == 0 &&
		s.LargeObjectsUnlinked == 0 && s.StageFilesRemoved == 0 && s.BlobFilesRemoved == 0 && s.InstancesReaped == 0 &&
		s.PinsReaped == 0
}
