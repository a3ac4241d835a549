package embedded

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
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
				query, args = skipScan(c, bucket, cols)
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

// skipScan is a delimiter listing as one statement that skips each common
// prefix with one index seek (a loose index scan). It splits the cursor's
// range into gaps: a gap runs from its lower bound to its first key under a
// common prefix (its hit, looked for among at most limit keys), and the next
// gap starts at that prefix's successor (see protocol.ListCursor), so the
// keys inside a prefix past its first are never read. The rows are each
// gap's keys up to its hit and the last gap's keys up to the limit. cols are
// the columns to return; the limit is the argument after the ones returned.
func skipScan(c *protocol.ListCursor, bucket, cols string) (string, []any) {
	// A gap's keys are key >= lo AND key IS NOT skip: one lower bound for
	// the index search.
	var skip any
	if !c.Range.Inclusive {
		skip = c.Range.From
	}
	// Every text sorts before every blob: X'' bounds nothing.
	to := "X''"
	if c.Range.Bounded {
		to = "?4"
	}
	args := []any{bucket, c.Range.From, skip, c.Range.To, utf8.RuneCountInString(c.Prefix), c.Delim, c.DelimNext}
	// hit is a gap's first key under a common prefix: the subquery yields
	// its keys in index order, and the first that rolls up ends the search.
	hit := func(lo, skip string) string {
		return `(SELECT key FROM (SELECT key FROM objects WHERE bucket = ?1 AND key >= ` + lo + ` AND key IS NOT ` + skip + ` AND key < {to}
			ORDER BY key LIMIT ?8) WHERE instr(substr(key, ?5 + 1), ?6) > 0 LIMIT 1)`
	}
	next := `substr(hit, 1, ?5 + instr(substr(hit, ?5 + 1), ?6) - 1) || ?7`
	query := `WITH RECURSIVE gaps(n, lo, skip, hit) AS (
		SELECT 1, ?2, ?3, ` + hit("?2", "?3") + `
		UNION ALL
		SELECT n + 1, ` + next + `, NULL, ` + hit(next, "NULL") + ` FROM gaps WHERE hit IS NOT NULL AND n < ?8
	)
	SELECT * FROM (
		SELECT ` + cols + ` FROM gaps g CROSS JOIN objects o
			WHERE o.bucket = ?1 AND o.key >= g.lo AND o.key IS NOT g.skip AND o.key <= g.hit
		UNION ALL
		SELECT * FROM (SELECT ` + cols + ` FROM objects WHERE bucket = ?1 AND key >= (SELECT lo FROM gaps WHERE hit IS NULL)
			AND key IS NOT (SELECT skip FROM gaps WHERE hit IS NULL) AND key < {to} ORDER BY key LIMIT ?8)
	) ORDER BY 1 LIMIT ?8`
	if !c.Range.Bounded {
		args[3] = nil // keeps the numbering: ?4 is unused
	}
	return strings.ReplaceAll(query, "{to}", to), args
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
