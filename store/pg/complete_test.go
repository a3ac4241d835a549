package pg

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store"
)

// TestCompleteStatements: Complete is a metadata operation whose statement
// count does not grow with the parts it names (issue: Complete of 10,000
// parts within a bounded number of statements). The part rows are written
// directly, as 10,000 UploadParts would leave them, so that the test
// measures Complete alone.
func TestCompleteStatements(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	ctx := context.Background()
	fx := newCompleteFixture(t, v)
	complete := func(key string, n int) int64 {
		t.Helper()
		uploadID, parts := fx.upload(t, key, n)
		c := countMarked(t, v)
		info, err := v.e.CompleteMultipartUpload(c.mark(ctx), "b", key, uploadID, parts, store.PutOptions{})
		if err != nil {
			t.Fatalf("Complete of %d parts: %v", n, err)
		}
		if info.Size != int64(n)*completePartSize || !strings.HasSuffix(info.ETag, fmt.Sprintf("-%d", n)) {
			t.Fatalf("Complete of %d parts: size %d, ETag %q", n, info.Size, info.ETag)
		}
		if got := v.count(t, `SELECT count(*) FROM object_parts WHERE bucket = 'b' AND key = $1`, key); got != n {
			t.Fatalf("Complete of %d parts wrote %d manifest rows", n, got)
		}
		return c.n.Load()
	}
	small, large := complete("three", 3), complete("ten-thousand", 10_000)
	t.Logf("statements: %d for 3 parts, %d for 10,000", small, large)
	if large > small {
		t.Fatalf("Complete of 10,000 parts took %d statements, of 3 parts %d: it grows with the parts", large, small)
	}
	if large > maxCompleteStatements {
		t.Fatalf("Complete of 10,000 parts took %d statements, want at most %d", large, maxCompleteStatements)
	}
}

// maxCompleteStatements is what a Complete sends, whatever its part count:
// BEGIN, the locks, the upload FOR UPDATE, the parts, the current object,
// the object row, the manifest, the upload's deletion, COMMIT.
const maxCompleteStatements = 9

// BenchmarkComplete measures a Complete of 1,000 and of 10,000 parts (the
// part rows written directly, untimed), with its statements and WAL bytes.
func BenchmarkComplete(b *testing.B) {
	for _, n := range []int{1000, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			v := newEnv(b, LargePGChunks)
			ctx := context.Background()
			fx := newCompleteFixture(b, v)
			c := countMarked(b, v)
			var stmts, wal int64
			for i := range b.N {
				b.StopTimer()
				key := fmt.Sprintf("k%d", i)
				uploadID, parts := fx.upload(b, key, n)
				var lsn string
				if err := v.e.pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
					b.Fatal(err)
				}
				before := c.n.Load()
				b.StartTimer()
				if _, err := v.e.CompleteMultipartUpload(c.mark(ctx), "b", key, uploadID, parts, store.PutOptions{}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				stmts += c.n.Load() - before
				var bytes int64
				if err := v.e.pool.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - $1::pg_lsn)::bigint`, lsn).Scan(&bytes); err != nil {
					b.Fatal(err)
				}
				wal += bytes
			}
			b.ReportMetric(float64(stmts)/float64(b.N), "stmts/op")
			b.ReportMetric(float64(wal)/float64(b.N), "wal-bytes/op")
		})
	}
}

// completePartSize is the size the fixture's part rows claim.
const completePartSize = 5 << 20

// completeFixture makes uploads whose part rows are written directly, as
// UploadParts of one blob would leave them.
type completeFixture struct {
	v    *env
	blob int64
}

func newCompleteFixture(tb testing.TB, v *env) completeFixture {
	tb.Helper()
	fx := completeFixture{v: v}
	if err := v.e.pool.QueryRow(context.Background(), `INSERT INTO blobs (sha256, size, tier) VALUES (sha256('complete-fixture'), $1, 'pgchunks')
		ON CONFLICT (sha256) DO UPDATE SET size = EXCLUDED.size RETURNING id`, completePartSize).Scan(&fx.blob); err != nil {
		tb.Fatal(err)
	}
	return fx
}

// upload creates an upload of key with n parts and returns its id and the
// part list that completes it.
func (fx completeFixture) upload(tb testing.TB, key string, n int) (string, []store.CompletePart) {
	tb.Helper()
	ctx := context.Background()
	up, err := fx.v.e.CreateMultipartUpload(ctx, "b", key, store.ObjectMeta{}, "", "")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := fx.v.e.pool.Exec(ctx, `INSERT INTO upload_parts (upload_id, part_number, blob_id, size, etag)
		SELECT $1, g, $2, $3, md5(g::text) FROM generate_series(1, $4::int) g`, up.UploadID, fx.blob, completePartSize, n); err != nil {
		tb.Fatal(err)
	}
	parts := make([]store.CompletePart, n)
	for i := range parts {
		sum := md5.Sum([]byte(strconv.Itoa(i + 1)))
		parts[i] = store.CompletePart{Number: i + 1, ETag: hex.EncodeToString(sum[:])}
	}
	return up.UploadID, parts
}

// markedCounter counts the statements sent under a context it marked, so
// that the engine's background statements on the same pool do not count.
type markedCounter struct{ n atomic.Int64 }

type markedKey struct{}

func (c *markedCounter) mark(ctx context.Context) context.Context {
	return context.WithValue(ctx, markedKey{}, c)
}

func (c *markedCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if ctx.Value(markedKey{}) == c {
		c.n.Add(1)
	}
	return ctx
}

func (c *markedCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// countMarked moves the engine to a pool that counts the statements sent
// under c.mark's contexts.
func countMarked(tb testing.TB, v *env) *markedCounter {
	tb.Helper()
	c := &markedCounter{}
	tracePool(tb, v, c)
	return c
}

// tracePool moves the engine, for the rest of the test, to a pool of its
// own whose statements tracer sees.
func tracePool(tb testing.TB, v *env, tracer pgx.QueryTracer) {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(v.dsn)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	old := v.e.pool
	v.e.pool = pool
	tb.Cleanup(func() { v.e.pool = old; pool.Close() })
}
