package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// ListMultipartUploads implements store.ObjectStore. Uploads are ordered by
// key, then initiation time (then id); uploads and common prefixes count
// together towards MaxUploads.
func (e *Engine) ListMultipartUploads(ctx context.Context, bucket string, p store.ListUploadsParams) (store.ListUploadsResult, error) {
	if err := e.bucketExists(ctx, e.pool, bucket); err != nil {
		return store.ListUploadsResult{}, fmt.Errorf("list uploads in %s: %w", bucket, err)
	}
	res, err := protocol.ListUploads(p, func(c *protocol.ListCursor, tail *protocol.UploadMarker, limit int) ([]store.Upload, error) {
		cond, args := where(c, "key", 2)
		if tail != nil {
			cond = fmt.Sprintf(`((%s) OR (key = $%d AND (initiated, upload_id) >
				((SELECT initiated FROM uploads WHERE upload_id = $%d), $%d)))`, cond, len(args)+2, len(args)+3, len(args)+3)
			args = append(args, tail.Key, tail.UploadID)
		}
		rows, err := e.pool.Query(ctx, `SELECT upload_id, key, meta, checksum_alg, checksum_type, initiated FROM uploads
			WHERE bucket = $1 AND `+cond+fmt.Sprintf(` ORDER BY key, initiated, upload_id LIMIT $%d`, len(args)+2),
			append(append([]any{bucket}, args...), limit)...)
		if err != nil {
			return nil, mapErr(err)
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Upload, error) {
			u := store.Upload{Bucket: bucket}
			err := r.Scan(&u.UploadID, &u.Key, &u.Meta, &u.ChecksumAlgorithm, &u.ChecksumType, &u.Initiated)
			return u, err
		})
		if err != nil {
			return nil, mapErr(err)
		}
		return batch, nil
	})
	if err != nil {
		return res, fmt.Errorf("list uploads in %s: %w", bucket, err)
	}
	return res, nil
}
