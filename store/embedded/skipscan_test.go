package embedded

import (
	"context"
	"database/sql/driver"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// rowsVisited counts the calls of the SQL function rows_visited(), which
// the views of countRows call once for each row of their table a statement
// visits (SQLite flattens the views, so the index search is unchanged).
var rowsVisited atomic.Int64

func init() {
	sqlite.MustRegisterScalarFunction("rows_visited", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		rowsVisited.Add(1)
		return int64(1), nil
	})
}

// seedBucket creates bucket holding the 1-byte object "seed", whose blob
// the fill statements' rows share.
func seedBucket(tb testing.TB, e *Engine, bucket string) context.Context {
	tb.Helper()
	ctx := context.Background()
	if err := e.CreateBucket(ctx, bucket, ""); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.PutObject(ctx, bucket, "seed", strings.NewReader("x"), store.PutOptions{Size: 1}); err != nil {
		tb.Fatal(err)
	}
	return ctx
}

// fillGaps creates bucket with groups runs of plain keys ("g0007-000123",
// plain of them) each followed by a key under a common prefix ("g0007/x"):
// a delimiter listing's worst case, a gap of nearly a page before every
// prefix. It writes the rows in one statement: the listing is measured.
func fillGaps(tb testing.TB, e *Engine, bucket string, groups, plain int) {
	tb.Helper()
	ctx := seedBucket(tb, e, bucket)
	if _, err := e.wdb.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?2 * (?3 + 1))
		INSERT INTO objects (bucket, key, blob_id, size, etag, last_modified)
		SELECT ?1, CASE WHEN n % (?3 + 1) = ?3 THEN printf('g%04d/x', n / (?3 + 1)) ELSE printf('g%04d-%06d', n / (?3 + 1), n % (?3 + 1)) END,
			(SELECT blob_id FROM objects WHERE bucket = ?1 AND key = 'seed'), 1, 'e', 0 FROM i`, bucket, groups, plain); err != nil {
		tb.Fatalf("fill %s: %v", bucket, err)
	}
}

// listed are the tables a listing reads.
var listed = regexp.MustCompile(`\b(FROM|JOIN) (objects|uploads|object_versions)\b`)

// countRows creates for each table a listing reads the view counted_<table>
// of its rows that counts the rows it yields (see rowsVisited).
func countRows(tb testing.TB, e *Engine) {
	tb.Helper()
	for _, table := range []string{"objects", "uploads", "object_versions"} {
		if _, err := e.wdb.Exec(`CREATE VIEW counted_` + table + ` AS SELECT * FROM ` + table + ` WHERE rows_visited()`); err != nil {
			tb.Fatal(err)
		}
	}
}

// counted is t reading the views of countRows instead of its tables.
func counted(t listTable) listTable {
	tables := make([]string, len(t.tables))
	for i, table := range t.tables {
		// A table by its name, or a subquery of one.
		tables[i] = strings.TrimPrefix(listed.ReplaceAllString("FROM "+table, "$1 counted_$2"), "FROM ")
	}
	t.tables, t.tail = tables, listed.ReplaceAllString(t.tail, "$1 counted_$2")
	return t
}

// fillPrefixes creates bucket with n objects spread over the 50 common
// prefixes "pNN/" and the object "seed", in one statement.
func fillPrefixes(tb testing.TB, e *Engine, bucket string, n int) {
	tb.Helper()
	ctx := seedBucket(tb, e, bucket)
	if _, err := e.wdb.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?2)
		INSERT INTO objects (bucket, key, blob_id, size, etag, last_modified)
		SELECT ?1, printf('p%02d/k%06d', n % 50, n / 50), (SELECT blob_id FROM objects WHERE bucket = ?1 AND key = 'seed'), 1, 'e', 0 FROM i`,
		bucket, n); err != nil {
		tb.Fatalf("fill %s: %v", bucket, err)
	}
}

// mirrorObjects gives each object of bucket an upload and a delete marker
// of its key (versions of a key: the object is the current one), in one
// statement a table.
func mirrorObjects(tb testing.TB, e *Engine, bucket string) {
	tb.Helper()
	for _, q := range []string{
		`INSERT INTO uploads (upload_id, bucket, key, initiated) SELECT bucket || '/' || key, bucket, key, 0 FROM objects WHERE bucket = ?`,
		`INSERT INTO object_versions (bucket, key, version_id, delete_marker, last_modified)
			SELECT bucket, key, 'm' || key, 1, 0 FROM objects WHERE bucket = ?`,
	} {
		if _, err := e.wdb.ExecContext(context.Background(), q, bucket); err != nil {
			tb.Fatalf("mirror %s: %v", bucket, err)
		}
	}
}

// TestSkipScanReadsThePage: a delimiter page of objects, uploads or versions
// (with and without a marker inside a key) reads a few rows a common prefix
// and a few pages of rows over gaps of nearly a page each, not the keys
// under the prefixes nor the rest of the bucket at each seek (which it did
// for versions, searching a view of the union of their two tables).
func TestSkipScanReadsThePage(t *testing.T) {
	e, err := Open(context.Background(), Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	const limit = 101
	// rows is the page's rows: a page of a gap's plain keys and hits, or
	// the 50 prefixes' hits and seed's rows.
	buckets := []struct {
		name string
		rows func(seed int) int
	}{{"gaps", func(int) int { return limit }}, {"prefixes", func(seed int) int { return 50 + seed }}}
	fillGaps(t, e, "gaps", 20, 99)
	fillPrefixes(t, e, "prefixes", 2000)
	for _, b := range buckets {
		mirrorObjects(t, e, b.name)
	}
	countRows(t, e)
	for _, tc := range []struct {
		name string
		t    listTable
		tail bool
		seed int // the rows of seed: an object, an upload, or an object and a delete marker
	}{
		{"objects", objectList, false, 1},
		{"uploads", uploadList, false, 1},
		{"uploads-after-marker", uploadList, true, 1},
		{"versions", versionList, false, 2},
		{"versions-after-marker", versionList, true, 2},
	} {
		for _, b := range buckets {
			t.Run(tc.name+"/"+b.name, func(t *testing.T) {
				c := protocol.NewListCursor("", "/", "")
				var tail *protocol.Marker
				if tc.tail {
					c = protocol.NewListCursor("", "/", "a")
					tail = &protocol.Marker{Key: "a", ID: "x"}
				}
				q, args := skipScan(c, b.name, counted(tc.t), tail, limit)
				before := rowsVisited.Load()
				rows, err := e.rdb.QueryContext(context.Background(), q, args...)
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for rows.Next() {
					n++
				}
				if err := rows.Close(); err != nil {
					t.Fatal(err)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				read := rowsVisited.Load() - before
				t.Logf("%d rows: %d rows visited", n, read)
				// A few visits of each of the page's rows (the search, the
				// count, the page), of the two tables for versions: ~600. A
				// search of the bucket at each seek visits 4,000 and more.
				if n != b.rows(tc.seed) || read > 8*limit {
					t.Errorf("%d rows, %d rows visited: want %d, at most %d", n, read, b.rows(tc.seed), 8*limit)
				}
			})
		}
	}
}

// TestSkipScanWorstCase: a delimiter page over gaps of nearly a page of
// plain keys each reads a few pages of rows, not a page of gaps of a page
// each; and the listing is right.
func TestSkipScanWorstCase(t *testing.T) {
	e, err := Open(context.Background(), Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	const groups, plain, limit = 20, 99, 101
	fillGaps(t, e, "gaps", groups, plain)
	countRows(t, e)
	q, args := skipScan(protocol.NewListCursor("", "/", ""), "gaps", counted(objectList), nil, limit)
	before := rowsVisited.Load()
	n, err := scanObjects(context.Background(), e.rdb, "gaps", q, args)
	if err != nil {
		t.Fatal(err)
	}
	read := rowsVisited.Load() - before
	t.Logf("%d rows for a page of %d: %d rows visited", len(n), limit, read)
	// The page's rows and the one gap beyond, each visited a few times
	// (the search, the count, the page): ~500. A walk over every gap (up
	// to the limit's number) visits each of the bucket's rows once:
	// ~2,000 here, a page squared where the bucket holds that many.
	if len(n) != limit || read > 8*limit {
		t.Errorf("%d rows for a page of %d, %d rows visited: want %d, at most %d", len(n), limit, read, limit, 8*limit)
	}

	// Every page of the walk, MaxKeys 1000 and 150, is what S3 answers.
	var want []string
	for g := range groups {
		for k := range plain {
			want = append(want, fmt.Sprintf("g%04d-%06d", g, k))
		}
		want = append(want, fmt.Sprintf("g%04d/", g))
	}
	want = append(want, "seed")
	for _, maxKeys := range []int{1000, 150} {
		var got []string
		p := store.ListParams{Delimiter: "/", MaxKeys: maxKeys}
		for {
			res, err := e.ListObjects(context.Background(), "gaps", p)
			if err != nil {
				t.Fatal(err)
			}
			page := len(res.CommonPrefixes)
			for _, o := range res.Objects {
				got = append(got, o.Key)
			}
			got = append(got, res.CommonPrefixes...)
			if page += len(res.Objects); page > maxKeys || res.Truncated && page != maxKeys {
				t.Fatalf("a page of %d entries for MaxKeys %d (truncated %v)", page, maxKeys, res.Truncated)
			}
			if !res.Truncated {
				break
			}
			p.After = res.NextAfter
		}
		// Objects and prefixes of a page interleave by key in S3; here
		// each page lists objects then prefixes, so compare as sets in order.
		if strings.Join(slices.Sorted(slices.Values(got)), ",") != strings.Join(want, ",") {
			t.Errorf("MaxKeys %d: %d entries, want %d", maxKeys, len(got), len(want))
		}
	}
}

// BenchmarkListGaps times a delimiter page over 100 gaps of 999 plain keys
// each before a common prefix (the worst case), next to a 50-key page.
func BenchmarkListGaps(b *testing.B) {
	e, err := Open(context.Background(), Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	fillGaps(b, e, "gaps", 100, 999)
	for _, tc := range []struct {
		name string
		p    store.ListParams
	}{
		{"delimiter-page", store.ListParams{Delimiter: "/", MaxKeys: 1000}},
		{"page-50", store.ListParams{MaxKeys: 50}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := e.ListObjects(context.Background(), "gaps", tc.p)
				if err != nil || len(res.Objects)+len(res.CommonPrefixes) != tc.p.MaxKeys {
					b.Fatalf("%d entries, want %d (%v)", len(res.Objects)+len(res.CommonPrefixes), tc.p.MaxKeys, err)
				}
			}
		})
	}
}

// BenchmarkListVersionsSkip times a delimiter page of versions and one of
// uploads over 50 common prefixes of 200 keys each (a version and a delete
// marker a key, an upload a key).
func BenchmarkListVersionsSkip(b *testing.B) {
	e, err := Open(context.Background(), Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close() })
	fillPrefixes(b, e, "prefixes", 10_000)
	mirrorObjects(b, e, "prefixes")
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		list func() (int, error)
	}{
		{"versions", func() (int, error) {
			res, err := e.ListObjectVersions(ctx, "prefixes", store.ListVersionsParams{Delimiter: "/"})
			return len(res.CommonPrefixes), err
		}},
		{"uploads", func() (int, error) {
			res, err := e.ListMultipartUploads(ctx, "prefixes", store.ListUploadsParams{Delimiter: "/"})
			return len(res.CommonPrefixes), err
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if n, err := tc.list(); err != nil || n != 50 {
					b.Fatalf("%d common prefixes, want 50 (%v)", n, err)
				}
			}
		})
	}
}
