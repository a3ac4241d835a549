package embedded

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/s3gate/s3gate/store"
)

// listBatch is how many rows one listing statement fetches at most.
const listBatch = 1000

// successor returns the smallest string greater than every string that starts
// with p, in byte order (which for valid UTF-8 is code point order), and false
// if there is none. It increments the last code point (skipping surrogates),
// carrying past U+10FFFF, so the result stays valid UTF-8, as in store/pg.
func successor(p string) (string, bool) {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.MaxRune || r == utf8.RuneError && size == 1:
			continue // carry into the previous code point
		case r == 0xD7FF:
			return p + string(rune(0xE000)), true
		default:
			return p + string(r+1), true
		}
	}
	return "", false
}

// rollup returns the common prefix that key rolls up into, or "" if none.
func rollup(key, prefix, delim string) string {
	if delim == "" || !strings.HasPrefix(key, prefix) {
		return ""
	}
	if i := strings.Index(key[len(prefix):], delim); i >= 0 {
		return key[:len(prefix)+i+len(delim)]
	}
	return ""
}

// keyRange is the key interval that a prefix and a lower bound select.
type keyRange struct {
	from      string
	inclusive bool // from itself is included
	to        string
	bounded   bool // to is an exclusive upper bound
}

// listCursor walks keys under a prefix in order, skipping the rest of a common
// prefix with one index seek to its successor instead of scanning its keys.
type listCursor struct {
	prefix, delim string
	kr            keyRange
	done          bool
}

func newListCursor(prefix, delim, after string) *listCursor {
	c := &listCursor{prefix: prefix, delim: delim}
	c.kr.from, c.kr.inclusive = prefix, true
	if to, ok := successor(prefix); ok && prefix != "" {
		c.kr.to, c.kr.bounded = to, true
	}
	if after >= c.kr.from {
		c.kr.from, c.kr.inclusive = after, false
		// A marker that is (or lies inside) a common prefix resumes after all
		// of that prefix: the prefix was already returned.
		if cp := rollup(after, prefix, delim); cp != "" {
			c.skipPast(cp)
		}
	}
	if c.kr.bounded && c.kr.from >= c.kr.to {
		c.done = true
	}
	return c
}

// skipPast moves the cursor beyond every key starting with cp.
func (c *listCursor) skipPast(cp string) {
	next, ok := successor(cp)
	if !ok || (c.kr.bounded && next >= c.kr.to) {
		c.done = true
		return
	}
	c.kr.from, c.kr.inclusive = next, true
}

// advance moves the cursor past key.
func (c *listCursor) advance(key string) { c.kr.from, c.kr.inclusive = key, false }

// where returns the SQL condition on col and its arguments.
func (c *listCursor) where(col string) (string, []any) {
	op := ">"
	if c.kr.inclusive {
		op = ">="
	}
	cond := fmt.Sprintf("%s %s ?", col, op)
	args := []any{c.kr.from}
	if c.kr.bounded {
		cond += fmt.Sprintf(" AND %s < ?", col)
		args = append(args, c.kr.to)
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
		maxKeys := p.MaxKeys
		if maxKeys <= 0 || maxKeys > store.MaxListKeys {
			maxKeys = store.MaxListKeys
		}
		c := newListCursor(p.Prefix, p.Delimiter, p.After)
		count, last := 0, ""
		for !c.done && !res.Truncated {
			cond, args := c.where("key")
			limit := min(maxKeys-count+1, listBatch)
			batch, err := scanObjects(ctx, tx, bucket, `SELECT key, size, etag, last_modified, checksum FROM objects
				WHERE bucket = ? AND `+cond+` ORDER BY key LIMIT `+fmt.Sprint(limit), append([]any{bucket}, args...))
			if err != nil {
				return err
			}
			if len(batch) < limit {
				c.done = true // the interval holds nothing beyond this batch
			}
			for _, o := range batch {
				if count == maxKeys {
					res.Truncated = true
					break
				}
				count++
				if cp := rollup(o.Key, p.Prefix, p.Delimiter); cp != "" {
					res.CommonPrefixes = append(res.CommonPrefixes, cp)
					last = cp
					c.done = false
					c.skipPast(cp) // the rest of the batch may lie under cp: fetch anew
					break
				}
				res.Objects = append(res.Objects, o)
				last = o.Key
				c.advance(o.Key)
			}
		}
		if res.Truncated {
			res.NextAfter = last
		}
		return nil
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
		if err := rows.Scan(&o.Key, &o.Size, &o.ETag, &lm, &ck); err != nil {
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
