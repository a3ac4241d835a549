package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// The statements of versioning (protocol.Tx) and ListObjectVersions. A
// write transaction holds the only writer, so the statements of one step
// see each other and nothing else.

// SetBucketVersioning implements store.VersionStore.
func (e *Engine) SetBucketVersioning(ctx context.Context, bucket, status string) error {
	return protocol.SetBucketVersioning(ctx, e, bucket, status)
}

// BucketVersioning implements store.VersionStore.
func (e *Engine) BucketVersioning(ctx context.Context, bucket string) (string, error) {
	return protocol.BucketVersioning(ctx, e, bucket)
}

// DemoteCurrent implements protocol.Tx: three bounded statements (the row,
// its manifest, the drop of the object's manifest).
func (t txn) DemoteCurrent(ctx context.Context, bucket, key string) (int64, error) {
	var seq int64
	var parts int
	err := t.q.QueryRowContext(ctx, `INSERT INTO object_versions (bucket, key, version_id, blob_id, size, etag, meta, checksum, part_count, last_modified)
		SELECT bucket, key, version_id, blob_id, size, etag, meta, checksum, part_count, last_modified
		FROM objects WHERE bucket = ? AND key = ? RETURNING seq, part_count`, bucket, key).Scan(&seq, &parts)
	if err != nil {
		return 0, fmt.Errorf("demote current version: %w", mapErr(err))
	}
	if parts == 0 {
		return seq, nil
	}
	if _, err := t.q.ExecContext(ctx, `INSERT INTO version_parts (seq, part_number, blob_id, size, start_offset, etag, checksum)
		SELECT ?, part_number, blob_id, size, start_offset, etag, checksum FROM object_parts WHERE bucket = ? AND key = ?`,
		seq, bucket, key); err != nil {
		return 0, fmt.Errorf("demote manifest: %w", mapErr(err))
	}
	return seq, t.DropManifest(ctx, bucket, key)
}

// DropVersion implements protocol.Tx; the manifest goes by ON DELETE
// CASCADE.
func (t txn) DropVersion(ctx context.Context, bucket, key, versionID string) (bool, error) {
	res, err := t.q.ExecContext(ctx, `DELETE FROM object_versions WHERE bucket = ? AND key = ? AND version_id = ?`, bucket, key, versionID)
	if err != nil {
		return false, fmt.Errorf("drop version: %w", mapErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("drop version: %w", err)
	}
	return n > 0, nil
}

// PutMarker implements protocol.Tx.
func (t txn) PutMarker(ctx context.Context, bucket, key, versionID string) (time.Time, error) {
	lm := now()
	_, err := t.q.ExecContext(ctx, `INSERT INTO object_versions (bucket, key, version_id, delete_marker, last_modified)
		VALUES (?, ?, ?, 1, ?)`, bucket, key, versionID, toMicros(lm))
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
		return time.Time{}, store.ErrNoSuchBucket
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("write delete marker: %w", mapErr(err))
	}
	return lm, nil
}

// PromoteNewest implements protocol.Tx.
func (t txn) PromoteNewest(ctx context.Context, bucket, key string) (bool, error) {
	var seq int64
	var marker bool
	err := t.q.QueryRowContext(ctx, `SELECT seq, delete_marker FROM object_versions WHERE bucket = ? AND key = ?
		ORDER BY seq DESC LIMIT 1`, bucket, key).Scan(&seq, &marker)
	if errors.Is(err, sql.ErrNoRows) || err == nil && marker {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("promote newest version: %w", mapErr(err))
	}
	for _, q := range []string{
		`INSERT INTO objects (bucket, key, version_id, blob_id, size, etag, meta, checksum, part_count, last_modified)
			SELECT bucket, key, version_id, blob_id, size, etag, meta, checksum, part_count, last_modified
			FROM object_versions WHERE seq = ?1`,
		`INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
			SELECT v.bucket, v.key, p.part_number, p.blob_id, p.size, p.start_offset, p.etag, p.checksum
			FROM version_parts p JOIN object_versions v ON v.seq = p.seq WHERE p.seq = ?1`,
		`DELETE FROM object_versions WHERE seq = ?1`,
	} {
		if _, err := t.q.ExecContext(ctx, q, seq); err != nil {
			return false, fmt.Errorf("promote newest version: %w", mapErr(err))
		}
	}
	return true, nil
}

// FindVersion implements protocol.Tx.
func (t txn) FindVersion(ctx context.Context, bucket, key, versionID string) (protocol.Version, error) {
	v := protocol.Version{Found: true}
	var lm int64
	err := t.q.QueryRowContext(ctx, `SELECT c.cur, c.delete_marker, c.etag, c.last_modified,
			EXISTS (SELECT 1 FROM objects WHERE bucket = ?1 AND key = ?2)
		FROM (SELECT 1 AS cur, 0 AS delete_marker, etag, last_modified FROM objects
				WHERE bucket = ?1 AND key = ?2 AND version_id = ?3
			UNION ALL SELECT 0, delete_marker, etag, last_modified FROM object_versions
				WHERE bucket = ?1 AND key = ?2 AND version_id = ?3) c`, bucket, key, versionID).Scan(
		&v.Current, &v.DeleteMarker, &v.ETag, &lm, &v.HasCurrent)
	if errors.Is(err, sql.ErrNoRows) {
		return protocol.Version{}, nil
	}
	if err != nil {
		return protocol.Version{}, fmt.Errorf("find version: %w", mapErr(err))
	}
	v.LastModified = fromMicros(lm)
	return v, nil
}

// ResolveVersion implements protocol.Tx.
func (t txn) ResolveVersion(ctx context.Context, bucket, key, versionID string, withInline bool) (*protocol.Resolved, error) {
	return t.resolve(ctx, bucket, key, &versionID, withInline)
}

// LatestMarker implements protocol.Tx in one statement.
func (t txn) LatestMarker(ctx context.Context, bucket, key string) (*store.ObjectInfo, error) {
	var exists bool
	var versionID sql.NullString
	var lm sql.NullInt64
	err := t.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM buckets WHERE name = ?1), v.version_id, v.last_modified
		FROM (SELECT 1) one LEFT JOIN (SELECT version_id, last_modified, delete_marker FROM object_versions
			WHERE bucket = ?1 AND key = ?2 ORDER BY seq DESC LIMIT 1) v ON v.delete_marker`, bucket, key).Scan(&exists, &versionID, &lm)
	if err != nil {
		return nil, fmt.Errorf("latest delete marker: %w", mapErr(err))
	}
	if !exists {
		return nil, fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchBucket)
	}
	if !versionID.Valid {
		return nil, nil
	}
	return &store.ObjectInfo{Bucket: bucket, Key: key, VersionID: versionID.String, DeleteMarker: true, LastModified: fromMicros(lm.Int64)}, nil
}

// ReplaceMeta implements protocol.Tx.
func (t txn) ReplaceMeta(ctx context.Context, bucket, key string, seq int64, meta store.ObjectMeta) error {
	m, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("encode metadata: %w", err)
	}
	if seq == 0 {
		_, err = t.q.ExecContext(ctx, `UPDATE objects SET meta = ? WHERE bucket = ? AND key = ?`, string(m), bucket, key)
	} else {
		_, err = t.q.ExecContext(ctx, `UPDATE object_versions SET meta = ? WHERE seq = ?`, string(m), seq)
	}
	if err != nil {
		return fmt.Errorf("replace metadata: %w", mapErr(err))
	}
	return nil
}

// currentCols are the version columns of the current objects.
const currentCols = `bucket, key, 9223372036854775807 AS seq, version_id, 0 AS delete_marker,
		size, etag, last_modified, checksum, meta`

// currentRows are the current objects as versions: the newest of their key
// (the largest seq).
const currentRows = `(SELECT ` + currentCols + ` FROM objects)`

// markerSeq is the seq of the version marker (key ?9, version ?10): the
// versions after it are older. A marker that is the current object, or
// names nothing, resumes after the current object: nothing is left out.
const markerSeq = `coalesce((SELECT seq FROM object_versions WHERE bucket = ?1 AND key = ?9 AND version_id = ?10),
	9223372036854775807)`

// versionList lists the current objects and the noncurrent versions for
// skipScan, newest first within a key.
var versionList = listTable{tables: []string{currentRows, "object_versions"},
	cols: `key, seq, version_id, delete_marker, size, etag, last_modified, checksum, coalesce(json_extract(meta, '$.sc'), '')`,
	hit:  `hit, 0, '', 0, 0, '', 0, NULL, ''`, order: "1, 2 DESC",
	// The versions after a marker are noncurrent (the current object has
	// the largest seq), read in index order up to the limit.
	tail: `SELECT * FROM (SELECT key, seq, version_id, delete_marker, size, etag, last_modified, checksum,
			coalesce(json_extract(meta, '$.sc'), '') FROM object_versions
		WHERE bucket = ?1 AND key = ?9 AND seq < ` + markerSeq + ` ORDER BY seq DESC LIMIT ?8)`}

// ListObjectVersions implements store.VersionStore: the page is read from
// one snapshot, each fetch in one statement.
func (e *Engine) ListObjectVersions(ctx context.Context, bucket string, p store.ListVersionsParams) (store.ListVersionsResult, error) {
	var res store.ListVersionsResult
	err := e.withRead(ctx, func(tx txQuerier) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		var err error
		res, err = protocol.ListVersions(p, func(c *protocol.ListCursor, tail *protocol.Marker, limit int) ([]store.ObjectInfo, error) {
			var query string
			var args []any
			if c.DelimNext != "" {
				query, args = skipScan(c, bucket, versionList, tail, limit)
			} else {
				// Numbered as skipScan numbers them (?8 the limit, ?9 and ?10
				// the marker). Each table is read in its index order up to
				// the limit, so a page costs the page, not the bucket.
				var skip, to any
				if !c.Range.Inclusive {
					skip = c.Range.From
				}
				if c.Range.Bounded {
					to = c.Range.To
				}
				args = []any{bucket, c.Range.From, skip, to, nil, nil, nil, limit, nil, nil}
				rng := `bucket = ?1 AND key >= ?2 AND key IS NOT ?3 AND key < coalesce(?4, X'')`
				query = `SELECT * FROM (SELECT ` + versionList.cols + ` FROM (SELECT ` + currentCols + ` FROM objects
						WHERE ` + rng + ` ORDER BY key LIMIT ?8)
					UNION ALL SELECT * FROM (SELECT ` + versionList.cols + ` FROM object_versions
						WHERE ` + rng + ` ORDER BY key, seq DESC LIMIT ?8)`
				if tail != nil {
					args[8], args[9] = tail.Key, tail.ID
					query += ` UNION ALL SELECT * FROM (SELECT ` + versionList.cols + ` FROM object_versions
						WHERE bucket = ?1 AND key = ?9 AND seq < ` + markerSeq + ` ORDER BY seq DESC LIMIT ?8)`
				}
				query += `) ORDER BY ` + versionList.order + ` LIMIT ?8`
			}
			return scanVersions(ctx, tx, bucket, query, args)
		})
		return err
	})
	if err != nil {
		return store.ListVersionsResult{}, fmt.Errorf("list versions in %s: %w", bucket, err)
	}
	return res, nil
}

// scanVersions runs a version listing query of versionList's cols and
// reads its rows.
func scanVersions(ctx context.Context, q querier, bucket, query string, args []any) ([]store.ObjectInfo, error) {
	return queryRows(ctx, q, query, args, objectRow(bucket, true))
}
