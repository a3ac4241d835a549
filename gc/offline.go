package gc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/fleet"
)

// Plan is what a collection would reclaim if it ran now: the --dry-run
// report, and the totals of the offline run's progress bars. Counts are
// upper bounds: a blob pinned or re-referenced meanwhile is skipped.
type Plan struct {
	// Blobs and BlobBytes: unreferenced blob rows older than the grace.
	Blobs, BlobBytes int64
	// ExpiredUploads are multipart uploads older than UploadExpiry;
	// UploadBlobs/UploadBlobBytes the blobs that only their parts reference
	// (reclaimed in the same run, after the uploads are aborted).
	ExpiredUploads               int64
	UploadBlobs, UploadBlobBytes int64
	// OrphanLOs: large objects no blob refers to, due by their first sighting.
	OrphanLOs, OrphanLOBytes int64
	// StageFiles: stage files untouched for StageGrace.
	StageFiles, StageBytes int64
	// OrphanFiles: blob files with no blob row, older than the grace.
	OrphanFiles, OrphanFileBytes int64
	// Stages: content staged in PostgreSQL whose stage row was untouched for
	// StageGrace (abandoned puts; their size is not counted).
	Stages int64
}

// TotalBlobs is the number of blob rows the run would delete.
func (p Plan) TotalBlobs() int64 { return p.Blobs + p.UploadBlobs }

// TotalBytes is every byte the run would reclaim.
func (p Plan) TotalBytes() int64 {
	return p.BlobBytes + p.UploadBlobBytes + p.OrphanLOBytes + p.StageBytes + p.OrphanFileBytes
}

// since is the SQL cut-off "older than d" in database time; a negative d
// (none) admits everything, as in the reapers.
const since = `clock_timestamp() - $1::bigint * interval '1 microsecond'`

// PlanCollection computes what a collection with opts would reclaim now. It
// only reads: it writes no row and no file, not even GC's bookkeeping.
func PlanCollection(ctx context.Context, db *pgxpool.Pool, opts Options) (Plan, error) {
	opts = opts.withDefaults()
	var p Plan
	if err := db.QueryRow(ctx, `SELECT count(*), coalesce(sum(b.size), 0)::bigint FROM blobs b
		WHERE b.created_at <= `+since+`
		  AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id)`,
		opts.Grace.Microseconds()).Scan(&p.Blobs, &p.BlobBytes); err != nil {
		return p, fmt.Errorf("gc: plan: unreferenced blobs: %w", err)
	}
	if err := db.QueryRow(ctx, `WITH exp AS (
			SELECT upload_id FROM uploads WHERE initiated <= clock_timestamp() - $2::bigint * interval '1 microsecond')
		SELECT (SELECT count(*) FROM exp), count(b.id), coalesce(sum(b.size), 0)::bigint FROM blobs b
		WHERE b.created_at <= `+since+`
		  AND EXISTS (SELECT 1 FROM upload_parts u JOIN exp USING (upload_id) WHERE u.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id
		                  AND u.upload_id NOT IN (SELECT upload_id FROM exp))
		  AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)`,
		opts.Grace.Microseconds(), opts.UploadExpiry.Microseconds()).Scan(&p.ExpiredUploads, &p.UploadBlobs, &p.UploadBlobBytes); err != nil {
		return p, fmt.Errorf("gc: plan: expired uploads: %w", err)
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM blob_stages WHERE touched_at <= `+since,
		opts.StageGrace.Microseconds()).Scan(&p.Stages); err != nil {
		return p, fmt.Errorf("gc: plan: abandoned stages: %w", err)
	}
	if err := planLargeObjects(ctx, db, opts, &p); err != nil {
		return p, err
	}
	if opts.Media != nil {
		if err := planFiles(ctx, db, opts, &p); err != nil {
			return p, err
		}
	}
	return p, nil
}

// planLargeObjects counts the orphan large objects that ReapLargeObjects
// would unlink now: those first seen at least the grace ago (one not seen
// yet is seen now, as the reaper would record it).
func planLargeObjects(ctx context.Context, db *pgxpool.Pool, opts Options, p *Plan) error {
	var haveSightings bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('gc_lo_sightings') IS NOT NULL`).Scan(&haveSightings); err != nil {
		return fmt.Errorf("gc: plan: %w", err)
	}
	firstSeen := `clock_timestamp()`
	if haveSightings {
		firstSeen = `coalesce((SELECT s.first_seen FROM gc_lo_sightings s WHERE s.lo = m.oid), clock_timestamp())`
	}
	rows, err := db.Query(ctx, `SELECT m.oid FROM pg_largeobject_metadata m
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.lo_oid = m.oid)
		  AND NOT EXISTS (SELECT 1 FROM blob_stages s WHERE s.lo_oid = m.oid)
		  AND `+firstSeen+` <= `+since, opts.Grace.Microseconds())
	if err != nil {
		return fmt.Errorf("gc: plan: orphan large objects: %w", err)
	}
	oids, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return fmt.Errorf("gc: plan: orphan large objects: %w", err)
	}
	for _, oid := range oids {
		size, err := largeObjectSize(ctx, db, oid)
		if errors.Is(err, errNoLargeObject) {
			continue // unlinked meanwhile
		}
		if err != nil {
			return fmt.Errorf("gc: plan: %w", err)
		}
		p.OrphanLOs++
		p.OrphanLOBytes += size
	}
	return nil
}

var errNoLargeObject = errors.New("large object does not exist")

// largeObjectSize reads a large object's size by seeking to its end; the
// descriptor lives only in this one-statement transaction.
func largeObjectSize(ctx context.Context, db *pgxpool.Pool, oid uint32) (int64, error) {
	var size *int64
	// 262144 is INV_READ.
	err := db.QueryRow(ctx, `SELECT lo_lseek64(lo_open(m.oid, 262144), 0, 2)
		FROM pg_largeobject_metadata m WHERE m.oid = $1`, oid).Scan(&size)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && size == nil) {
		return 0, fmt.Errorf("large object %d: %w", oid, errNoLargeObject)
	}
	if err != nil {
		if pgCode(err) == "42704" { // undefined_object: unlinked between the two looks
			return 0, fmt.Errorf("large object %d: %w", oid, errNoLargeObject)
		}
		return 0, fmt.Errorf("size of large object %d: %w", oid, err)
	}
	return *size, nil
}

// planFiles counts stale stage files and blob files without a row.
func planFiles(ctx context.Context, db *pgxpool.Pool, opts Options, p *Plan) error {
	paths, err := opts.Media.StageFiles()
	if err != nil {
		return fmt.Errorf("gc: plan: %w", err)
	}
	for _, path := range paths {
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("gc: plan: stat stage file: %w", err)
		}
		if time.Since(fi.ModTime()) >= opts.StageGrace {
			p.StageFiles++
			p.StageBytes += fi.Size()
		}
	}
	ids, err := opts.Media.BlobIDs(ctx)
	if err != nil {
		return fmt.Errorf("gc: plan: %w", err)
	}
	rowless, err := rowlessIDs(ctx, db, ids)
	if err != nil {
		return fmt.Errorf("gc: plan: %w", err)
	}
	for _, id := range rowless {
		fi, err := os.Stat(blobFilePath(opts.Media, id))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("gc: plan: stat blob file %d: %w", id, err)
		}
		if time.Since(fi.ModTime()) >= opts.Grace {
			p.OrphanFiles++
			p.OrphanFileBytes += fi.Size()
		}
	}
	return nil
}

// rowlessIDs returns the ids among ids that have no blob row.
func rowlessIDs(ctx context.Context, db *pgxpool.Pool, ids []int64) ([]int64, error) {
	var out []int64
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 1000)]
		ids = ids[len(batch):]
		rows, err := db.Query(ctx, `SELECT i FROM unnest($1::bigint[]) AS i
			WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = i)`, batch)
		if err != nil {
			return nil, fmt.Errorf("blob files without rows: %w", err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, fmt.Errorf("blob files without rows: %w", err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// Offline collects once, now, for a maintenance window: no lease is taken
// and no pin window is waited out, so it must not run while gateways serve
// streams whose pins a backend crash could have dropped in the last few
// seconds. Every deletion is still arbitrated like an online one (foreign
// keys, the exclusive try-lock on the pin key), and expired uploads are
// aborted under the exact advisory locks that store/pg's upload mutations
// take (upload and object key), so a gateway left running loses nothing.
//
// It first computes the Plan; with dryRun it returns it and deletes nothing.
// Progress goes to progress (a bar on a terminal, plain lines otherwise;
// nil: none).
func Offline(ctx context.Context, db *pgxpool.Pool, opts Options, dryRun bool, progress io.Writer) (Plan, Stats, error) {
	opts = opts.withDefaults()
	plan, err := PlanCollection(ctx, db, opts)
	if err != nil || dryRun {
		return plan, Stats{}, err
	}
	if err := EnsureSchema(ctx, db); err != nil {
		return plan, Stats{}, err
	}
	st, err := offlineCollect(ctx, db, opts, plan, progress)
	opts.Metrics.record(st)
	opts.Metrics.finished(err == nil, time.Now())
	return plan, st, err
}

func offlineCollect(ctx context.Context, db *pgxpool.Pool, opts Options, plan Plan, progress io.Writer) (Stats, error) {
	var st Stats
	bar := NewProgress(progress, "expired uploads", plan.ExpiredUploads, "")
	n, err := reapUploadsLocked(ctx, db, opts, bar)
	bar.Done()
	st.UploadsAborted = n
	if err != nil {
		return st, err
	}
	bar = NewProgress(progress, "unreferenced blobs", plan.TotalBlobs(), "")
	err = sweepProgress(ctx, db, opts, &st, bar)
	bar.Done()
	if err != nil {
		return st, err
	}
	bar = NewProgress(progress, "crash leftovers", plan.Stages+plan.OrphanLOs+plan.StageFiles+plan.OrphanFiles, "")
	defer bar.Done()
	if st.StagesReaped, err = ReapStages(ctx, db, opts); err != nil {
		return st, err
	}
	bar.Add(st.StagesReaped)
	if st.LargeObjectsUnlinked, err = ReapLargeObjects(ctx, db, opts); err != nil {
		return st, err
	}
	bar.Add(st.LargeObjectsUnlinked)
	if opts.Media != nil {
		if st.StageFilesRemoved, err = ReapStageFiles(ctx, opts.Media, opts); err != nil {
			return st, err
		}
		bar.Add(st.StageFilesRemoved)
		if st.BlobFilesRemoved, err = ReapBlobFiles(ctx, db, opts.Media, opts); err != nil {
			return st, err
		}
		bar.Add(st.BlobFilesRemoved)
	}
	return st, nil
}

// sweepProgress is Sweep with a progress report per blob decided.
func sweepProgress(ctx context.Context, db *pgxpool.Pool, opts Options, st *Stats, bar *Progress) error {
	after := int64(0)
	for {
		ids, err := candidates(ctx, db, after, opts)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		for _, id := range ids {
			if err := deleteBlob(ctx, db, id, opts, st); err != nil {
				return err
			}
			bar.Add(1)
		}
		after = ids[len(ids)-1]
	}
}

// reapUploadsLocked aborts expired uploads one by one, each under the upload
// and object locks that Complete takes (in ascending key order, as store/pg
// takes several), so that it is serialized with a part upload, Complete or
// Abort of the same upload rather than skipping it. A lock held past
// LockTimeout skips the upload.
func reapUploadsLocked(ctx context.Context, db *pgxpool.Pool, opts Options, bar *Progress) (int64, error) {
	type upload struct{ id, bucket, key string }
	var n int64
	after := ""
	for {
		rows, err := db.Query(ctx, `SELECT upload_id, bucket, key FROM uploads
			WHERE initiated <= `+since+` AND upload_id > $2 ORDER BY upload_id LIMIT $3`,
			opts.UploadExpiry.Microseconds(), after, opts.BatchSize)
		if err != nil {
			return n, fmt.Errorf("gc: list expired uploads: %w", err)
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (upload, error) {
			var u upload
			err := r.Scan(&u.id, &u.bucket, &u.key)
			return u, err
		})
		if err != nil {
			return n, fmt.Errorf("gc: list expired uploads: %w", err)
		}
		if len(batch) == 0 {
			return n, nil
		}
		for _, u := range batch {
			res, err := inTx(ctx, db, opts, func(tx pgx.Tx) (outcome, error) {
				keys := []int64{fleet.UploadLockKey(u.id), fleet.ObjectLockKey(u.bucket, u.key)}
				if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k ORDER BY k`, keys); err != nil {
					return 0, fmt.Errorf("lock upload: %w", err)
				}
				// Re-checked under the locks: Complete or Abort may have won.
				tag, err := tx.Exec(ctx, `DELETE FROM uploads WHERE upload_id = $2 AND initiated <= `+since,
					opts.UploadExpiry.Microseconds(), u.id)
				if err != nil {
					return 0, fmt.Errorf("delete upload: %w", err)
				}
				if tag.RowsAffected() == 0 {
					return gone, nil
				}
				return deleted, nil
			})
			if err != nil {
				return n, fmt.Errorf("gc: abort expired upload %s: %w", u.id, err)
			}
			if res == deleted {
				n++
			}
			bar.Add(1)
		}
		after = batch[len(batch)-1].id
	}
}
