package gc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/store/localfs"
)

// ErrNotCounted means a run's lease was lost before it finished: what it
// deleted was deleted safely (every deletion was guarded), but the run must
// not be counted as a completed sweep.
var ErrNotCounted = errors.New("gc: lease lost during the run; not counted as done")

// sentinelTimeout bounds each check on the sentinel connection, and its close.
const sentinelTimeout = 2 * time.Second

// Runner runs the reapers and the sweep on a schedule, each run under the
// "gc" lease, so that at most one instance collects at a time.
type Runner struct {
	db    *pgxpool.Pool
	media *localfs.Media
	opts  Options
	store lease.Store

	// active, if set (tests), is told when a run starts deleting (+1) and
	// when it stops (-1).
	active func(delta int)
}

// NewRunner returns a runner over db and media (nil if the local engine is
// not used). It creates the lease and GC tables if needed.
func NewRunner(ctx context.Context, db *pgxpool.Pool, media *localfs.Media, opts Options) (*Runner, error) {
	opts = opts.withDefaults()
	opts.Media = media
	if opts.Holder == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "unknown"
		}
		opts.Holder = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	st, err := lease.NewPGStore(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("gc: %w", err)
	}
	if err := EnsureSchema(ctx, db); err != nil {
		return nil, err
	}
	return &Runner{db: db, media: media, opts: opts, store: st}, nil
}

// RunOnce collects once, now, under the lease (for `s3gate gc`): it returns
// an error wrapping lease.ErrHeld if another instance is collecting, and
// ErrNotCounted if the lease was lost before the run ended.
func RunOnce(ctx context.Context, db *pgxpool.Pool, media *localfs.Media, opts Options) (Stats, error) {
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
			return nil
		case errors.Is(err, lease.ErrHeld):
			log.Debug("gc: another instance holds the lease")
		case err != nil:
			log.Error("gc: run failed", "err", err, "blobs", st.BlobsDeleted, "bytes", st.BytesReclaimed)
		default:
			log.Info("gc: run done", "blobs", st.BlobsDeleted, "bytes", st.BytesReclaimed,
				"uploads_aborted", st.UploadsAborted, "orphan_los", st.LargeObjectsUnlinked,
				"stage_files", st.StageFilesRemoved, "stages", st.StagesReaped, "orphan_files", st.BlobFilesRemoved,
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
// stage files and blob files, and finish the lease.
func (r *Runner) RunOnce(ctx context.Context) (st Stats, err error) {
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
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sentinelTimeout)
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
	s, err := openSentinel(job, r.db)
	if err != nil {
		return st, err
	}
	defer s.close()
	if r.opts.PinWindow > 0 {
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
		if err := s.check(ctx); err != nil {
			return err
		}
		if userGuard != nil {
			return userGuard(ctx)
		}
		return nil
	}
	if err := opts.Guard(job); err != nil {
		return st, fmt.Errorf("gc: after the pin window: %w", err)
	}
	if r.active != nil {
		r.active(1)
		defer r.active(-1)
	}
	st, err = collect(job, r.db, opts)
	if err != nil && job.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, context.Cause(job))
	}
	return st, err
}

// collect runs the reapers and the sweep in the order that lets one run
// reclaim everything: expired uploads first (their part blobs become
// candidates), then blobs, then leftovers.
func collect(ctx context.Context, db *pgxpool.Pool, opts Options) (Stats, error) {
	var st Stats
	n, err := ReapUploads(ctx, db, opts)
	st.UploadsAborted = n
	if err != nil {
		return st, err
	}
	sw, err := Sweep(ctx, db, opts)
	st.Add(sw)
	if err != nil {
		return st, err
	}
	if st.StagesReaped, err = ReapStages(ctx, db, opts); err != nil {
		return st, err
	}
	if st.LargeObjectsUnlinked, err = ReapLargeObjects(ctx, db, opts); err != nil {
		return st, err
	}
	if opts.Media != nil {
		if st.StageFilesRemoved, err = ReapStageFiles(ctx, opts.Media, opts); err != nil {
			return st, err
		}
		if st.BlobFilesRemoved, err = ReapBlobFiles(ctx, db, opts.Media, opts); err != nil {
			return st, err
		}
	}
	return st, nil
}

// sentinel is a dedicated connection (not a pool member) that lives for one
// run; its death means the server reset every session.
type sentinel struct {
	mu   sync.Mutex
	conn *pgx.Conn
}

func openSentinel(ctx context.Context, db *pgxpool.Pool) (*sentinel, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, db.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("gc: open sentinel session: %w", err)
	}
	return &sentinel{conn: conn}, nil
}

// check proves that the sentinel session is still alive.
func (s *sentinel) check(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, sentinelTimeout)
	defer cancel()
	if _, err := s.conn.Exec(cctx, `SELECT 1`); err != nil {
		return fmt.Errorf("gc: sentinel session lost (server sessions may have been reset): %w", err)
	}
	return nil
}

func (s *sentinel) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sentinelTimeout)
	defer cancel()
	_ = s.conn.Close(ctx) // closing a read-only session; nothing to lose
}
