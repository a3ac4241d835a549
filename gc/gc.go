// Package gc reclaims content that nothing references: blobs (with their large
// objects, chunk rows or files), incomplete multipart uploads past their
// expiry, and the leftovers of crashes (orphan large objects, stage rows,
// stage files, blob files without a row).
//
// The protocol is written here once, for every metadata engine (Meta): a
// batch of candidate blobs goes in one short transaction that first
// try-locks the blobs' pins exclusively (a streaming GET holds one shared),
// then deletes the rows that nothing references, with content kept in the
// database; the guard approves before COMMIT, and files are removed after
// it. A blob the engine cannot decide without waiting for a lock goes in a
// transaction of its own. What the engine does not let go is skipped and
// retried on a later sweep. The
// engines' arbitration (PostgreSQL: docs/adr/006-gc-arbitration.md; the
// embedded engine: in-process pins and its single writer) and their SQL live
// in store/pg and store/embedded.
package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
)

// Defaults of Options. A zero duration in Options means the default; a
// negative one means none (tests and maintenance use that).
const (
	DefaultGrace        = time.Minute
	DefaultStageGrace   = time.Hour
	DefaultUploadExpiry = 7 * 24 * time.Hour
	DefaultBatchSize    = MaxDeleteBatch
	DefaultLockTimeout  = 5 * time.Second
	DefaultInterval     = time.Minute
	// DefaultPinWindow is the local validity window of pin sessions (design
	// §3): after (re)taking the lease the runner waits this long before it
	// deletes, so that streams whose pins vanished in a backend crash have
	// noticed and stopped.
	DefaultPinWindow = 8 * time.Second
	// LeaseKind is the lease under which the runner works.
	LeaseKind = "gc"
)

// Meta is a metadata engine as GC sees it: queries that propose work, and
// short transactions in which the engine's arbitration decides it.
// store/pg (pg.NewGC) and store/embedded (Engine.GC) implement it.
type Meta interface {
	// Candidates lists unreferenced blobs older than grace with ids above
	// after, ascending, at most limit. It only proposes.
	Candidates(ctx context.Context, after int64, grace time.Duration, limit int) ([]int64, error)
	// InTx runs fn in one short transaction, in which lock waits end after
	// lockTimeout (store.GCBusy), and commits it only if fn returns true.
	InTx(ctx context.Context, lockTimeout time.Duration, fn func(tx store.GCTx) (commit bool, err error)) error
	// Rowless returns the ids among ids that have no blob row.
	Rowless(ctx context.Context, ids []int64) ([]int64, error)
	// ExpiredUploads lists uploads older than expiry with ids above after.
	ExpiredUploads(ctx context.Context, expiry time.Duration, after string, limit int) ([]store.GCUpload, error)
	// AbortUpload deletes an upload (its parts go with it) if it is still
	// older than expiry, under the locks of the engine's upload mutations.
	AbortUpload(ctx context.Context, u store.GCUpload, expiry, lockTimeout time.Duration) (store.GCVerdict, error)
	// PlanBlobs counts what a sweep after the upload reaper would delete.
	PlanBlobs(ctx context.Context, grace, expiry time.Duration) (store.GCPlan, error)
}

var (
	_ Meta      = (*pg.GC)(nil)
	_ dbContent = (*pg.GC)(nil)
	_ fleetWide = (*pg.GC)(nil)
	_ registry  = (*pg.GC)(nil)
	_ pinReaper = (*pg.GC)(nil)
	_ Meta      = (*embedded.GC)(nil)
)

// dbContent is the part of a Meta that keeps content inside the database
// (store/pg): staged content, large objects and GC's bookkeeping of them.
type dbContent interface {
	EnsureSchema(ctx context.Context) error
	AbandonedStages(ctx context.Context, stageGrace time.Duration) ([]int64, error)
	ReapLargeObjects(ctx context.Context, grace, lockTimeout time.Duration, guard func(context.Context) error) (int64, error)
	PlanStages(ctx context.Context, stageGrace time.Duration) (int64, error)
	PlanLargeObjects(ctx context.Context, grace time.Duration) (n, bytes int64, err error)
}

// pinReaper is the part of a Meta with row pins (store/pg): it deletes
// expired pin rows in bounded batches.
type pinReaper interface {
	ReapPins(ctx context.Context, batch int) (int64, error)
}

// unstager is the part of a dbContent engine's GCTx that drops a stage row
// (and its content) if it is still untouched for stageGrace.
type unstager interface {
	Unstage(ctx context.Context, id int64, stageGrace time.Duration) (bool, error)
}

// fleetWide is the part of a Meta that several gateways may share
// (store/pg): its runs take the lease and prove with a sentinel session that
// no pins were reset since the pin window (ADR 006).
type fleetWide interface {
	LeaseStore(ctx context.Context) (lease.Store, error)
	Sentinel(ctx context.Context) (check func(context.Context) error, closeFn func(), err error)
}

// registry is the part of a Meta that holds a fleet's instance registry
// (store/pg): the sweeper deletes the registrations whose heartbeat expired.
type registry interface {
	ReapInstances(ctx context.Context, limit int) (int64, error)
}

// EnsureSchema creates GC's own tables, where the engine has any.
func EnsureSchema(ctx context.Context, db Meta) error {
	if c, ok := db.(dbContent); ok {
		return c.EnsureSchema(ctx)
	}
	return nil
}

// Options configure Sweep, the reapers, RunOnce and the Runner.
type Options struct {
	// Grace is the minimum age of an unreferenced blob row, an orphan large
	// object (since first seen) or a blob file without a row before it is
	// reclaimed (default 1 min). It protects puts in flight.
	Grace time.Duration
	// StageGrace is how long a stage file or a stage row (content staged in
	// PostgreSQL) must be untouched before it is removed (default 1 h): it
	// belongs to a put that is still reading its body, and only time tells
	// it from a crash's leftover.
	StageGrace time.Duration
	// UploadExpiry is the age at which incomplete multipart uploads are
	// aborted (default 7 days).
	UploadExpiry time.Duration
	// BatchSize is the number of candidates read per query, and decided per
	// transaction up to MaxDeleteBatch (default MaxDeleteBatch).
	BatchSize int
	// LockTimeout bounds how long a deleting transaction waits for a row lock
	// (a put publishing the same blob); on timeout the blob is skipped.
	LockTimeout time.Duration
	// Media is the filesystem media of the "local" engine; nil if unused (a
	// local blob then stops the sweep with an error).
	Media *localfs.Media
	// Guard, if set, is called inside every deleting transaction just before
	// COMMIT; an error rolls the deletion back and stops the work. The Runner
	// uses it to prove that the lease is still valid and that no backend crash
	// dropped the pins since the pin window was waited out.
	Guard func(ctx context.Context) error
	// Logger receives per-run summaries (default slog.Default()).
	Logger *slog.Logger
	// Metrics, if set, receives what runs reclaimed and the lease's state.
	Metrics *Metrics

	// Runner settings.

	// Interval is the pause between runs of the Runner (default 1 min).
	Interval time.Duration
	// PinWindow is the wait after taking the lease before deleting (default
	// 8 s).
	PinWindow time.Duration
	// Holder identifies this instance in the lease row (default host:pid).
	Holder string
	// Lease tunes the lease (Kind and Holder are set by the runner).
	Lease lease.Config
}

// dur applies a default to a zero duration. A negative one ("none") stays
// negative, so that defaults can be applied again without effect: in age
// comparisons it admits everything, and waits treat it as no wait.
func dur(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func (o Options) withDefaults() Options {
	o.Grace = dur(o.Grace, DefaultGrace)
	o.StageGrace = dur(o.StageGrace, DefaultStageGrace)
	o.UploadExpiry = dur(o.UploadExpiry, DefaultUploadExpiry)
	o.LockTimeout = dur(o.LockTimeout, DefaultLockTimeout)
	o.Interval = dur(o.Interval, DefaultInterval)
	o.PinWindow = dur(o.PinWindow, DefaultPinWindow)
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stats count what a run reclaimed and what it left alone.
type Stats struct {
	BlobsDeleted   int64 // blob rows deleted
	BytesReclaimed int64 // sum of their sizes
	// Skipped blobs: a GET pinned it, a reference exists or appeared, or a
	// row lock was held past LockTimeout. They are retried next time.
	SkippedPinned     int64
	SkippedReferenced int64
	SkippedBusy       int64

	UploadsAborted       int64
	StagesReaped         int64 // abandoned stage rows, with their chunk rows or large object
	LargeObjectsUnlinked int64 // orphan large objects (not those of deleted blobs)
	StageFilesRemoved    int64
	BlobFilesRemoved     int64 // files without a blob row
	// InstancesReaped counts fleet registrations deleted because their
	// heartbeat expired (ADR 009).
	InstancesReaped int64
	PinsReaped      int64 // expired pin rows (ADR 010)
}

// Add accumulates o into s.
func (s *Stats) Add(o Stats) {
	s.BlobsDeleted += o.BlobsDeleted
	s.BytesReclaimed += o.BytesReclaimed
	s.SkippedPinned += o.SkippedPinned
	s.SkippedReferenced += o.SkippedReferenced
	s.SkippedBusy += o.SkippedBusy
	s.UploadsAborted += o.UploadsAborted
	s.StagesReaped += o.StagesReaped
	s.LargeObjectsUnlinked += o.LargeObjectsUnlinked
	s.StageFilesRemoved += o.StageFilesRemoved
	s.BlobFilesRemoved += o.BlobFilesRemoved
	s.InstancesReaped += o.InstancesReaped
	s.PinsReaped += o.PinsReaped
}

// MaxDeleteBatch bounds the blobs one deleting transaction decides: each
// holds an exclusive pin lock, and a large object's lo_unlink a lock too, in
// PostgreSQL's shared lock table until COMMIT (design §3).
const MaxDeleteBatch = 256

// Sweep deletes every blob that nothing references and that is older than
// the grace period, in batches of at most BatchSize (and MaxDeleteBatch)
// per transaction (see the package doc). It returns what it reclaimed; an
// error stops the sweep, and what was deleted before it stays deleted.
func Sweep(ctx context.Context, db Meta, opts Options) (Stats, error) {
	var st Stats
	return st, sweep(ctx, db, opts.withDefaults(), &st, nil)
}

// sweep is Sweep with a progress report per blob decided.
func sweep(ctx context.Context, db Meta, opts Options, st *Stats, bar *Progress) error {
	after := int64(0)
	for {
		ids, err := db.Candidates(ctx, after, opts.Grace, opts.BatchSize)
		if err != nil {
			return fmt.Errorf("gc: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		for batch := range slices.Chunk(ids, MaxDeleteBatch) {
			if err := deleteBlobs(ctx, db, batch, opts, st); err != nil {
				return err
			}
			bar.Add(int64(len(batch)))
		}
		after = ids[len(ids)-1]
	}
}

// deleteBlobs runs the arbitration for a batch of blobs in one transaction
// and counts the results: it takes the pins it can, the engine deletes the
// rows it can decide without waiting, and the guard approves before COMMIT;
// files go after it. The blobs the engine left (a lock to wait for), or the
// whole batch if it could not be decided as one, go one by one.
func deleteBlobs(ctx context.Context, db Meta, ids []int64, opts Options, st *Stats) error {
	var free []int64
	var decided []store.GCDecision
	_, err := decide(ctx, db, opts, func(tx store.GCTx) (store.GCVerdict, error) {
		var err error
		if free, err = tx.TryPins(ctx, ids); err != nil {
			return 0, err
		}
		if decided, err = tx.DeleteBlobs(ctx, free); err != nil {
			return 0, err
		}
		res := store.GCGone // nothing to commit
		for _, d := range decided {
			if d.Verdict == store.GCDone {
				if d.Blob.Tier == store.TierLocal && opts.Media == nil {
					return 0, errors.New("local blob, but no media configured")
				}
				res = store.GCDone
			}
		}
		return res, nil
	})
	if errors.Is(err, store.ErrGCUndecided) {
		opts.Logger.Debug("gc: batch undecided, deciding its blobs one by one", "blobs", len(ids), "err", err)
		return deleteEach(ctx, db, ids, opts, st)
	}
	if err != nil {
		return fmt.Errorf("gc: blobs %d..%d: %w", ids[0], ids[len(ids)-1], err)
	}
	st.SkippedPinned += int64(len(ids) - len(free))
	left := make(map[int64]bool, len(free))
	for _, id := range free {
		left[id] = true
	}
	for _, d := range decided {
		delete(left, d.ID)
		if err := tally(ctx, d.ID, d.Verdict, d.Blob, opts, st); err != nil {
			return err
		}
	}
	return deleteEach(ctx, db, slices.DeleteFunc(free, func(id int64) bool { return !left[id] }), opts, st)
}

// deleteEach decides ids one transaction each.
func deleteEach(ctx context.Context, db Meta, ids []int64, opts Options, st *Stats) error {
	for _, id := range ids {
		if err := deleteBlob(ctx, db, id, opts, st); err != nil {
			return err
		}
	}
	return nil
}

// deleteBlob runs the arbitration for one blob and counts the result.
func deleteBlob(ctx context.Context, db Meta, id int64, opts Options, st *Stats) error {
	var b store.GCBlob
	res, err := decide(ctx, db, opts, func(tx store.GCTx) (store.GCVerdict, error) {
		if ok, err := tx.TryPin(ctx, id); err != nil || !ok {
			return store.GCPinned, err
		}
		var res store.GCVerdict
		var err error
		if b, res, err = tx.DeleteBlob(ctx, id); err != nil || res != store.GCDone {
			return res, err
		}
		if b.Tier == store.TierLocal && opts.Media == nil {
			return 0, errors.New("local blob, but no media configured")
		}
		return store.GCDone, nil
	})
	if err != nil {
		return fmt.Errorf("gc: blob %d: %w", id, err)
	}
	return tally(ctx, id, res, b, opts, st)
}

// tally counts what was decided about blob id, and removes the file of a
// deleted local blob: after the commit.
func tally(ctx context.Context, id int64, res store.GCVerdict, b store.GCBlob, opts Options, st *Stats) error {
	switch res {
	case store.GCPinned:
		st.SkippedPinned++
	case store.GCReferenced:
		st.SkippedReferenced++
	case store.GCBusy:
		st.SkippedBusy++
	case store.GCDone:
		st.BlobsDeleted++
		st.BytesReclaimed += b.Size
		if b.Tier == store.TierLocal {
			// After the commit: the row is gone, and ids are never reused, so
			// a concurrent put of the same content publishes a new id and a
			// new file that this removal cannot hit.
			if err := opts.Media.Remove(ctx, id); err != nil {
				return fmt.Errorf("gc: blob %d: remove file (an orphan for the file reaper): %w", id, err)
			}
		}
	}
	return nil
}

// decide runs fn in one transaction of db and commits only a GCDone verdict,
// after the guard approved it.
func decide(ctx context.Context, db Meta, opts Options, fn func(tx store.GCTx) (store.GCVerdict, error)) (store.GCVerdict, error) {
	var res store.GCVerdict
	err := db.InTx(ctx, opts.LockTimeout, func(tx store.GCTx) (bool, error) {
		var err error
		if res, err = fn(tx); err != nil || res != store.GCDone {
			return false, err
		}
		if opts.Guard != nil {
			if err := opts.Guard(ctx); err != nil {
				return false, fmt.Errorf("guard refused the deletion: %w", err)
			}
		}
		return true, nil
	})
	return res, err
}
