package embedded

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// where returns the SQL condition of the cursor's range on col and its
// arguments.
func where(c *protocol.ListCursor, col string) (string, []any) {
	op := ">"
	if c.Range.Inclusive {
		op = ">="
	}
	cond := fmt.Sprintf("%s %s ?", col, op)
	args := []any{c.Range.From}
	if c.Range.Bounded {
		cond += fmt.Sprintf(" AND %s < ?", col)
		args = append(args, c.Range.To)
	}
	return cond, args
}

// ListObjects implements store.ObjectStore. Objects and common prefixes count
// together towards MaxKeys, as in S3. The page is read from one snapshot.
func (e *Engine) ListObjects(ctx context.Context, bucket string, p store.ListParams) (store.ListResult, error) {
	var res store.ListResult
	err := e.withRead(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		var err error
		res, err = protocol.ListObjects(p, func(c *protocol.ListCursor, limit int) ([]store.ObjectInfo, error) {
			cond, args := where(c, "key")
			// Of meta only the storage class: listings show it.
			return scanObjects(ctx, tx, bucket, `SELECT key, size, etag, last_modified, checksum, coalesce(json_extract(meta, '$.sc'), '') FROM objects
				WHERE bucket = ? AND `+cond+` ORDER BY key LIMIT `+fmt.Sprint(limit), append([]any{bucket}, args...))
		})
		return err
	})
	if err != nil {
		return store.ListResult{}, fmt.Errorf("list %s: %w", bucket, err)
	}
	return res, nil
}

// scanObjects runs a listing query and reads its rows.
func scanObjects(ctx context.Context, q querier, bucket, query string, args []any) ([]store.ObjectInfo, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var out []store.ObjectInfo
	for rows.Next() {
		o := store.ObjectInfo{Bucket: bucket}
		var ck sql.NullString
		var lm int64
		if err := rows.Scan(&o.Key, &o.Size, &o.ETag, &lm, &ck, &o.Meta.StorageClass); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		o.LastModified = fromMicros(lm)
		if o.Checksum, err = parseChecksum(ck); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
