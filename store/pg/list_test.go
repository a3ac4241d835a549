package pg

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store/storetest"
)

// statementCounter counts the statements a pool sends (n), alone or in
// batches, and its round trips (a statement alone or a batch; the prepares
// pgx sends before a batch's first use on a connection are not counted).
type statementCounter struct{ n, trips atomic.Int64 }

func (s *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	s.trips.Add(1)
	return ctx
}

func (s *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.trips.Add(1)
	return ctx
}

func (s *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	s.n.Add(1)
}

func (s *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countStatements moves the engine to a pool that counts its statements.
func countStatements(tb testing.TB, v *env) *statementCounter {
	tb.Helper()
	var c statementCounter
	tracePool(tb, v, &c)
	return &c
}

// TestListStatements: a page costs the bucket check and one listing
// statement, however many keys its common prefixes hold.
func TestListStatements(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	storetest.FillListBench(t, v.e)
	c := countStatements(t, v)
	for _, pg := range storetest.ListPages {
		checkPageStatements(t, c, pg.Name, pg.Objects, pg.Prefixes, func() (int, int, error) {
			res, err := v.e.ListObjects(context.Background(), storetest.ListBenchBucket, pg.Params)
			return len(res.Objects), len(res.CommonPrefixes), err
		})
	}
}

// checkPageStatements runs list, a listing of one page, and checks that it
// yields items entries and prefixes common prefixes in at most 2 statements
// (the bucket check and the listing).
func checkPageStatements(t *testing.T, c *statementCounter, name string, items, prefixes int, list func() (int, int, error)) {
	t.Helper()
	before := c.n.Load()
	gotItems, gotPrefixes, err := list()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if gotItems != items || gotPrefixes != prefixes {
		t.Errorf("%s: %d entries and %d prefixes, want %d and %d", name, gotItems, gotPrefixes, items, prefixes)
	}
	if n := c.n.Load() - before; n > 2 {
		t.Errorf("%s: %d statements, want at most 2", name, n)
	}
}

// BenchmarkList measures storetest.ListPages.
func BenchmarkList(b *testing.B) {
	v := newEnv(b, LargePGChunks)
	storetest.FillListBench(b, v.e)
	// Settled as a long-lived table is, not racing autovacuum's first pass.
	if _, err := v.e.pool.Exec(context.Background(), `VACUUM ANALYZE objects`); err != nil {
		b.Fatal(err)
	}
	c := countStatements(b, v)
	storetest.BenchList(b, v.e, c.n.Load)
}

// TestListUploadsStatements: a page of uploads costs the bucket check and
// one listing statement, however many uploads its common prefixes hold.
func TestListUploadsStatements(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	storetest.FillUploadBench(t, v.e)
	c := countStatements(t, v)
	for _, pg := range storetest.UploadPages {
		before := c.n.Load()
		res, err := v.e.ListMultipartUploads(context.Background(), storetest.ListBenchBucket, pg.Params)
		if err != nil {
			t.Fatal(err)
		}
		storetest.CheckUploadPage(t, pg, res)
		if n := c.n.Load() - before; n > 2 {
			t.Errorf("%s: %d statements, want at most 2", pg.Name, n)
		}
	}
}
