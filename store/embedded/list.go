package embedded

import (
	"context"
	"database/sql"
	"fmt"
	"unicode/utf8"

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
			args = append([]any{bucket}, args...)
			// Of meta only the storage class: listings show it.
			cols := `key, size, etag, last_modified, checksum, coalesce(json_extract(meta, '$.sc'), '')`
			query := `SELECT ` + cols + ` FROM objects WHERE bucket = ? AND ` + cond + ` ORDER BY key LIMIT ?`
			if c.DelimNext != "" {
				query, args = skipScan(c, cols, cond, args)
			}
			// The limit is an argument: one statement text, prepared once.
			return scanObjects(ctx, tx, bucket, query, append(args, limit))
		})
		return err
	})
	if err != nil {
		return store.ListResult{}, fmt.Errorf("list %s: %w", bucket, err)
	}
	return res, nil
}

// skipScan is the delimiter listing as one statement, a loose index scan:
// each step seeks one key, and after a key under a common prefix the next
// step seeks past the whole prefix (see protocol.ListCursor); the keys found
// are then joined to their rows. cond and args are the cursor's range on key
// and its arguments, the bucket first; the limit is the argument after the
// ones returned.
func skipScan(c *protocol.ListCursor, cols, cond string, args []any) (string, []any) {
	n := len(args)
	bound := ""
	if c.Range.Bounded {
		bound = " AND key < ?3"
	}
	// The seek after w.key: past it for an object, past its common prefix
	// (the prefix's successor) for a key that rolls up.
	next := fmt.Sprintf(`CASE WHEN instr(substr(w.key, ?%[1]d + 1), ?%[2]d) > 0
		THEN substr(w.key, 1, ?%[1]d + instr(substr(w.key, ?%[1]d + 1), ?%[2]d) - 1) || ?%[3]d
		ELSE w.key END`, n+1, n+2, n+3)
	query := fmt.Sprintf(`WITH RECURSIVE walk(n, key) AS (
		SELECT 1, (SELECT key FROM objects WHERE bucket = ? AND %[1]s ORDER BY key LIMIT 1)
		UNION ALL
		SELECT w.n + 1, (SELECT key FROM objects WHERE bucket = ?1 AND key > w.key AND key >= %[2]s%[3]s ORDER BY key LIMIT 1)
		FROM walk w WHERE w.key IS NOT NULL AND w.n < ?%[4]d
	)
	SELECT %[5]s FROM walk w JOIN objects USING (key) WHERE bucket = ?1 ORDER BY w.n`, cond, next, bound, n+4, cols)
	return query, append(args, utf8.RuneCountInString(c.Prefix), c.Delim, c.DelimNext)
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
