package pg

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// fillSkip creates bucket with n objects, n uploads (4 a key) and n delete
// markers, each spread over the 50 common prefixes root+"pNN/", written as one
// statement per table: a listing's cost is measured, not the puts'. With
// analyze the tables' statistics are then up to date; without, the planner
// knows nothing of the bucket (one filled since the last ANALYZE).
func fillSkip(tb testing.TB, v *env, bucket, root string, n int, analyze bool) {
	tb.Helper()
	ctx := context.Background()
	if err := v.e.CreateBucket(ctx, bucket, ""); err != nil {
		tb.Fatal(err)
	}
	seed, err := v.e.PutObject(ctx, bucket, "seed", strings.NewReader("x"), store.PutOptions{Size: 1})
	if err != nil {
		tb.Fatal(err)
	}
	const key = `$5 || format('p%s/k%s', lpad((i % 50)::text, 2, '0'), lpad((i / $3)::text, 6, '0'))`
	for _, q := range []struct {
		sql string
		per int // rows a key
	}{
		{`INSERT INTO objects (bucket, key, blob_id, size, etag)
			SELECT $1, ` + key + `, (SELECT blob_id FROM objects WHERE bucket = $1 AND key = 'seed'), 1, $4 FROM generate_series(0, $2 - 1) i`, 1},
		{`INSERT INTO uploads (upload_id, bucket, key) SELECT $4 || $1 || i, $1, ` + key + ` FROM generate_series(0, $2 - 1) i`, 4},
		{`INSERT INTO object_versions (bucket, key, version_id, delete_marker)
			SELECT $1, ` + key + `, $4 || i, true FROM generate_series(0, $2 - 1) i`, 1},
	} {
		if _, err := v.e.pool.Exec(ctx, q.sql, bucket, n, q.per, seed.ETag, root); err != nil {
			tb.Fatalf("fill %s: %v", bucket, err)
		}
	}
	if !analyze {
		return
	}
	// Settled as long-lived tables are, not racing autovacuum's first pass.
	if _, err := v.e.pool.Exec(ctx, `VACUUM ANALYZE objects, uploads, object_versions`); err != nil {
		tb.Fatal(err)
	}
}

// holdStatistics keeps autovacuum from analyzing v's tables (v has a
// database of its own), so that their statistics stay as the test left them.
func holdStatistics(tb testing.TB, v *env) {
	tb.Helper()
	for _, table := range []string{"objects", "uploads", "object_versions"} {
		if _, err := v.e.pool.Exec(context.Background(), `ALTER TABLE `+table+` SET (autovacuum_enabled = false)`); err != nil {
			tb.Fatalf("autovacuum of %s: %v", table, err)
		}
	}
}

// rowsRead runs query under EXPLAIN ANALYZE and returns how many rows its
// scans read from the tables and indexes.
func rowsRead(tb testing.TB, v *env, query string, args []any) float64 {
	tb.Helper()
	var out []byte
	if err := v.e.pool.QueryRow(context.Background(), `EXPLAIN (ANALYZE, FORMAT JSON) `+query, args...).Scan(&out); err != nil {
		tb.Fatalf("explain: %v", err)
	}
	type node struct {
		Type  string  `json:"Node Type"`
		Rows  float64 `json:"Actual Rows"`
		Loops float64 `json:"Actual Loops"`
		Plans []node  `json:"Plans"`
	}
	var plan []struct{ Plan node }
	if err := json.Unmarshal(out, &plan); err != nil {
		tb.Fatalf("explain: %v", err)
	}
	var sum func(n node) float64
	sum = func(n node) float64 {
		r := 0.0
		if strings.HasSuffix(n.Type, "Scan") && !strings.HasPrefix(n.Type, "CTE") && !strings.HasPrefix(n.Type, "WorkTable") &&
			!strings.HasPrefix(n.Type, "Subquery") && !strings.HasPrefix(n.Type, "Values") && !strings.HasPrefix(n.Type, "Function") {
			r = n.Rows * n.Loops
		}
		for _, c := range n.Plans {
			r += sum(c)
		}
		return r
	}
	return sum(plan[0].Plan)
}

// TestSkipScanReadsThePage: a delimiter listing over 50 common prefixes
// reads a few rows a prefix, not the prefixes' keys, for objects, uploads
// and versions alike, with and without an upload or version marker, in a
// bucket the statistics know and in a new database's tables that were
// never analyzed (where a plan that trusted the planner's estimate read and
// sorted the bucket at every seek).
func TestSkipScanReadsThePage(t *testing.T) {
	analyzed, fresh := newEnv(t, LargePGChunks), newEnv(t, LargePGChunks)
	holdStatistics(t, fresh)
	// Under a prefix ("d/"), and at the bucket's root (no prefix: the
	// listing's range has no upper bound).
	roots := map[string]string{"skip": "d/", "skip-root": ""}
	// (A smaller bucket at the root and in the new database: it shows a
	// plan reading the bucket as well, in less of the test run's time.)
	fillSkip(t, analyzed, "skip", "d/", 10_000, true)
	fillSkip(t, analyzed, "skip-root", "", 2_000, true)
	for bucket, root := range roots {
		fillSkip(t, fresh, bucket, root, 2_000, false)
	}
	for _, tc := range []struct {
		name string
		t    listTable
		tail bool
	}{
		{"objects", objectList, false},
		{"uploads", uploadList, false},
		{"uploads-after-marker", uploadList, true},
		{"versions", versionList, false},
		{"versions-after-marker", versionList, true},
	} {
		for _, db := range []struct {
			name string
			v    *env
		}{{"analyzed", analyzed}, {"never-analyzed", fresh}} {
			for bucket, root := range roots {
				v := db.v
				t.Run(tc.name+"/"+db.name+"/"+bucket, func(t *testing.T) {
					c := protocol.NewListCursor(root, "/", "")
					var tail *protocol.Marker
					if tc.tail {
						c = protocol.NewListCursor(root, "/", root+"a")
						tail = &protocol.Marker{Key: root + "a", ID: "x"}
					}
					q, args := skipScan(c, bucket, tc.t, tail, protocol.ListBatch)
					// Each of the 51 seeks reads its hit and the row after it in
					// each table it lists (102 rows, 204 for versions); a step
					// that reads the gap up to the limit reads ~50,000.
					n := rowsRead(t, v, q, args)
					t.Logf("%.0f rows read", n)
					if n > 400 {
						t.Errorf("the listing read %.0f rows for 50 common prefixes, want at most 400", n)
					}
				})
			}
		}
	}
}

// backendCPU returns the CPU seconds that the database's client backends
// have used, or false if their /proc entries are not readable (a server
// on another host).
func backendCPU(b *testing.B, v *env) (float64, bool) {
	rows, err := v.e.pool.Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	total := 0.0
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, false
		}
		// utime and stime, in clock ticks (100 a second on Linux), follow
		// the parenthesized command name.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		for _, i := range []int{11, 12} {
			t, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				b.Fatal(err)
			}
			total += t / 100
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return total, true
}

// looseScan is the raw loose index scan of the common prefixes under d/
// (prefix and delimiter one byte each): one index seek a prefix.
const looseScan = `WITH RECURSIVE p(k) AS (
		SELECT (SELECT key FROM objects WHERE bucket = $1 AND key >= 'd/' AND key < 'd0' ORDER BY key LIMIT 1)
		UNION ALL
		SELECT (SELECT key FROM objects WHERE bucket = $1 AND key >= left(p.k, 2 + strpos(substr(p.k, 3), '/') - 1) || '0'
			AND key < 'd0' ORDER BY key LIMIT 1) FROM p WHERE p.k IS NOT NULL)
	SELECT left(k, 2 + strpos(substr(k, 3), '/')) FROM p WHERE k IS NOT NULL`

// BenchmarkListSkip measures, in buckets of 10,000 and 100,000 keys in 50
// common prefixes, the delimiter page, a 50-key page and the raw loose index
// scan of the same prefixes, with the statements and the PostgreSQL CPU per
// page.
func BenchmarkListSkip(b *testing.B) {
	v := newEnv(b, LargePGChunks)
	ctx := context.Background()
	for _, n := range []int{10_000, 100_000} {
		bucket := fmt.Sprintf("skip%d", n)
		fillSkip(b, v, bucket, "d/", n, true)
		c := countStatements(b, v)
		for _, tc := range []struct {
			name     string
			prefixes int
			run      func() (int, error)
		}{
			{"delimiter-50-prefixes", 50, func() (int, error) {
				res, err := v.e.ListObjects(ctx, bucket, store.ListParams{Prefix: "d/", Delimiter: "/"})
				return len(res.CommonPrefixes), err
			}},
			{"page-50", 0, func() (int, error) {
				res, err := v.e.ListObjects(ctx, bucket, store.ListParams{Prefix: "d/", MaxKeys: 50})
				if len(res.Objects) != 50 {
					err = fmt.Errorf("%d objects, want 50", len(res.Objects))
				}
				return len(res.CommonPrefixes), err
			}},
			{"loose-index-scan", 50, func() (int, error) {
				rows, err := v.e.pool.Query(ctx, looseScan, bucket)
				if err != nil {
					return 0, err
				}
				k := 0
				for rows.Next() {
					k++
				}
				rows.Close()
				return k, rows.Err()
			}},
		} {
			b.Run(fmt.Sprintf("%s/keys=%d", tc.name, n), func(b *testing.B) {
				if _, err := tc.run(); err != nil { // every pool connection open and warm
					b.Fatal(err)
				}
				stmts := c.n.Load()
				cpu, cpuOK := backendCPU(b, v)
				for b.Loop() {
					if k, err := tc.run(); err != nil || k != tc.prefixes {
						b.Fatalf("%d common prefixes, want %d (%v)", k, tc.prefixes, err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(c.n.Load()-stmts)/float64(b.N), "stmts/op")
				if after, ok := backendCPU(b, v); ok && cpuOK {
					b.ReportMetric((after-cpu)*1000/float64(b.N), "pg-cpu-ms/op")
				}
			})
		}
	}
}

// TestListVersionsStatements: a page of versions costs the bucket check and
// one listing statement, with a delimiter (whatever its prefixes hold) or
// without, and resumed inside a key.
func TestListVersionsStatements(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	fillSkip(t, v, "vs", "d/", 2_000, false)
	c := countStatements(t, v)
	for _, tc := range []struct {
		name     string
		p        store.ListVersionsParams
		versions int
		prefixes int
	}{
		{"delimiter", store.ListVersionsParams{Prefix: "d/", Delimiter: "/"}, 0, 50},
		{"delimiter-root", store.ListVersionsParams{Delimiter: "/"}, 1, 1},
		{"page-50", store.ListVersionsParams{Prefix: "d/", MaxKeys: 50}, 50, 0},
		{"page-1000", store.ListVersionsParams{Prefix: "d/", MaxKeys: 1000}, 1000, 0},
		// Inside the key's two versions: its delete marker, then the next keys.
		{"inside-a-key", store.ListVersionsParams{Prefix: "d/", KeyMarker: "d/p00/k000000", VersionIDMarker: "null", MaxKeys: 50}, 50, 0},
	} {
		checkPageStatements(t, c, tc.name, tc.versions, tc.prefixes, func() (int, int, error) {
			res, err := v.e.ListObjectVersions(context.Background(), "vs", tc.p)
			return len(res.Versions), len(res.CommonPrefixes), err
		})
	}
}
