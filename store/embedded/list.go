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
	err := e.withRead(ctx, func(tx txQuerier) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		var err error
		res, err = protocol.ListObjects(p, func(c *protocol.ListCursor, limit int) ([]store.ObjectInfo, error) {
			cond, args := where(c, "key")
			args = append([]any{bucket}, args...)
			query := `SELECT ` + objectList.cols + ` FROM objects WHERE bucket = ? AND ` + cond + ` ORDER BY key LIMIT ?`
			args = append(args, limit)
			if c.DelimNext != "" {
				query, args = skipScan(c, bucket, objectList, nil, limit)
			}
			// The limit is an argument: one statement text, prepared once.
			return scanObjects(ctx, tx, bucket, query, args)
		})
		return err
	})
	if err != nil {
		return store.ListResult{}, fmt.Errorf("list %s: %w", bucket, err)
	}
	return res, nil
}

// fetchUploads reads the uploads of bucket for protocol.ListUploads.
func fetchUploads(ctx context.Context, q querier, bucket string) protocol.FetchUploads {
	return func(c *protocol.ListCursor, tail *protocol.Marker, limit int) ([]store.Upload, error) {
		if c.DelimNext != "" {
			query, args := skipScan(c, bucket, uploadList, tail, limit)
			return scanUploads(ctx, q, bucket, query, args)
		}
		cond, args := where(c, "key")
		if tail != nil {
			cond = `((` + cond + `) OR (key = ? AND (initiated, upload_id) >
				((SELECT initiated FROM uploads WHERE upload_id = ?), ?)))`
			args = append(args, tail.Key, tail.ID, tail.ID)
		}
		return scanUploads(ctx, q, bucket, `SELECT `+uploadList.cols+` FROM uploads
			WHERE bucket = ? AND `+cond+` ORDER BY `+uploadList.order+` LIMIT ?`,
			append(append([]any{bucket}, args...), limit))
	}
}

// listTable is what skipScan needs to know of what it lists: objects,
// uploads or versions, whose rows are ordered by key (then initiation and
// id, or newest first).
type listTable struct {
	// tables hold the rows: each is searched by its own index on (bucket,
	// key). (Not one view of their union: SQLite reads a union whole to
	// search it by a bound of the outer row, or to join it.)
	tables []string
	cols   string // the columns a listing returns, key first
	hit    string // the same columns for a hit row: the key hit, the rest fillers
	order  string // the rows' order, by position in cols
	// tail selects cols of the rows after a marker (?9 key, ?10 id), which
	// sort before the cursor's range; "" where there are none.
	tail string
}

var (
	// Of meta only the storage class: listings show it.
	objectList = listTable{tables: []string{"objects"}, cols: `key, size, etag, last_modified, checksum, coalesce(json_extract(meta, '$.sc'), '')`,
		hit: `hit, 0, '', 0, NULL, ''`, order: "1"}
	uploadList = listTable{tables: []string{"uploads"}, cols: `key, initiated, upload_id, meta, checksum_alg, checksum_type`,
		hit: `hit, 0, '', '', '', ''`, order: "1, 2, 3",
		tail: `SELECT key, initiated, upload_id, meta, checksum_alg, checksum_type FROM uploads
			WHERE bucket = ?1 AND key = ?9 AND (initiated, upload_id) > ((SELECT initiated FROM uploads WHERE upload_id = ?10), ?10)`}
)

// skipScan is a delimiter listing of t as one statement that skips each
// common prefix with one index seek (a loose index scan). It splits the
// cursor's range into gaps: a gap runs from its lower bound to its first row
// under a common prefix (its hit, looked for among at most limit rows), and
// the next gap starts at that prefix's successor (see protocol.ListCursor),
// so the rows inside a prefix past its first are never read. The rows are
// each gap's rows before its hit, the hit's key alone (a common prefix shows
// nothing else), the last gap's rows up to the limit, and first the rows
// following tail if it is not nil (uploads and versions). It returns the
// statement and all its arguments.
func skipScan(c *protocol.ListCursor, bucket string, t listTable, tail *protocol.Marker, limit int) (string, []any) {
	// A gap's rows are key >= lo AND key IS NOT skip: one lower bound for
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
	if !c.Range.Bounded {
		args[3] = nil // keeps the numbering: ?4 is unused
	}
	args = append(args, limit)
	head := ""
	if tail != nil {
		head = t.tail + " UNION ALL "
		args = append(args, tail.Key, tail.ID)
	}
	// each joins part of every table with sep.
	each := func(sep string, part func(table string) string) string {
		parts := make([]string, len(t.tables))
		for i, table := range t.tables {
			parts[i] = part(table)
		}
		return strings.Join(parts, sep)
	}
	// hit is a gap's first key under a common prefix: the subquery yields
	// its keys in index order (of several tables, merged: each arm of an
	// ordered compound reads its index in order), and the first that rolls
	// up ends the search.
	hit := func(lo, skip string) string {
		return `(SELECT key FROM (` + each(" UNION ALL ", func(table string) string {
			return `SELECT key FROM ` + table + ` WHERE bucket = ?1 AND key >= ` + lo + ` AND key IS NOT ` + skip + ` AND key < {to}`
		}) + ` ORDER BY key LIMIT ?8) WHERE instr(substr(key, ?5 + 1), ?6) > 0 LIMIT 1)`
	}
	next := `substr(g.hit, 1, ?5 + instr(substr(g.hit, ?5 + 1), ?6) - 1) || ?7`
	// filled is the page's rows before a gap: every earlier gap's rows and
	// hit. The walk stops after the gap that fills the page, so a page of
	// many gaps reads a few pages of rows (it went on to the limit's
	// number of gaps, each read up to the limit: a page squared).
	query := `WITH RECURSIVE gaps(n, lo, skip, hit, filled) AS (
		SELECT 1, ?2, ?3, ` + hit("?2", "?3") + `, 0
		UNION ALL
		SELECT g.n + 1, ` + next + `, NULL, ` + hit(next, "NULL") + `,
			g.filled + 1 + ` + each(" + ", func(table string) string {
		return `(SELECT count(*) FROM ` + table + ` WHERE bucket = ?1 AND key >= g.lo AND key IS NOT g.skip AND key < g.hit)`
	}) + `
		FROM gaps g WHERE g.hit IS NOT NULL AND g.n < ?8 AND g.filled < ?8
	)
	SELECT * FROM (` + head + each(" UNION ALL ", func(table string) string {
		return `SELECT ` + t.cols + ` FROM gaps g CROSS JOIN ` + table + ` o
			WHERE o.bucket = ?1 AND o.key >= g.lo AND o.key IS NOT g.skip AND o.key < g.hit`
	}) + `
		UNION ALL
		SELECT ` + t.hit + ` FROM gaps WHERE hit IS NOT NULL
		UNION ALL
		` + each(" UNION ALL ", func(table string) string {
		return `SELECT * FROM (SELECT ` + t.cols + ` FROM ` + table + ` WHERE bucket = ?1 AND key >= (SELECT lo FROM gaps WHERE hit IS NULL)
			AND key IS NOT (SELECT skip FROM gaps WHERE hit IS NULL) AND key < {to} ORDER BY ` + t.order + ` LIMIT ?8)`
	}) + `
	) ORDER BY ` + t.order + ` LIMIT ?8`
	return strings.ReplaceAll(query, "{to}", to), args
}

// scanObjects runs a listing query of objectList's cols and reads its rows.
func scanObjects(ctx context.Context, q querier, bucket, query string, args []any) ([]store.ObjectInfo, error) {
	return queryRows(ctx, q, query, args, objectRow(bucket, false))
}

// objectRow reads a row of an object or version listing of bucket:
// objectList's cols, or versionList's if versions (the same with seq,
// version id and delete marker after the key).
func objectRow(bucket string, versions bool) func(*sql.Rows) (store.ObjectInfo, error) {
	return func(rows *sql.Rows) (store.ObjectInfo, error) {
		o := store.ObjectInfo{Bucket: bucket}
		var seq, lm int64
		var ck sql.NullString
		dest := []any{&o.Key}
		if versions {
			dest = append(dest, &seq, &o.VersionID, &o.DeleteMarker)
		}
		if err := rows.Scan(append(dest, &o.Size, &o.ETag, &lm, &ck, &o.Meta.StorageClass)...); err != nil {
			return o, fmt.Errorf("scan: %w", err)
		}
		o.LastModified = fromMicros(lm)
		var err error
		o.Checksum, err = parseChecksum(ck)
		return o, err
	}
}

// scanUploads runs an upload listing query and reads its rows.
func scanUploads(ctx context.Context, q querier, bucket, query string, args []any) ([]store.Upload, error) {
	return queryRows(ctx, q, query, args, func(rows *sql.Rows) (store.Upload, error) {
		u := store.Upload{Bucket: bucket}
		var meta string
		var initiated int64
		if err := rows.Scan(&u.Key, &initiated, &u.UploadID, &meta, &u.ChecksumAlgorithm, &u.ChecksumType); err != nil {
			return u, fmt.Errorf("scan: %w", err)
		}
		u.Initiated = fromMicros(initiated)
		var err error
		u.Meta, err = parseMeta(meta)
		return u, err
	})
}

// queryRows runs a listing query and reads each of its rows with row.
func queryRows[T any](ctx context.Context, q querier, query string, args []any, row func(*sql.Rows) (T, error)) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var out []T
	for rows.Next() {
		v, err := row(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
