// Package gc reclaims content that nothing references: blobs (with their large
// objects, chunk rows or files), incomplete multipart uploads past their
// expiry, and the leftovers of crashes (orphan large objects, stage files,
// blob files without a row).
//
// Deletion is arbitrated in SQL (docs/adr/006-gc-arbitration.md): each blob
// goes in its own short transaction that first try-locks the blob's pin key
// exclusively (a streaming GET holds it shared) and then runs a plain
// DELETE, whose foreign-key checks fail if any reference exists or is being
// inserted. Only what PostgreSQL lets go is removed; everything else is
// skipped and retried on a later sweep.
package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
)

// Defaults of Options. A zero duration in Options means the default; a
// negative one means none (tests and maintenance use that).
const (
	DefaultGrace        = time.Minute
	DefaultStageGrace   = time.Hour
	DefaultUploadExpiry = 7 * 24 * time.Hour
	DefaultBatchSize    = 100
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

// maxUnlinksPerTx bounds the large objects one transaction unlinks: each
// lo_unlink holds a lock until commit in the shared lock table (design §3).
const maxUnlinksPerTx = 256

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
	// BatchSize is the number of candidates read per query (default 100).
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
}

// Sweep deletes every blob that nothing references and that is older than
// the grace period, each in its own transaction (see the package doc). It
// returns what it reclaimed; an error stops the sweep, and what was deleted
// before it stays deleted.
func Sweep(ctx context.Context, db *pgxpool.Pool, opts Options) (Stats, error) {
	opts = opts.withDefaults()
	var st Stats
	after := int64(0)
	for {
		ids, err := candidates(ctx, db, after, opts)
		if err != nil {
			return st, err
		}
		if len(ids) == 0 {
			return st, nil
		}
		for _, id := range ids {
			if err := deleteBlob(ctx, db, id, opts, &st); err != nil {
				return st, err
			}
		}
		after = ids[len(ids)-1]
	}
}

// candidates lists unreferenced blobs older than the grace, by id. This read
// only proposes: the DELETE decides (a reference may commit at any time).
func candidates(ctx context.Context, db *pgxpool.Pool, after int64, opts Options) ([]int64, error) {
	rows, err := db.Query(ctx, `SELECT b.id FROM blobs b
		WHERE b.id > $1 AND b.created_at <= clock_timestamp() - $2::bigint * interval '1 microsecond'
		  AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id)
		ORDER BY b.id LIMIT $3`, after, opts.Grace.Microseconds(), opts.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("gc: list candidate blobs: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("gc: list candidate blobs: %w", err)
	}
	return ids, nil
}

// SQLSTATEs that mean "leave this blob for later".
const (
	sqlFKViolation  = "23503" // a reference exists or committed meanwhile
	sqlLockTimeout  = "55P03" // lock_not_available: a row lock outlived LockTimeout
	sqlDeadlock     = "40P01"
	sqlUniqueViolat = "23505"
)

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// outcome of one deletion attempt.
type outcome int

const (
	deleted outcome = iota
	gone            // another sweeper deleted it first
	pinned
	referenced
	busy
)

// deleteBlob runs the arbitration for one blob (ADR 006) and counts the result.
func deleteBlob(ctx context.Context, db *pgxpool.Pool, id int64, opts Options, st *Stats) error {
	var tier string
	var size int64
	res, err := inTx(ctx, db, opts, func(tx pgx.Tx) (outcome, error) {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, BlobLockKey(id)).Scan(&got); err != nil {
			return 0, fmt.Errorf("try pin lock: %w", err)
		}
		if !got {
			return pinned, nil
		}
		var oid *uint32
		err := tx.QueryRow(ctx, `DELETE FROM blobs WHERE id = $1 RETURNING tier, size, lo_oid`, id).Scan(&tier, &size, &oid)
		if errors.Is(err, pgx.ErrNoRows) {
			return gone, nil
		}
		if err != nil {
			return 0, fmt.Errorf("delete: %w", err)
		}
		switch tier {
		case store.TierPGLO:
			if oid == nil {
				return 0, errors.New("pglo blob without a large object")
			}
			// Unlink only if it exists: a missing large object is damage for
			// fsck to report, not a reason to keep an unreferenced row.
			if _, err := tx.Exec(ctx, `SELECT lo_unlink(oid) FROM pg_largeobject_metadata WHERE oid = $1`, *oid); err != nil {
				return 0, fmt.Errorf("lo_unlink %d: %w", *oid, err)
			}
		case store.TierLocal:
			if opts.Media == nil {
				return 0, errors.New("local blob, but no media configured")
			}
		case store.TierPGChunks:
			// Chunk rows have no foreign key (staged rows precede their blob
			// row, ADR 007): they go with the row in this transaction.
			if _, err := tx.Exec(ctx, `DELETE FROM blob_chunks WHERE blob_id = $1`, id); err != nil {
				return 0, fmt.Errorf("delete chunks: %w", err)
			}
		}
		// Inline data is in the row.
		return deleted, nil
	})
	if err != nil {
		return fmt.Errorf("gc: blob %d: %w", id, err)
	}
	switch res {
	case pinned:
		st.SkippedPinned++
	case referenced:
		st.SkippedReferenced++
	case busy:
		st.SkippedBusy++
	case deleted:
		st.BlobsDeleted++
		st.BytesReclaimed += size
		if tier == store.TierLocal {
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

// inTx runs fn in a short transaction with the lock timeout set, calls the
// guard before committing a deletion, and classifies arbitration errors
// (foreign key, lock timeout, deadlock) as outcomes. Anything but a deletion
// is rolled back. The transaction always ends before its connection returns
// to the pool.
func inTx(ctx context.Context, db *pgxpool.Pool, opts Options, fn func(tx pgx.Tx) (outcome, error)) (res outcome, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if rerr := tx.Rollback(rctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
			}
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`,
		fmt.Sprintf("%dms", max(opts.LockTimeout.Milliseconds(), 1))); err != nil {
		return 0, fmt.Errorf("set lock_timeout: %w", err)
	}
	res, err = fn(tx)
	switch pgCode(err) {
	case sqlFKViolation:
		return referenced, nil
	case sqlLockTimeout, sqlDeadlock:
		return busy, nil
	}
	if err != nil || res != deleted {
		return res, err
	}
	if opts.Guard != nil {
		if err := opts.Guard(ctx); err != nil {
			return 0, fmt.Errorf("guard refused the deletion: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		committed = true // pgx ended the transaction
		return 0, fmt.Errorf("commit: %w", err)
	}
	committed = true
	return deleted, nil
}
