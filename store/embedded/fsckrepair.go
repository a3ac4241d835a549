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

// RemoveVersionWithBlobs removes the version versionID of bucket/key
// (current or noncurrent, "" the current one; its parts cascade; the next
// newest version is promoted when the current one goes) if it still
// references one of blobs ids, as protocol.RemoveVersionWithBlobs decides,
// in a write transaction of the engine's dialect under the object's lock as
// DELETE takes it. It reports whether it removed it; a version Object Lock
// protects stays, and the error wraps store.ErrObjectLocked.
func (g *GC) RemoveVersionWithBlobs(ctx context.Context, bucket, key, versionID string, ids []int64, bypassGovernance bool) (bool, error) {
	return protocol.RemoveVersionWithBlobs(ctx, dialect{e: g.e}, bucket, key, versionID, ids, bypassGovernance)
}

// VersionReferencing implements protocol.Tx: the current row (by version
// id, or whatever its version when versionID is ""), else the noncurrent
// version, each with its manifest; a delete marker references nothing.
func (t txn) VersionReferencing(ctx context.Context, bucket, key, versionID string, ids []int64) (string, bool, error) {
	fail := func(err error) (string, bool, error) {
		return "", false, fmt.Errorf("version %q of %s/%s referencing blobs: %w", versionID, bucket, key, err)
	}
	arr, err := json.Marshal(ids)
	if err != nil {
		return fail(err)
	}
	var vid string
	err = t.q.QueryRowContext(ctx, `SELECT o.version_id FROM objects o
		WHERE o.bucket = ?1 AND o.key = ?2 AND (?3 = '' OR o.version_id = ?3)
		AND (o.blob_id IN (SELECT value FROM json_each(?4)) OR EXISTS (SELECT 1 FROM object_parts p
		     WHERE p.bucket = o.bucket AND p.key = o.key AND p.blob_id IN (SELECT value FROM json_each(?4))))
		UNION ALL SELECT v.version_id FROM object_versions v
		WHERE ?3 <> '' AND v.bucket = ?1 AND v.key = ?2 AND v.version_id = ?3
		AND (v.blob_id IN (SELECT value FROM json_each(?4)) OR EXISTS (SELECT 1 FROM version_parts p
		     WHERE p.seq = v.seq AND p.blob_id IN (SELECT value FROM json_each(?4))))`,
		bucket, key, versionID, string(arr)).Scan(&vid)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return fail(mapErr(err))
	}
	return vid, true, nil
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
