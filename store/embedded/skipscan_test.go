package embedded

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"modernc.org/sqlite"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// rowsVisited counts the calls of the SQL function rows_visited(), which
// the view counted_objects calls once for each row of objects a statement
// visits (SQLite flattens the view, so the index search is unchanged).
var rowsVisited atomic.Int64

func init() {
	sqlite.MustRegisterScalarFunction("rows_visited", 0, func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) {
		rowsVisited.Add(1)
		return int64(1), nil
	})
}

// fillGaps creates bucket with groups runs of plain keys ("g0007-000123",
// plain of them) each followed by a key under a common prefix ("g0007/x"):
// a delimiter listing's worst case, a gap of nearly a page before every
// prefix. It writes the rows in one statement: the listing is measured.
func fillGaps(tb testing.TB, e *Engine, bucket string, groups, plain int) {
	tb.Helper()
	ctx := context.Background()
	if err := e.CreateBucket(ctx, bucket, ""); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.PutObject(ctx, bucket, "seed", strings.NewReader("x"), store.PutOptions{Size: 1}); err != nil {
		tb.Fatal(err)
	}
	if _, err := e.wdb.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?2 * (?3 + 1))
		INSERT INTO objects (bucket, key, blob_id, size, etag, last_modified)
		SELECT ?1, CASE WHEN n % (?3 + 1) = ?3 THEN printf('g%04d/x', n / (?3 + 1)) ELSE printf('g%04d-%06d', n / (?3 + 1), n % (?3 + 1)) END,
			(SELECT blob_id FROM objects WHERE bucket = ?1 AND key = 'seed'), 1, 'e', 0 FROM i`, bucket, groups, plain); err != nil {
		tb.Fatalf("fill %s: %v", bucket, err)
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
	if _, err := e.wdb.Exec(`CREATE VIEW counted_objects AS SELECT * FROM objects WHERE rows_visited()`); err != nil {
		t.Fatal(err)
	}
	counted := objectList
	counted.table = "counted_objects"
	q, args := skipScan(protocol.NewListCursor("", "/", ""), "gaps", counted, nil, limit)
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
