package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// resolveObject reads the object and its blob or manifest through q: the
// current object when versionID is nil, else that version, current or not;
// the inline content of a single-blob object when withInline. The caller
// gives q one snapshot (a transaction) when it runs more than one statement.
func resolveObject(ctx context.Context, q querier, bucket, key string, versionID *string, withInline bool) (*protocol.Resolved, error) {
	var (
		r        protocol.Resolved
		meta     string
		checksum sql.NullString
		partCnt  int
		lm       int64
		blobID   sql.NullInt64
		tier     sql.NullString
		inline   []byte
	)
	from := `(SELECT bucket, key, blob_id, size, etag, meta, checksum, part_count, last_modified, version_id,
			0 AS delete_marker, 0 AS seq FROM objects WHERE bucket = ?2 AND key = ?3) o`
	args := []any{withInline, bucket, key}
	if versionID != nil {
		// A version is the current row when its id matches, else a
		// noncurrent row (seq > 0) with the manifest in version_parts.
		from = `(SELECT bucket, key, blob_id, size, etag, meta, checksum, part_count, last_modified, version_id,
				0 AS delete_marker, 0 AS seq FROM objects WHERE bucket = ?2 AND key = ?3 AND version_id = ?4
			UNION ALL SELECT bucket, key, blob_id, size, etag, meta, checksum, part_count, last_modified, version_id,
				delete_marker, seq FROM object_versions WHERE bucket = ?2 AND key = ?3 AND version_id = ?4) o`
		args = append(args, *versionID)
	}
	err := q.QueryRowContext(ctx, `SELECT o.size, o.etag, o.meta, o.checksum, o.part_count, o.last_modified, o.blob_id, b.tier,
			CASE WHEN ?1 AND b.tier = 'inline' THEN coalesce(b.inline_data, X'') END, o.version_id, o.delete_marker, o.seq
		FROM `+from+` LEFT JOIN blobs b ON b.id = o.blob_id`, args...).Scan(
		&r.Info.Size, &r.Info.ETag, &meta, &checksum, &partCnt, &lm, &blobID, &tier, &inline,
		&r.Info.VersionID, &r.Info.DeleteMarker, &r.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		if versionID != nil {
			return nil, store.ErrNoSuchVersion
		}
		return nil, store.ErrNoSuchKey
	}
	if err != nil {
		return nil, fmt.Errorf("resolve object: %w", mapErr(err))
	}
	r.Info.Bucket, r.Info.Key, r.Info.LastModified = bucket, key, fromMicros(lm)
	if r.Info.DeleteMarker {
		return &r, nil
	}
	if r.Info.Meta, err = parseMeta(meta); err != nil {
		return nil, fmt.Errorf("resolve object: %w", err)
	}
	if r.Info.Checksum, err = parseChecksum(checksum); err != nil {
		return nil, fmt.Errorf("resolve object: %w", err)
	}
	if partCnt == 0 {
		if !blobID.Valid || !tier.Valid {
			return nil, errors.New("resolve object: object row without blob")
		}
		r.Blob = &protocol.BlobLoc{ID: blobID.Int64, Tier: tier.String, Size: r.Info.Size, Inline: inline}
		return &r, nil
	}
	manifest, margs := `SELECT p.part_number, p.size, p.start_offset, p.etag, p.checksum, p.blob_id, b.tier
		FROM object_parts p JOIN blobs b ON b.id = p.blob_id
		WHERE p.bucket = ? AND p.key = ? ORDER BY p.part_number`, []any{bucket, key}
	if r.Seq != 0 {
		manifest, margs = `SELECT p.part_number, p.size, p.start_offset, p.etag, p.checksum, p.blob_id, b.tier
		FROM version_parts p JOIN blobs b ON b.id = p.blob_id WHERE p.seq = ? ORDER BY p.part_number`, []any{r.Seq}
	}
	rows, err := q.QueryContext(ctx, manifest, margs...)
	if err != nil {
		return nil, fmt.Errorf("resolve manifest: %w", mapErr(err))
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	for rows.Next() {
		var p protocol.PartLoc
		var pi store.PartInfo
		var ck sql.NullString
		if err := rows.Scan(&p.Number, &p.Size, &p.Start, &pi.ETag, &ck, &p.Blob.ID, &p.Blob.Tier); err != nil {
			return nil, fmt.Errorf("resolve manifest: %w", err)
		}
		if pi.Checksum, err = parseChecksum(ck); err != nil {
			return nil, fmt.Errorf("resolve manifest: %w", err)
		}
		p.Blob.Size = p.Size
		pi.Number, pi.Size, pi.LastModified = p.Number, p.Size, r.Info.LastModified
		r.Parts = append(r.Parts, p)
		r.Info.Parts = append(r.Info.Parts, pi)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("resolve manifest: %w", mapErr(err))
	}
	if len(r.Parts) != partCnt {
		return nil, fmt.Errorf("resolve object: manifest has %d parts, object says %d", len(r.Parts), partCnt)
	}
	return &r, nil
}

// openContent opens n bytes at off of a blob's file.
func (e *Engine) openContent(ctx context.Context, b protocol.BlobLoc, off, n int64) (io.ReadCloser, error) {
	if b.Tier != store.TierLocal {
		return nil, fmt.Errorf("blob %d: unknown tier %q", b.ID, b.Tier)
	}
	rc, err := e.media.Open(ctx, b.ID, off, n)
	if err != nil {
		return nil, fmt.Errorf("open blob %d: %w", b.ID, err)
	}
	return rc, nil
}
