package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// The repairs of `s3gate fsck --repair` (package fsck) on the embedded
// engine, the counterparts of store/pg's (fsckrepair.go there): after the
// data directory's database and blob files were restored from copies of
// different times, some objects reference blobs whose bytes are gone. Each
// repair is its own write transaction under the locks the write paths take.

// BlobReferrers lists the objects, noncurrent versions and upload parts that
// reference blobs ids.
func (g *GC) BlobReferrers(ctx context.Context, ids []int64) ([]store.BlobRef, error) {
	arr, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("blob referrers: %w", err)
	}
	rows, err := g.e.rdb.QueryContext(ctx, `WITH ids(id) AS (SELECT value FROM json_each(?))
		SELECT blob_id, bucket, key, '', 0, '' FROM objects WHERE blob_id IN (SELECT id FROM ids)
		UNION ALL SELECT blob_id, bucket, key, '', part_number, '' FROM object_parts WHERE blob_id IN (SELECT id FROM ids)
		UNION ALL SELECT u.blob_id, up.bucket, up.key, u.upload_id, u.part_number, ''
		          FROM upload_parts u JOIN uploads up ON up.upload_id = u.upload_id WHERE u.blob_id IN (SELECT id FROM ids)
		UNION ALL SELECT blob_id, bucket, key, '', 0, version_id FROM object_versions WHERE blob_id IN (SELECT id FROM ids)
		UNION ALL SELECT p.blob_id, v.bucket, v.key, '', p.part_number, v.version_id
		          FROM version_parts p JOIN object_versions v ON v.seq = p.seq WHERE p.blob_id IN (SELECT id FROM ids)
		ORDER BY 2, 3, 4, 6, 5`, string(arr))
	if err != nil {
		return nil, fmt.Errorf("blob referrers: %w", mapErr(err))
	}
	defer rows.Close()
	var refs []store.BlobRef
	for rows.Next() {
		var r store.BlobRef
		if err := rows.Scan(&r.BlobID, &r.Bucket, &r.Key, &r.UploadID, &r.Part, &r.VersionID); err != nil {
			return nil, fmt.Errorf("blob referrers: %w", mapErr(err))
		}
		refs = append(refs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("blob referrers: %w", mapErr(err))
	}
	return refs, nil
}

// RemoveObjectWithBlobs deletes object bucket/key (its parts cascade) if it
// still references one of blobs ids, under the object's lock as DELETE
// takes it. It reports whether it deleted it. Object Lock decides as for
// every removal of a version for good (protocol.CheckRemovable): a version
// it protects stays, and the error wraps store.ErrObjectLocked;
// bypassGovernance lifts a running GOVERNANCE retention only.
func (g *GC) RemoveObjectWithBlobs(ctx context.Context, bucket, key string, ids []int64, bypassGovernance bool) (bool, error) {
	arr, err := json.Marshal(ids)
	if err != nil {
		return false, fmt.Errorf("remove object %s/%s: %w", bucket, key, err)
	}
	// The lock before the write transaction, as every writer takes it.
	unlock, err := g.e.locks.lock(ctx, uint64(fleet.ObjectLockKey(bucket, key)))
	if err != nil {
		return false, fmt.Errorf("remove object %s/%s: %w", bucket, key, err)
	}
	defer unlock()
	var n int64
	err = g.e.withWrite(ctx, func(tx *sql.Tx) error {
		var vid string
		err := tx.QueryRowContext(ctx, `SELECT o.version_id FROM objects o WHERE o.bucket = ? AND o.key = ?
			AND (o.blob_id IN (SELECT value FROM json_each(?)) OR EXISTS (SELECT 1 FROM object_parts p
			     WHERE p.bucket = o.bucket AND p.key = o.key AND p.blob_id IN (SELECT value FROM json_each(?))))`,
			bucket, key, string(arr), string(arr)).Scan(&vid)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // gone, or no longer the object without bytes
		}
		if err != nil {
			return mapErr(err)
		}
		l, now, err := txn{q: tx}.VersionLock(ctx, bucket, key, vid)
		if err != nil {
			return err
		}
		if err := protocol.CheckRemovable(l, now, bypassGovernance); err != nil {
			return err
		}
		r, err := tx.ExecContext(ctx, `DELETE FROM objects WHERE bucket = ? AND key = ? AND version_id = ?`, bucket, key, vid)
		if err != nil {
			return mapErr(err)
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("remove object %s/%s: %w", bucket, key, err)
	}
	return n > 0, nil
}

// RemoveBlobRow deletes the row of blob id, whose bytes are gone, unless
// something still references it or a reader pins it. A row left in place
// would let a put of the same content deduplicate onto bytes that do not
// exist.
func (g *GC) RemoveBlobRow(ctx context.Context, id int64) (bool, error) {
	release, ok := g.e.pins.TryExclusive(id)
	if !ok {
		return false, nil
	}
	defer release()
	var n int64
	err := g.e.withWrite(ctx, func(tx *sql.Tx) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM blobs AS b WHERE b.id = ? AND `+unreferenced, id)
		if err != nil {
			return mapErr(err)
		}
		n, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("remove blob row %d: %w", id, err)
	}
	return n > 0, nil
}
