package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// The repairs of `s3gate fsck --repair` (package fsck): after the database
// and the data directory were restored from copies of different times, some
// objects reference blobs whose bytes are gone. Each repair is its own short
// transaction under the lock the write paths take.

// BlobReferrers lists the objects, noncurrent versions and upload parts that
// reference blobs ids.
func (g *GC) BlobReferrers(ctx context.Context, ids []int64) ([]store.BlobRef, error) {
	rows, err := g.db.Query(ctx, `
		SELECT blob_id, bucket, key, '', 0, '' FROM objects WHERE blob_id = ANY($1)
		UNION ALL SELECT blob_id, bucket, key, '', part_number, '' FROM object_parts WHERE blob_id = ANY($1)
		UNION ALL SELECT u.blob_id, up.bucket, up.key, u.upload_id, u.part_number, ''
		          FROM upload_parts u JOIN uploads up ON up.upload_id = u.upload_id WHERE u.blob_id = ANY($1)
		UNION ALL SELECT blob_id, bucket, key, '', 0, version_id FROM object_versions WHERE blob_id = ANY($1)
		UNION ALL SELECT p.blob_id, v.bucket, v.key, '', p.part_number, v.version_id
		          FROM version_parts p JOIN object_versions v ON v.seq = p.seq WHERE p.blob_id = ANY($1)
		ORDER BY 2, 3, 4, 6, 5`, ids)
	if err != nil {
		return nil, fmt.Errorf("blob referrers: %w", err)
	}
	refs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[store.BlobRef])
	if err != nil {
		return nil, fmt.Errorf("blob referrers: %w", err)
	}
	return refs, nil
}

// RemoveVersionWithBlobs removes the version versionID of bucket/key
// (current or noncurrent, "" the current one; its parts with it; the next
// newest version is promoted when the current one goes) if it still
// references one of blobs ids, as protocol.RemoveVersionWithBlobs decides,
// in a transaction of GC's pool under the object's lock as DELETE takes it.
// It reports whether it removed it; a version Object Lock protects stays,
// and the error wraps store.ErrObjectLocked.
func (g *GC) RemoveVersionWithBlobs(ctx context.Context, bucket, key, versionID string, ids []int64, bypassGovernance bool) (bool, error) {
	return protocol.RemoveVersionWithBlobs(ctx, g.dialect(), bucket, key, versionID, ids, bypassGovernance)
}

// dialect is the store protocol's dialect over GC's pool: an engine with
// the pool alone, whose transactions and locks are the engine's (no large
// engine, pins or hooks).
func (g *GC) dialect() protocol.Dialect { return dialect{e: &Engine{pool: g.db}} }

// VersionReferencing implements protocol.Tx: the current row (by version
// id, or whatever its version when versionID is ""), else the noncurrent
// version, each with its manifest; a delete marker references nothing.
func (t *txn) VersionReferencing(ctx context.Context, bucket, key, versionID string, ids []int64) (string, bool, error) {
	var vid string
	err := t.q.QueryRow(ctx, `SELECT o.version_id FROM objects o
		WHERE o.bucket = $1 AND o.key = $2 AND ($3 = '' OR o.version_id = $3)
		AND (o.blob_id = ANY($4) OR EXISTS (SELECT 1 FROM object_parts p
		     WHERE p.bucket = o.bucket AND p.key = o.key AND p.blob_id = ANY($4)))
		UNION ALL SELECT v.version_id FROM object_versions v
		WHERE $3 <> '' AND v.bucket = $1 AND v.key = $2 AND v.version_id = $3
		AND (v.blob_id = ANY($4) OR EXISTS (SELECT 1 FROM version_parts p
		     WHERE p.seq = v.seq AND p.blob_id = ANY($4)))`, bucket, key, versionID, ids).Scan(&vid)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("version %q of %s/%s referencing blobs: %w", versionID, bucket, key, mapErr(err))
	}
	return vid, true, nil
}

// RemoveBlobRow deletes the row of blob id, whose bytes are gone, unless
// something still references it (the foreign keys decide, as for GC) or a
// pin holds it. A row left in place would let a put of the same content
// deduplicate onto bytes that do not exist.
func (g *GC) RemoveBlobRow(ctx context.Context, id int64) (bool, error) {
	var n int64
	err := pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		var locked bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, fleet.BlobLockKey(id)).Scan(&locked); err != nil || !locked {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM blobs WHERE id = $1`, id)
		n = tag.RowsAffected()
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // still referenced
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("remove blob row %d: %w", id, err)
	}
	return n > 0, nil
}
