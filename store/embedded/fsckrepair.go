package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

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
	rows, err := g.e.rq.QueryContext(ctx, `WITH ids(id) AS (SELECT value FROM json_each(?))
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

// RemoveObjectWithBlobs removes the current version of bucket/key (its
// parts cascade; the next newest version is promoted) if it still
// references one of blobs ids, as protocol.RemoveObjectWithBlobs
// decides, in a write transaction of the engine's dialect under the
// object's lock as DELETE takes it. It reports whether it deleted it; a
// version Object Lock protects stays, and the error wraps
// store.ErrObjectLocked.
func (g *GC) RemoveObjectWithBlobs(ctx context.Context, bucket, key string, ids []int64, bypassGovernance bool) (bool, error) {
	return protocol.RemoveObjectWithBlobs(ctx, dialect{e: g.e}, bucket, key, ids, bypassGovernance)
}

// CurrentReferencing implements protocol.Tx.
func (t txn) CurrentReferencing(ctx context.Context, bucket, key string, ids []int64) (string, bool, error) {
	fail := func(err error) (string, bool, error) {
		return "", false, fmt.Errorf("current row of %s/%s referencing blobs: %w", bucket, key, err)
	}
	arr, err := json.Marshal(ids)
	if err != nil {
		return fail(err)
	}
	var vid string
	err = t.q.QueryRowContext(ctx, `SELECT o.version_id FROM objects o WHERE o.bucket = ? AND o.key = ?
		AND (o.blob_id IN (SELECT value FROM json_each(?)) OR EXISTS (SELECT 1 FROM object_parts p
		     WHERE p.bucket = o.bucket AND p.key = o.key AND p.blob_id IN (SELECT value FROM json_each(?))))`,
		bucket, key, string(arr), string(arr)).Scan(&vid)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return fail(mapErr(err))
	}
	return vid, true, nil
}

// DeleteCurrent implements protocol.Tx; the manifest rows cascade.
func (t txn) DeleteCurrent(ctx context.Context, bucket, key, versionID string) (bool, error) {
	r, err := t.q.ExecContext(ctx, `DELETE FROM objects WHERE bucket = ? AND key = ? AND version_id = ?`, bucket, key, versionID)
	if err != nil {
		return false, fmt.Errorf("delete current row of %s/%s: %w", bucket, key, mapErr(err))
	}
	n, err := r.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete current row of %s/%s: %w", bucket, key, mapErr(err))
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
	err := g.e.withWrite(ctx, func(tx txQuerier) error {
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
