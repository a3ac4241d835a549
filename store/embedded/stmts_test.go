package embedded

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"

	"modernc.org/sqlite"

	"github.com/s3gate/s3gate/store"
)

// compilesDriver is modernc's driver under a name of its own whose
// connections report every statement SQLite compiles: SQLite calls a
// connection's authorizer while it compiles a statement (sqlite3_prepare_v2,
// and again when it re-prepares one after a schema change), never when it
// runs one.
const compilesDriver = "sqlite-compiles"

var (
	registerCompiles sync.Once
	compileLogs      sync.Map // database path -> *compileLog
)

// compileLog counts, per connection, the authorizer's events while SQLite
// compiles statements on the connections of one database.
type compileLog struct {
	mu     sync.Mutex
	conns  int
	events map[compileEvent]map[int]int // event -> connection -> count
}

// compileEvent is one authorizer call: an action and its first two
// arguments (for a read: table and column; for an insert: table).
type compileEvent struct {
	action     sqlite.AuthorizerActionCode
	arg1, arg2 string
}

func (l *compileLog) note(conn int, ev compileEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.events[ev] == nil {
		l.events[ev] = map[int]int{}
	}
	l.events[ev][conn]++
}

// counts returns, per connection, how often ev was compiled, and resets them.
func (l *compileLog) take(ev compileEvent) map[int]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.events[ev]
	delete(l.events, ev)
	return n
}

// openCounted opens an engine whose connections log their compilations.
func openCounted(t *testing.T) (*Engine, *compileLog) {
	t.Helper()
	registerCompiles.Do(func() {
		d := &sqlite.Driver{}
		d.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, dsn string) error {
			v, ok := compileLogs.Load(strings.SplitN(dsn, "?", 2)[0])
			if !ok {
				return nil
			}
			l := v.(*compileLog)
			l.mu.Lock()
			l.conns++
			conn := l.conns
			l.mu.Unlock()
			a, ok := c.(sqlite.AuthorizerRegisterer)
			if !ok {
				return fmt.Errorf("driver connection %T has no authorizer", c)
			}
			return a.RegisterAuthorizer(func(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
				l.note(conn, compileEvent{action, arg1, arg2})
				return sqlite.AuthorizerOK
			})
		})
		sql.Register(compilesDriver, d)
	})
	dir := t.TempDir()
	l := &compileLog{events: map[compileEvent]map[int]int{}}
	path := dir + "/" + MetaFile
	compileLogs.Store(path, l)
	t.Cleanup(func() { compileLogs.Delete(path) })
	e, err := Open(context.Background(), Config{Dir: dir, driver: compilesDriver})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e, l
}

// TestStatementsCompiledOncePerConnection: repeating a statement compiles it
// at most once on each connection that runs it (twice on one connection when
// it first misses inside a transaction: that run is unprepared), whether it
// runs alone on the reader pool, in a read transaction or in a write
// transaction on the single writer. Without the cache every call compiles.
func TestStatementsCompiledOncePerConnection(t *testing.T) {
	ctx := context.Background()
	e, log := openCounted(t)
	const calls = 40
	// check runs run calls times and counts, per connection, the
	// compilations of the statement that ev marks (perCompile events each).
	check := func(t *testing.T, what string, ev compileEvent, perCompile, most int, run func(i int) error) {
		t.Helper()
		log.take(ev)
		for i := range calls {
			if err := run(i); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		total := 0
		for conn, n := range log.take(ev) {
			total += n
			if n > most*perCompile {
				t.Errorf("%s: compiled %d times on connection %d in %d calls, want at most %d",
					what, n/perCompile, conn, calls, most)
			}
		}
		if total == 0 {
			t.Fatalf("%s: never compiled: the log sees nothing", what)
		}
	}
	// CreateBucket inserts into buckets in a write transaction.
	check(t, "create bucket", compileEvent{sqlite.AuthInsert, "buckets", ""}, 1, 2, func(i int) error {
		return e.CreateBucket(ctx, fmt.Sprintf("b%d", i), "")
	})
	if _, err := e.PutObject(ctx, "b0", "k", bytes.NewReader([]byte("x")), store.PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	// HeadBucket: SELECT region, created_at FROM buckets (autocommit).
	check(t, "head bucket", compileEvent{sqlite.AuthRead, "buckets", "created_at"}, 1, 1, func(int) error {
		_, err := e.HeadBucket(ctx, "b0")
		return err
	})
	// A listing page in a read transaction reads objects.etag; the
	// authorizer sees it twice per compilation (ORDER BY resolves the
	// columns again).
	check(t, "list objects", compileEvent{sqlite.AuthRead, "objects", "etag"}, 2, 2, func(int) error {
		_, err := e.ListObjects(ctx, "b0", store.ListParams{MaxKeys: 10})
		return err
	})
	if e.rq.size() == 0 || e.wq.size() == 0 {
		t.Fatalf("cached statements: readers %d, writer %d", e.rq.size(), e.wq.size())
	}
}

// TestStatementCacheBound: past its bound a cache runs statements unprepared
// and keeps what it has; misses inside transactions wait within the same
// bound; a closed cache holds nothing and runs statements unprepared.
func TestStatementCacheBound(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	c := newStmtCache(e.rdb, 3)
	query := func(q querier, i int) {
		t.Helper()
		var got int
		if err := q.QueryRowContext(ctx, fmt.Sprintf("SELECT ? + %d", i), 1).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != i+1 {
			t.Fatalf("SELECT ? + %d: got %d", i, got)
		}
	}
	for i := range 10 {
		query(c, i)
	}
	if n := c.size(); n != 3 {
		t.Fatalf("%d statements cached, bound 3", n)
	}
	if p, u := c.prepared.Load(), c.uncached.Load(); p != 3 || u != 7 {
		t.Fatalf("prepared %d, uncached %d; want 3 and 7", p, u)
	}
	for i := range 3 {
		query(c, i) // hits
	}
	if p, u := c.prepared.Load(), c.uncached.Load(); p != 3 || u != 7 {
		t.Fatalf("after hits: prepared %d, uncached %d; want 3 and 7", p, u)
	}

	// Misses inside a transaction are deferred, within the bound.
	c2 := newStmtCache(e.rdb, 3)
	tx, err := e.rdb.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		query(txQuerier{tx: tx, c: c2}, i)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := c2.npending.Load(); n != 3 {
		t.Fatalf("%d statements pending, bound 3", n)
	}
	c2.preparePending(ctx)
	if n, p := c2.size(), c2.npending.Load(); n != 3 || p != 0 {
		t.Fatalf("after preparePending: %d cached, %d pending; want 3 and 0", n, p)
	}

	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if err := c2.close(); err != nil {
		t.Fatal(err)
	}
	if n := c.size(); n != 0 {
		t.Fatalf("%d statements cached after close", n)
	}
	query(c, 0) // unprepared on the open pool
	if n := c.size(); n != 0 {
		t.Fatalf("closed cache took a statement: %d", n)
	}
}

// TestStatementSurvivesSchemaChange: a cached statement compiled before the
// writer changes the schema is re-prepared by SQLite (prepare_v2) and reads
// the new schema.
func TestStatementSurvivesSchemaChange(t *testing.T) {
	ctx := context.Background()
	e, log := openCounted(t)
	if _, err := e.wdb.ExecContext(ctx, `CREATE TABLE scratch (a INTEGER)`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.wdb.ExecContext(ctx, `INSERT INTO scratch (a) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	columns := func() []string {
		t.Helper()
		rows, err := e.rq.QueryContext(ctx, `SELECT * FROM scratch`)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rows.Close() }()
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return cols
	}
	if cols := columns(); len(cols) != 1 {
		t.Fatalf("columns %v", cols)
	}
	before := e.rq.prepared.Load()
	if _, err := e.wdb.ExecContext(ctx, `ALTER TABLE scratch ADD COLUMN b INTEGER DEFAULT 7`); err != nil {
		t.Fatal(err)
	}
	log.take(compileEvent{sqlite.AuthRead, "scratch", "b"})
	if cols := columns(); len(cols) != 2 || cols[1] != "b" {
		t.Fatalf("columns after ALTER TABLE: %v", cols)
	}
	if after := e.rq.prepared.Load(); after != before {
		t.Fatalf("the cache prepared the statement again (%d, then %d): SQLite should have", before, after)
	}
	if len(log.take(compileEvent{sqlite.AuthRead, "scratch", "b"})) == 0 {
		t.Fatal("SQLite did not re-prepare the statement after the schema change")
	}
	var b int
	if err := e.rq.QueryRowContext(ctx, `SELECT b FROM scratch`).Scan(&b); err != nil || b != 7 {
		t.Fatalf("b = %d, %v", b, err)
	}
}

// TestStatementCacheConcurrent runs the engine's cached statements from many
// goroutines at once (for -race): puts, gets, listings and bucket reads,
// each statement missing first in several of them together.
func TestStatementCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	if err := e.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				key := fmt.Sprintf("g%d/%d", g, i)
				body := []byte(key)
				if _, err := e.PutObject(ctx, "b", key, bytes.NewReader(body), store.PutOptions{Size: int64(len(body))}); err != nil {
					errs <- err
					return
				}
				_, _, rd, err := e.GetObject(ctx, "b", key, store.GetOptions{}, false)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(rd)
				_ = rd.Close()
				if err != nil || !bytes.Equal(got, body) {
					errs <- fmt.Errorf("get %s: %q, %v", key, got, err)
					return
				}
				if _, err := e.ListObjects(ctx, "b", store.ListParams{Prefix: fmt.Sprintf("g%d/", g), Delimiter: "/", MaxKeys: 5}); err != nil {
					errs <- err
					return
				}
				if _, err := e.BucketConfigs(ctx, "b"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if e.rq.size() == 0 || e.wq.size() == 0 {
		t.Fatalf("cached statements: readers %d, writer %d", e.rq.size(), e.wq.size())
	}
}

// TestGetResolvesInOneSnapshot: a GET outside a transaction (the dialect's
// Autocommit, a statement cache) still reads its object row and manifest in
// one read transaction of its own.
func TestGetResolvesInOneSnapshot(t *testing.T) {
	ctx := context.Background()
	e, log := openCounted(t)
	if err := e.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.PutObject(ctx, "b", "k", bytes.NewReader([]byte("x")), store.PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	begin := compileEvent{sqlite.AuthTransaction, "BEGIN", ""}
	for range 3 {
		log.take(begin)
		_, _, rd, err := e.GetObject(ctx, "b", "k", store.GetOptions{}, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := rd.Close(); err != nil {
			t.Fatal(err)
		}
		if len(log.take(begin)) == 0 {
			t.Fatal("GET resolved the object outside a transaction")
		}
	}
}
