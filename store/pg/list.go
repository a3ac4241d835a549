package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// where returns the SQL condition of the cursor's range on col and its
// arguments, numbered from n.
func where(c *protocol.ListCursor, col string, n int) (string, []any) {
	op := ">"
	if c.Range.Inclusive {
		op = ">="
	}
	cond := fmt.Sprintf("%s %s $%d", col, op, n)
	args := []any{c.Range.From}
	if c.Range.Bounded {
		cond += fmt.Sprintf(" AND %s < $%d", col, n+1)
		args = append(args, c.Range.To)
	}
	return cond, args
}

// ListObjects implements store.ObjectStore. Objects and common prefixes count
// together towards MaxKeys, as in S3.
func (e *Engine) ListObjects(ctx context.Context, bucket string, p store.ListParams) (store.ListResult, error) {
	if err := e.bucketExists(ctx, e.pool, bucket); err != nil {
		return store.ListResult{}, fmt.Errorf("list %s: %w", bucket, err)
	}
	res, err := protocol.ListObjects(p, func(c *protocol.ListCursor, limit int) ([]store.ObjectInfo, error) {
		cond, args := where(c, "key", 2)
		// Of meta only the storage class: listings show it.
		rows, err := e.pool.Query(ctx, `SELECT key, size, etag, last_modified, checksum, coalesce(meta->>'sc', '') FROM objects
			WHERE bucket = $1 AND `+cond+` ORDER BY key LIMIT `+fmt.Sprint(limit), append([]any{bucket}, args...)...)
		if err != nil {
			return nil, mapErr(err)
		}
		return scanObjects(rows, bucket)
	})
	if err != nil {
		return res, fmt.Errorf("list %s: %w", bucket, err)
	}
	return res, nil
}

// scanObjects reads list rows.
func scanObjects(rows pgx.Rows, bucket string) ([]store.ObjectInfo, error) {
	var out []store.ObjectInfo
	defer rows.Close()
	for rows.Next() {
		o := store.ObjectInfo{Bucket: bucket}
		var ck *store.Checksum
		var lm time.Time
		if err := rows.Scan(&o.Key, &o.Size, &o.ETag, &lm, &ck, &o.Meta.StorageClass); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		o.LastModified = lm
		if ck != nil {
			o.Checksum = *ck
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
