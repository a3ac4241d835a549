package gc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store/localfs"
	pgcontent "github.com/s3gate/s3gate/store/pg/content"
)

// schemaLockKey serializes EnsureSchema across instances starting at once.
const schemaLockKey int64 = 0x73336761_67637363 // "s3gagcsc"

// Schema holds GC's own bookkeeping: when an orphan large object was first
// seen. Large objects carry no creation time, so their grace period runs from
// the first sweep that saw them unreferenced.
const Schema = `CREATE TABLE IF NOT EXISTS gc_lo_sightings (
    lo         oid PRIMARY KEY,
    first_seen timestamptz NOT NULL DEFAULT clock_timestamp()
)`

// EnsureSchema creates GC's tables if they do not exist, under an advisory
// lock so that several instances may start at once.
func EnsureSchema(ctx context.Context, db *pgxpool.Pool) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("gc: schema: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx)) // the DDL error is the one to report
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockKey); err != nil {
		return fmt.Errorf("gc: schema lock: %w", err)
	}
	if _, err := tx.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("gc: create tables: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("gc: schema: commit: %w", err)
	}
	return nil
}

// ReapUploads aborts multipart uploads initiated more than UploadExpiry ago:
// the upload row goes, its parts cascade, and their blobs become candidates
// for the next sweep. Uploads whose row is locked by a part upload or a
// Complete in flight are skipped (SKIP LOCKED) and met again next time.
func ReapUploads(ctx context.Context, db *pgxpool.Pool, opts Options) (int64, error) {
	opts = opts.withDefaults()
	var total int64
	for {
		tag, err := db.Exec(ctx, `WITH doomed AS (
				SELECT upload_id FROM uploads
				WHERE initiated <= clock_timestamp() - $1::bigint * interval '1 microsecond'
				ORDER BY initiated LIMIT $2 FOR UPDATE SKIP LOCKED)
			DELETE FROM uploads u USING doomed d WHERE u.upload_id = d.upload_id`,
			opts.UploadExpiry.Microseconds(), opts.BatchSize)
		if err != nil {
			return total, fmt.Errorf("gc: abort expired uploads: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() == 0 {
			return total, nil
		}
	}
}

// ReapLargeObjects unlinks large objects that neither a blob nor a stage row
// references once they have been seen so for the grace period. A put creates
// its large object together with its stage row, and its joint transaction
// swaps the stage row for the blob row, so an object of a put in flight is
// always referenced here, and one that is not can never gain a reference;
// the decision is still re-checked under an advisory lock on the OID, in the
// unlinking transaction. (Stage rows themselves are ReapStages' business.) The database is assumed to be s3gate's alone: any
// large object it does not reference is an orphan.
func ReapLargeObjects(ctx context.Context, db *pgxpool.Pool, opts Options) (int64, error) {
	opts = opts.withDefaults()
	rows, err := db.Query(ctx, `SELECT m.oid FROM pg_largeobject_metadata m
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.lo_oid = m.oid)
		  AND NOT EXISTS (SELECT 1 FROM blob_stages s WHERE s.lo_oid = m.oid)`)
	if err != nil {
		return 0, fmt.Errorf("gc: list orphan large objects: %w", err)
	}
	orphans, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return 0, fmt.Errorf("gc: list orphan large objects: %w", err)
	}
	// Forget sightings of objects that are gone or referenced, record new ones.
	if _, err := db.Exec(ctx, `DELETE FROM gc_lo_sightings WHERE lo <> ALL($1::oid[])`, orphans); err != nil {
		return 0, fmt.Errorf("gc: prune sightings: %w", err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO gc_lo_sightings (lo) SELECT unnest($1::oid[]) ON CONFLICT DO NOTHING`, orphans); err != nil {
		return 0, fmt.Errorf("gc: record sightings: %w", err)
	}
	rows, err = db.Query(ctx, `SELECT lo FROM gc_lo_sightings
		WHERE first_seen <= clock_timestamp() - $1::bigint * interval '1 microsecond' ORDER BY lo`,
		opts.Grace.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("gc: list due orphans: %w", err)
	}
	due, err := pgx.CollectRows(rows, pgx.RowTo[uint32])
	if err != nil {
		return 0, fmt.Errorf("gc: list due orphans: %w", err)
	}
	var n int64
	for len(due) > 0 {
		batch := due[:min(len(due), maxUnlinksPerTx)]
		due = due[len(batch):]
		var unlinked int64
		_, err := inTx(ctx, db, opts, func(tx pgx.Tx) (outcome, error) {
			unlinked = 0
			for _, oid := range batch {
				if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, largeObjectLockKey(oid)); err != nil {
					return 0, fmt.Errorf("lock large object %d: %w", oid, err)
				}
				var k int64
				// Unlinked only if it still exists and still no blob refers to it.
				err := tx.QueryRow(ctx, `SELECT count(lo_unlink(m.oid)) FROM pg_largeobject_metadata m
					WHERE m.oid = $1 AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.lo_oid = m.oid)
					  AND NOT EXISTS (SELECT 1 FROM blob_stages s WHERE s.lo_oid = m.oid)`, oid).Scan(&k)
				if err != nil {
					return 0, fmt.Errorf("unlink large object %d: %w", oid, err)
				}
				unlinked += k
			}
			if _, err := tx.Exec(ctx, `DELETE FROM gc_lo_sightings WHERE lo = ANY($1::oid[])`, batch); err != nil {
				return 0, fmt.Errorf("forget sightings: %w", err)
			}
			return deleted, nil
		})
		if err != nil {
			return n, fmt.Errorf("gc: orphan large objects: %w", err)
		}
		n += unlinked
	}
	return n, nil
}

// ReapStages drops content staged in PostgreSQL (ADR 007) whose stage row
// was untouched for StageGrace: puts that crashed or were abandoned before
// publishing. Each stage goes in its own short transaction that deletes the
// row only if it is still that old (pgcontent.Unstage), so a put that wrote a
// chunk meanwhile keeps it, and one whose publish claimed the row is never
// touched; a put that does lose its stage row fails (it cannot publish
// without it), it never publishes missing bytes.
func ReapStages(ctx context.Context, db *pgxpool.Pool, opts Options) (int64, error) {
	opts = opts.withDefaults()
	rows, err := db.Query(ctx, `SELECT blob_id FROM blob_stages
		WHERE touched_at <= clock_timestamp() - $1::bigint * interval '1 microsecond' ORDER BY blob_id`,
		opts.StageGrace.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("gc: list abandoned stages: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("gc: list abandoned stages: %w", err)
	}
	var n int64
	for _, id := range ids {
		var dropped bool
		_, err := inTx(ctx, db, opts, func(tx pgx.Tx) (outcome, error) {
			// A put pins its blob id while it stages: never reap under it.
			var got bool
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, BlobLockKey(id)).Scan(&got); err != nil {
				return 0, fmt.Errorf("try pin lock: %w", err)
			}
			if !got {
				return pinned, nil
			}
			var err error
			if dropped, err = pgcontent.Unstage(ctx, tx, id, opts.StageGrace); err != nil || !dropped {
				return gone, err
			}
			return deleted, nil
		})
		if err != nil {
			return n, fmt.Errorf("gc: stage of blob %d: %w", id, err)
		}
		if dropped {
			n++
		}
	}
	return n, nil
}

// ReapStageFiles removes stage files of media untouched for StageGrace: the
// leftovers of puts that crashed before publishing.
func ReapStageFiles(ctx context.Context, media *localfs.Media, opts Options) (int64, error) {
	opts = opts.withDefaults()
	paths, err := media.StageFiles()
	if err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	var n int64
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("gc: stage files: %w", err)
		}
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // published or discarded meanwhile
		}
		if err != nil {
			return n, fmt.Errorf("gc: stat stage file: %w", err)
		}
		if time.Since(fi.ModTime()) < opts.StageGrace {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("gc: remove stage file: %w", err)
		}
		n++
	}
	return n, nil
}

// ReapBlobFiles removes blob files of media whose id has no blob row and
// which are older than the grace. A put publishes its file inside its joint
// transaction, after inserting the row: the row of a put in flight is not
// visible yet, so absence is proved by inserting a probe row with the same id
// (which waits for any uncommitted insert of that id and fails if it
// committed). The file is removed while the probe holds the id, and the probe
// is always rolled back. Ids are never reused, so no later put can want it.
func ReapBlobFiles(ctx context.Context, db *pgxpool.Pool, media *localfs.Media, opts Options) (int64, error) {
	opts = opts.withDefaults()
	ids, err := media.BlobIDs(ctx)
	if err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	var n int64
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 1000)]
		ids = ids[len(batch):]
		rows, err := db.Query(ctx, `SELECT i FROM unnest($1::bigint[]) AS i
			WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = i)`, batch)
		if err != nil {
			return n, fmt.Errorf("gc: blob files without rows: %w", err)
		}
		rowless, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return n, fmt.Errorf("gc: blob files without rows: %w", err)
		}
		for _, id := range rowless {
			fi, err := os.Stat(blobFilePath(media, id))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return n, fmt.Errorf("gc: stat blob file %d: %w", id, err)
			}
			if time.Since(fi.ModTime()) < opts.Grace {
				continue
			}
			removed, err := removeRowlessFile(ctx, db, media, id, opts)
			if err != nil {
				return n, fmt.Errorf("gc: blob file %d: %w", id, err)
			}
			if removed {
				n++
			}
		}
	}
	return n, nil
}

// removeRowlessFile removes the file of blob id under a probe row; see
// ReapBlobFiles.
func removeRowlessFile(ctx context.Context, db *pgxpool.Pool, media *localfs.Media, id int64, opts Options) (bool, error) {
	var probe [32]byte
	if _, err := rand.Read(probe[:]); err != nil {
		return false, fmt.Errorf("probe hash: %w", err)
	}
	removed := false
	// The closure never returns "deleted": inTx then rolls the probe back.
	_, err := inTx(ctx, db, opts, func(tx pgx.Tx) (outcome, error) {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, BlobLockKey(id)).Scan(&got); err != nil {
			return 0, fmt.Errorf("try pin lock: %w", err)
		}
		if !got {
			return pinned, nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO blobs (id, sha256, size, tier) VALUES ($1, $2, 0, 'local')`, id, probe[:])
		if pgCode(err) == sqlUniqueViolat {
			return referenced, nil // the row exists: its put committed meanwhile
		}
		if err != nil {
			return 0, fmt.Errorf("probe row: %w", err)
		}
		if opts.Guard != nil {
			if err := opts.Guard(ctx); err != nil {
				return 0, fmt.Errorf("guard refused the removal: %w", err)
			}
		}
		if err := media.Remove(ctx, id); err != nil {
			return 0, err
		}
		removed = true
		return gone, nil
	})
	return removed, err
}

// blobFilePath mirrors localfs's layout (blobs/<id&0xff>/<id>>8&0xff>/<id>)
// to read a file's age. If the layout ever changes, Stat finds nothing and
// files are kept: the safe direction.
func blobFilePath(m *localfs.Media, id int64) string {
	u := uint64(id)
	return filepath.Join(m.Dir(), "blobs", fmt.Sprintf("%02x", u&0xff), fmt.Sprintf("%02x", u>>8&0xff),
		strconv.FormatInt(id, 10))
}
