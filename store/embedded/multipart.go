package embedded

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// ListMultipartUploads implements store.ObjectStore. Uploads are ordered by
// key, then initiation time (then id); uploads and common prefixes count
// together towards MaxUploads.
func (e *Engine) ListMultipartUploads(ctx context.Context, bucket string, p store.ListUploadsParams) (store.ListUploadsResult, error) {
	var res store.ListUploadsResult
	err := e.withRead(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		var err error
		res, err = protocol.ListUploads(p, func(c *protocol.ListCursor, tail *protocol.UploadMarker, limit int) ([]store.Upload, error) {
			cond, args := where(c, "key")
			if tail != nil {
				cond = `((` + cond + `) OR (key = ? AND (initiated, upload_id) >
					((SELECT initiated FROM uploads WHERE upload_id = ?), ?)))`
				args = append(args, tail.Key, tail.UploadID, tail.UploadID)
			}
			return scanUploads(ctx, tx, bucket, `SELECT upload_id, key, meta, checksum_alg, checksum_type, initiated FROM uploads
				WHERE bucket = ? AND `+cond+` ORDER BY key, initiated, upload_id LIMIT ?`,
				append(append([]any{bucket}, args...), limit))
		})
		return err
	})
	if err != nil {
		return store.ListUploadsResult{}, fmt.Errorf("list uploads in %s: %w", bucket, err)
	}
	return res, nil
}

// scanUploads runs an upload listing query and reads its rows.
func scanUploads(ctx context.Context, q querier, bucket, query string, args []any) ([]store.Upload, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var out []store.Upload
	for rows.Next() {
		u := store.Upload{Bucket: bucket}
		var meta string
		var initiated int64
		if err := rows.Scan(&u.UploadID, &u.Key, &meta, &u.ChecksumAlgorithm, &u.ChecksumType, &initiated); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		u.Initiated = fromMicros(initiated)
		if u.Meta, err = parseMeta(meta); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
