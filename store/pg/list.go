package pg

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

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
		var query string
		var args []any
		size := 0 // a delimiter page: often a few rows
		if c.DelimNext != "" {
			query, args = skipScan(c, bucket, objectList, nil, limit)
		} else {
			size = limit
			cond, a := where(c, "o.key", 2)
			args = append([]any{bucket}, a...)
			query = `SELECT ` + objectList.cols + ` FROM objects o
				WHERE o.bucket = $1 AND ` + cond + fmt.Sprintf(` ORDER BY o.key LIMIT $%d`, len(args)+1)
			args = append(args, limit)
		}
		// The limit is an argument: one statement text, prepared once.
		rows, err := e.pool.Query(ctx, query, args...)
		if err != nil {
			return nil, mapErr(err)
		}
		return scanObjects(rows, bucket, size)
	})
	if err != nil {
		return res, fmt.Errorf("list %s: %w", bucket, err)
	}
	return res, nil
}

// fetchUploads reads the uploads of bucket for protocol.ListUploads.
func (e *Engine) fetchUploads(ctx context.Context, bucket string) protocol.FetchUploads {
	return func(c *protocol.ListCursor, tail *protocol.Marker, limit int) ([]store.Upload, error) {
		var query string
		var args []any
		if c.DelimNext != "" {
			query, args = skipScan(c, bucket, uploadList, tail, limit)
		} else {
			cond, a := where(c, "o.key", 2)
			args = append([]any{bucket}, a...)
			if tail != nil {
				cond = fmt.Sprintf(`((%s) OR (o.key = $%d AND (o.initiated, o.upload_id) >
					((SELECT initiated FROM uploads WHERE upload_id = $%d), $%d)))`, cond, len(args)+1, len(args)+2, len(args)+2)
				args = append(args, tail.Key, tail.ID)
			}
			query = `SELECT ` + uploadList.cols + ` FROM uploads o WHERE o.bucket = $1 AND ` + cond +
				fmt.Sprintf(` ORDER BY %s LIMIT $%d`, uploadList.order, len(args)+1)
			args = append(args, limit)
		}
		rows, err := e.pool.Query(ctx, query, args...)
		if err != nil {
			return nil, mapErr(err)
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Upload, error) {
			u := store.Upload{Bucket: bucket}
			err := r.Scan(&u.Key, &u.Initiated, &u.UploadID, &u.Meta, &u.ChecksumAlgorithm, &u.ChecksumType)
			return u, err
		})
		if err != nil {
			return nil, mapErr(err)
		}
		return batch, nil
	}
}

// listTable is what skipScan needs to know of a table it lists: objects or
// uploads, whose rows are ordered by key (then initiation and id).
type listTable struct {
	table string // the table, aliased o
	cols  string // its columns a listing returns, key first
	hit   string // the same columns for a hit row: the key hit, the rest fillers
	order string // the rows' order, by position in cols
	// tail selects cols of the uploads after an upload marker ($T key, $U
	// id), which sort before the cursor's range; "" where there are none.
	tail string
}

var (
	// Of meta only the storage class: listings show it. The checksum's
	// fields are read as text, not its JSON decoded per row (a third of
	// the store's CPU in a 1,000-key page).
	objectList = listTable{table: "objects", cols: `o.key, o.size, o.etag, o.last_modified,
		coalesce(o.checksum->>'alg', ''), coalesce(o.checksum->>'val', ''), coalesce(o.checksum->>'type', ''), coalesce(o.meta->>'sc', '')`,
		hit: `hit, 0, '', 'epoch', '', '', '', ''`, order: "1"}
	uploadList = listTable{table: "uploads", cols: `o.key, o.initiated, o.upload_id, o.meta, o.checksum_alg, o.checksum_type`,
		hit: `hit, 'epoch', '', '{}', '', ''`, order: "1, 2, 3",
		tail: `SELECT o.key, o.initiated, o.upload_id, o.meta, o.checksum_alg, o.checksum_type FROM uploads o
			WHERE o.bucket = $1 AND o.key = $T AND (o.initiated, o.upload_id) > ((SELECT initiated FROM uploads WHERE upload_id = $U), $U)`}
)

// skipScan is a delimiter listing of t as one statement that skips each
// common prefix with one index seek (a loose index scan). It splits the
// cursor's range into gaps: a gap runs from its lower bound to its first row
// under a common prefix (its hit), and the next gap starts at that prefix's
// successor (see protocol.ListCursor), so the rows inside a prefix past its
// first are never read. The rows are each gap's rows and its hit's key alone
// (a common prefix shows nothing else), after the rows following tail if it
// is not nil (uploads only). It returns the statement and all its arguments.
func skipScan(c *protocol.ListCursor, bucket string, t listTable, tail *protocol.Marker, limit int) (string, []any) {
	// A gap's lower bound is key > lo_x AND key >= lo_i: no key is empty.
	loX, loI := c.Range.From, ""
	if c.Range.Inclusive {
		loX, loI = "", c.Range.From
	}
	args := []any{bucket, loX, loI}
	bound := ""
	if c.Range.Bounded {
		args = append(args, c.Range.To)
		bound = " AND o.key < $4"
	}
	n := len(args)
	args = append(args, utf8.RuneCountInString(c.Prefix), c.Delim, c.DelimNext, limit)
	head := ""
	if tail != nil {
		args = append(args, tail.Key, tail.ID)
		head = t.tail + " UNION ALL "
	}
	r := strings.NewReplacer("BOUND", bound, "$P", fmt.Sprintf("$%d::int", n+1), "$D", fmt.Sprintf("$%d::text", n+2),
		"$N", fmt.Sprintf("$%d::text", n+3), "$L", fmt.Sprintf("$%d::int", n+4),
		"$T", fmt.Sprintf("$%d::text", n+5), "$U", fmt.Sprintf("$%d::text", n+6))
	// hit finds a gap's first row under a common prefix and its position,
	// reading at most the rows the page has room for (the limit less the
	// total before the gap); the rows before it have smaller keys (the
	// rank: the uploads or versions of one key share it). It is ordered by
	// key, which the planner sees the window's rows follow, so the step
	// stops at its hit; ordered by rn, it sorted every row up to the limit.
	// The room is a column of the outer row, not a constant: the planner
	// then takes the LIMIT to cut the scan short and seeks the index in
	// key order even where its statistics are stale or missing (a bucket
	// filled since the last ANALYZE); with the constant limit it read and
	// sorted every row of the bucket after the gap's bound, at each step.
	// (OFFSET 0 keeps the first gap's zero a column: the planner folds a
	// one-row VALUES into a constant.)
	hit := func(loX, loI, total string) string {
		return `SELECT t.key, t.rn FROM (SELECT k.key, rank() OVER (ORDER BY k.key) AS rn FROM (
			SELECT o.key FROM ` + t.table + ` o WHERE o.bucket = $1 AND o.key > ` + loX + ` AND o.key >= ` + loI + `BOUND
			ORDER BY o.key LIMIT $L - ` + total + `) k) t
			WHERE strpos(substr(t.key, $P + 1), $D) > 0 ORDER BY t.key LIMIT 1`
	}
	query := `WITH RECURSIVE gaps(lo_x, lo_i, take, hit, total) AS (
		SELECT $2::text COLLATE "C", $3::text COLLATE "C", h.rn, h.key, coalesce(h.rn, $L)
		FROM (SELECT 0 AS total OFFSET 0) one LEFT JOIN LATERAL (` + hit("$2::text", "$3::text", "one.total") + `) h ON true
		UNION ALL
		SELECT '', s.nx, h.rn, h.key, g.total + coalesce(h.rn, $L)
		FROM gaps g CROSS JOIN LATERAL (SELECT left(g.hit, $P + strpos(substr(g.hit, $P + 1), $D) - 1) || $N AS nx) s
		LEFT JOIN LATERAL (` + hit("''", "s.nx", "g.total") + `) h ON true
		WHERE g.hit IS NOT NULL AND g.total < $L
	)
	` + head + `SELECT o.* FROM gaps g CROSS JOIN LATERAL (
		SELECT ` + t.cols + ` FROM ` + t.table + ` o
		WHERE o.bucket = $1 AND o.key > g.lo_x AND o.key >= g.lo_i BOUND ORDER BY ` + t.order + ` LIMIT coalesce(g.take - 1, $L)) o
	UNION ALL
	SELECT ` + t.hit + ` FROM gaps WHERE hit IS NOT NULL
	ORDER BY ` + t.order + ` LIMIT $L`
	return r.Replace(query), args
}

// scanObjects reads list rows into a slice of capacity size (the rows
// expected: one allocation for a plain page, not a growing copy).
func scanObjects(rows pgx.Rows, bucket string, size int) ([]store.ObjectInfo, error) {
	out := make([]store.ObjectInfo, 0, size)
	defer rows.Close()
	for rows.Next() {
		o := store.ObjectInfo{Bucket: bucket}
		ck := &o.Checksum
		if err := rows.Scan(&o.Key, &o.Size, &o.ETag, &o.LastModified, &ck.Algorithm, &ck.Value, &ck.Type, &o.Meta.StorageClass); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
