package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// The statements of versioning (protocol.Tx) and ListObjectVersions. Each
// runs under the key's object lock, so the versions of a key change only
// under it; each is one statement, whatever the manifest's size.

// SetBucketVersioning implements store.VersionStore.
func (e *Engine) SetBucketVersioning(ctx context.Context, bucket, status string) error {
	return protocol.SetBucketVersioning(ctx, e, bucket, status)
}

// BucketVersioning implements store.VersionStore.
func (e *Engine) BucketVersioning(ctx context.Context, bucket string) (string, error) {
	return protocol.BucketVersioning(ctx, e, bucket)
}

// DemoteCurrent implements protocol.Tx: the version row, its manifest and
// the drop of the object's manifest are one statement (the foreign keys of
// the new rows are checked at its end).
func (t *txn) DemoteCurrent(ctx context.Context, bucket, key string) (int64, error) {
	var seq int64
	err := t.q.QueryRow(ctx, `WITH v AS (
			INSERT INTO object_versions (bucket, key, version_id, blob_id, size, etag, meta, checksum, part_count, last_modified)
			SELECT bucket, key, version_id, blob_id, size, etag, meta, checksum, part_count, last_modified
			FROM objects WHERE bucket = $1 AND key = $2
			RETURNING seq, part_count),
		p AS (INSERT INTO version_parts (seq, part_number, blob_id, size, start_offset, etag, checksum)
			SELECT v.seq, op.part_number, op.blob_id, op.size, op.start_offset, op.etag, op.checksum
			FROM v JOIN object_parts op ON op.bucket = $1 AND op.key = $2 WHERE v.part_count > 0),
		d AS (DELETE FROM object_parts WHERE bucket = $1 AND key = $2)
		SELECT seq FROM v`, bucket, key).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("demote current version: %w", mapErr(err))
	}
	return seq, nil
}

// DropVersion implements protocol.Tx; the manifest goes by ON DELETE
// CASCADE.
func (t *txn) DropVersion(ctx context.Context, bucket, key, versionID string) (bool, error) {
	tag, err := t.q.Exec(ctx, `DELETE FROM object_versions WHERE bucket = $1 AND key = $2 AND version_id = $3`, bucket, key, versionID)
	if err != nil {
		return false, fmt.Errorf("drop version: %w", mapErr(err))
	}
	return tag.RowsAffected() > 0, nil
}

// PutMarker implements protocol.Tx.
func (t *txn) PutMarker(ctx context.Context, bucket, key, versionID string) (time.Time, error) {
	var lm time.Time
	err := t.q.QueryRow(ctx, `INSERT INTO object_versions (bucket, key, version_id, delete_marker, last_modified)
		VALUES ($1, $2, $3, true, clock_timestamp()) RETURNING last_modified`, bucket, key, versionID).Scan(&lm)
	if isFKViolation(err, "object_versions_bucket_fkey") {
		return time.Time{}, store.ErrNoSuchBucket
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("write delete marker: %w", mapErr(err))
	}
	return lm, nil
}

// PromoteNewest implements protocol.Tx in one statement: the object row and
// its manifest are inserted and the version row deleted (its manifest
// cascades) together.
func (t *txn) PromoteNewest(ctx context.Context, bucket, key string) (bool, error) {
	var n int
	err := t.q.QueryRow(ctx, `WITH n AS (
			SELECT * FROM object_versions WHERE bucket = $1 AND key = $2 ORDER BY seq DESC LIMIT 1),
		o AS (INSERT INTO objects (bucket, key, version_id, blob_id, size, etag, meta, checksum, part_count, last_modified)
			SELECT bucket, key, version_id, blob_id, size, etag, meta, checksum, part_count, last_modified
			FROM n WHERE NOT delete_marker RETURNING 1),
		p AS (INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
			SELECT $1, $2, vp.part_number, vp.blob_id, vp.size, vp.start_offset, vp.etag, vp.checksum
			FROM n JOIN version_parts vp ON vp.seq = n.seq WHERE NOT n.delete_marker),
		d AS (DELETE FROM object_versions WHERE seq IN (SELECT seq FROM n WHERE NOT delete_marker))
		SELECT count(*) FROM o`, bucket, key).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("promote newest version: %w", mapErr(err))
	}
	return n > 0, nil
}

// FindVersion implements protocol.Tx (the object lock keeps the rows as
// they are).
func (t *txn) FindVersion(ctx context.Context, bucket, key, versionID string) (protocol.Version, error) {
	v := protocol.Version{Found: true}
	err := t.q.QueryRow(ctx, `SELECT c.cur, c.delete_marker, c.etag, c.last_modified,
			EXISTS (SELECT 1 FROM objects WHERE bucket = $1 AND key = $2)
		FROM (SELECT true AS cur, false AS delete_marker, etag, last_modified FROM objects
				WHERE bucket = $1 AND key = $2 AND version_id = $3
			UNION ALL SELECT false, delete_marker, etag, last_modified FROM object_versions
				WHERE bucket = $1 AND key = $2 AND version_id = $3) c`, bucket, key, versionID).Scan(
		&v.Current, &v.DeleteMarker, &v.ETag, &v.LastModified, &v.HasCurrent)
	if errors.Is(err, pgx.ErrNoRows) {
		return protocol.Version{}, nil
	}
	if err != nil {
		return protocol.Version{}, fmt.Errorf("find version: %w", mapErr(err))
	}
	return v, nil
}

// ResolveVersion implements protocol.Tx.
func (t *txn) ResolveVersion(ctx context.Context, bucket, key, versionID string, withInline bool) (*protocol.Resolved, error) {
	return resolveObject(ctx, t.reader(), bucket, key, &versionID, withInline, false)
}

// LatestMarker implements protocol.Tx in one statement.
func (t *txn) LatestMarker(ctx context.Context, bucket, key string) (*store.ObjectInfo, error) {
	var exists bool
	var versionID *string
	var lm *time.Time
	err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM buckets WHERE name = $1), v.version_id, v.last_modified
		FROM (VALUES (1)) one LEFT JOIN LATERAL (
			SELECT version_id, last_modified, delete_marker FROM object_versions
			WHERE bucket = $1 AND key = $2 ORDER BY seq DESC LIMIT 1) v ON v.delete_marker`, bucket, key).Scan(&exists, &versionID, &lm)
	if err != nil {
		return nil, fmt.Errorf("latest delete marker: %w", mapErr(err))
	}
	if !exists {
		return nil, fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchBucket)
	}
	if versionID == nil {
		return nil, nil
	}
	return &store.ObjectInfo{Bucket: bucket, Key: key, VersionID: *versionID, DeleteMarker: true, LastModified: *lm}, nil
}

// ReplaceMeta implements protocol.Tx.
func (t *txn) ReplaceMeta(ctx context.Context, bucket, key string, seq int64, meta store.ObjectMeta) error {
	var err error
	if seq == 0 {
		_, err = t.q.Exec(ctx, `UPDATE objects SET meta = $3 WHERE bucket = $1 AND key = $2`, bucket, key, meta)
	} else {
		_, err = t.q.Exec(ctx, `UPDATE object_versions SET meta = $2 WHERE seq = $1`, seq, meta)
	}
	if err != nil {
		return fmt.Errorf("replace metadata: %w", mapErr(err))
	}
	return nil
}

// currentCols are the columns of versionRows of the current objects.
const currentCols = `bucket, key, 9223372036854775807::bigint AS seq, version_id, false AS delete_marker,
		size, etag, last_modified, checksum, meta`

// versionRows is every version of the bucket's keys: the current objects
// (newest of their key: the largest seq) and the noncurrent versions.
const versionRows = `(SELECT ` + currentCols + ` FROM objects
	UNION ALL SELECT bucket, key, seq, version_id, delete_marker, size, etag, last_modified, checksum, meta
		FROM object_versions)`

// markerSeq is the seq of the version marker $U of key $T: the versions
// after it are older (smaller seq). A marker that is the current object, or
// names nothing, resumes after the current object: nothing is left out.
const markerSeq = `coalesce((SELECT seq FROM object_versions WHERE bucket = $1 AND key = $T AND version_id = $U),
	9223372036854775807)`

// versionList lists versionRows for skipScan, newest first within a key.
var versionList = listTable{table: versionRows,
	cols: `o.key, o.seq, o.version_id, o.delete_marker, o.size, o.etag, o.last_modified, o.checksum, coalesce(o.meta->>'sc', '')`,
	hit:  `hit, 0::bigint, '', false, 0::bigint, '', 'epoch'::timestamptz, NULL::jsonb, ''`, order: "1, 2 DESC",
	// The versions after a marker are noncurrent (the current object has
	// the largest seq), read in index order up to the limit.
	tail: `SELECT * FROM (SELECT o.key, o.seq, o.version_id, o.delete_marker, o.size, o.etag, o.last_modified, o.checksum,
			coalesce(o.meta->>'sc', '') FROM object_versions o
		WHERE o.bucket = $1 AND o.key = $T AND o.seq < ` + markerSeq + ` ORDER BY o.seq DESC LIMIT $L) t`}

// ListObjectVersions implements store.VersionStore: each fetch is one
// statement over the current and the noncurrent versions.
func (e *Engine) ListObjectVersions(ctx context.Context, bucket string, p store.ListVersionsParams) (store.ListVersionsResult, error) {
	if err := e.bucketExists(ctx, e.pool, bucket); err != nil {
		return store.ListVersionsResult{}, fmt.Errorf("list versions in %s: %w", bucket, err)
	}
	res, err := protocol.ListVersions(p, func(c *protocol.ListCursor, tail *protocol.Marker, limit int) ([]store.ObjectInfo, error) {
		var query string
		var args []any
		if c.DelimNext != "" {
			query, args = skipScan(c, bucket, versionList, tail, limit)
		} else {
			// Each table is read in its index order up to the limit, so a
			// page costs the page, not the bucket.
			cond, a := where(c, "o.key", 2)
			args = append([]any{bucket}, a...)
			lim := fmt.Sprintf("$%d", len(args)+1)
			args = append(args, limit)
			query = `SELECT * FROM ((SELECT ` + versionList.cols + ` FROM (SELECT ` + currentCols + ` FROM objects o
					WHERE o.bucket = $1 AND ` + cond + ` ORDER BY o.key LIMIT ` + lim + `) o)
				UNION ALL (SELECT ` + versionList.cols + ` FROM object_versions o
					WHERE o.bucket = $1 AND ` + cond + ` ORDER BY o.key, o.seq DESC LIMIT ` + lim + `)`
			if tail != nil {
				t, u := fmt.Sprintf("$%d::text", len(args)+1), fmt.Sprintf("$%d::text", len(args)+2)
				args = append(args, tail.Key, tail.ID)
				query += ` UNION ALL (SELECT ` + versionList.cols + ` FROM object_versions o
					WHERE o.bucket = $1 AND o.key = ` + t + ` AND o.seq < ` + replaceMarker(markerSeq, t, u) + `
					ORDER BY o.seq DESC LIMIT ` + lim + `)`
			}
			query += `) x ORDER BY ` + versionList.order + ` LIMIT ` + lim
		}
		rows, err := e.pool.Query(ctx, query, args...)
		if err != nil {
			return nil, mapErr(err)
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ObjectInfo, error) {
			o := store.ObjectInfo{Bucket: bucket}
			var seq int64
			var ck *store.Checksum
			err := r.Scan(&o.Key, &seq, &o.VersionID, &o.DeleteMarker, &o.Size, &o.ETag, &o.LastModified, &ck, &o.Meta.StorageClass)
			if ck != nil {
				o.Checksum = *ck
			}
			return o, err
		})
		if err != nil {
			return nil, mapErr(err)
		}
		return batch, nil
	})
	if err != nil {
		return res, fmt.Errorf("list versions in %s: %w", bucket, err)
	}
	return res, nil
}

// replaceMarker numbers markerSeq's key and version placeholders.
func replaceMarker(q, t, u string) string {
	return strings.NewReplacer("$T", t, "$U", u).Replace(q)
}
