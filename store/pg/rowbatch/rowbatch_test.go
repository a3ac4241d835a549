package rowbatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/s3gate/s3gate/internal/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
}

const rows = 1000

// setup returns a pool on a fresh database with table kv holding k -> "v<k>"
// for k in [0, rows).
func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := p.Exec(ctx, `CREATE TABLE kv (k int PRIMARY KEY, v text NOT NULL);
		INSERT INTO kv SELECT g, 'v' || g FROM generate_series(0, 999) g`); err != nil {
		t.Fatal(err)
	}
	return p
}

// sizes records the batch sizes a Batcher reports.
type sizes struct {
	mu  sync.Mutex
	max int
	n   int
}

func (s *sizes) observe(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	s.max = max(s.max, n)
}

func (s *sizes) get() (batches, largest int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.max
}

// noLeaks checks, at the end of the test, that no goroutine started since
// is left: a lane that never ends would be. The pool is closed first: a
// connection it opened meanwhile may still have pgx's background reader
// blocked in a read (started when a large batch's write could fill the
// socket), which ends with the connection.
func noLeaks(t *testing.T, p *pgxpool.Pool) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		p.Close()
		goleak.VerifyNone(t, ignore)
	})
}

const getSQL = `SELECT v FROM kv WHERE k = $1`

// TestConcurrentReads: many goroutines read through one lane, so most reads
// travel in batches; each gets its own row (or ErrNoRows), and a row
// written and acknowledged just before a read is always seen by it.
func TestConcurrentReads(t *testing.T) {
	p := setup(t)
	noLeaks(t, p)
	var sz sizes
	b := New(p, Config{Lanes: 1, Observe: sz.observe})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const workers, reads = 32, 150
	var next atomic.Int64
	next.Store(rows)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range reads {
				if w%4 == 0 && i%5 == 0 {
					// Read-after-write: insert, then read through the batcher.
					k := next.Add(1)
					if _, err := p.Exec(ctx, `INSERT INTO kv VALUES ($1::int, 'new' || $1::int)`, k); err != nil {
						errs <- err
						return
					}
					var v string
					if err := b.QueryRow(ctx, getSQL, k).Scan(&v); err != nil || v != fmt.Sprintf("new%d", k) {
						errs <- fmt.Errorf("read of %d right after its insert: %q, %v", k, v, err)
						return
					}
					continue
				}
				k := rng.IntN(rows + rows/10) // some are missing
				var v string
				err := b.QueryRow(ctx, getSQL, k).Scan(&v)
				switch {
				case k >= rows && !errors.Is(err, pgx.ErrNoRows):
					// A key past the first rows may have been inserted
					// by a writer meanwhile: then it reads as such.
					if err != nil || v != fmt.Sprintf("new%d", k) {
						errs <- fmt.Errorf("missing key %d: %q, %v", k, v, err)
						return
					}
				case k < rows && (err != nil || v != fmt.Sprintf("v%d", k)):
					errs <- fmt.Errorf("key %d: %q, %v", k, v, err)
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
	batches, largest := sz.get()
	if largest < 2 {
		t.Fatalf("%d batches, the largest of %d statements: nothing was batched", batches, largest)
	}
	t.Logf("%d reads in %d batches, the largest of %d", workers*reads, batches, largest)
}

// holdLane occupies b's only lane with a read that waits on an advisory lock
// the test holds; release lets it finish. It returns once the read is in
// flight (PostgreSQL shows it waiting).
func holdLane(t *testing.T, p *pgxpool.Pool, b *Batcher) (release func(), done <-chan error) {
	t.Helper()
	ctx := context.Background()
	locker, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locker.Exec(ctx, `SELECT pg_advisory_lock(42)`); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() {
		var ok bool
		ch <- b.QueryRow(ctx, `SELECT pg_advisory_xact_lock_shared(42) IS NULL`).Scan(&ok)
	}()
	waitFor(t, "the lane's read to wait on the lock", func() bool {
		var n int
		err := p.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n)
		return err == nil && n == 1
	})
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := locker.Exec(ctx, `SELECT pg_advisory_unlock(42)`); err != nil {
				t.Error(err)
			}
			locker.Release()
		})
	}
	// A test that fails first still lets the reads end, or closing the pool
	// would wait for them.
	t.Cleanup(release)
	return release, ch
}

// waitFor polls cond (a state, not a timer) until it holds or a minute
// passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (b *Batcher) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// TestFailedStatementInBatch: the reads queued behind a busy lane go out as
// one batch; one of them fails, and it alone gets the error: the reads
// after it, aborted with it in PostgreSQL, run again and get their rows.
func TestFailedStatementInBatch(t *testing.T) {
	p := setup(t)
	var sz sizes
	b := New(p, Config{Lanes: 1, Observe: sz.observe})
	release, held := holdLane(t, p, b)
	ctx := context.Background()
	type result struct {
		v   string
		err error
	}
	queries := []struct {
		sql string
		arg any
	}{
		{getSQL, 1},
		{`SELECT (1 / $1::int)::text`, 0}, // division by zero
		{getSQL, 2},
		{getSQL, rows + 5}, // no row
		{getSQL, 3},
	}
	results := make([]chan result, len(queries))
	for i, q := range queries {
		results[i] = make(chan result, 1)
		go func() {
			var v string
			err := b.QueryRow(ctx, q.sql, q.arg).Scan(&v)
			results[i] <- result{v, err}
		}()
		// Queue them in order, so the failure sits mid-batch.
		waitFor(t, "the read to queue", func() bool { return b.queued() == i+1 })
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	var pgErr *pgconn.PgError
	for i, want := range []result{{"v1", nil}, {}, {"v2", nil}, {"", pgx.ErrNoRows}, {"v3", nil}} {
		got := <-results[i]
		if i == 1 {
			if !errors.As(got.err, &pgErr) || pgErr.Code != "22012" {
				t.Errorf("read %d: %v, want division_by_zero", i, got.err)
			}
			continue
		}
		if got.v != want.v || !errors.Is(got.err, want.err) && got.err != want.err {
			t.Errorf("read %d: %q, %v; want %q, %v", i, got.v, got.err, want.v, want.err)
		}
	}
	if _, largest := sz.get(); largest != len(queries) {
		t.Errorf("largest batch %d, want the %d queued reads together", largest, len(queries))
	}
}

// TestAbandonedRead: a caller whose context ends while its read waits in
// the queue returns at once with the context's error, and its destination
// is never written afterwards (the race detector watches dest).
func TestAbandonedRead(t *testing.T) {
	p := setup(t)
	b := New(p, Config{Lanes: 1})
	release, held := holdLane(t, p, b)
	ctx, cancel := context.WithCancel(context.Background())
	dest := "untouched"
	got := make(chan error, 1)
	go func() { got <- b.QueryRow(ctx, getSQL, 7).Scan(&dest) }()
	waitFor(t, "the read to queue", func() bool { return b.queued() == 1 })
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned read: %v, want context.Canceled", err)
	}
	dest = "mine again" // written by this goroutine only from here on
	// A later read on the same lane runs after the abandoned one was taken.
	after := make(chan error, 1)
	var v string
	go func() { after <- b.QueryRow(context.Background(), getSQL, 8).Scan(&v) }()
	waitFor(t, "the next read to queue", func() bool { return b.queued() == 2 })
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-after; err != nil || v != "v8" {
		t.Fatalf("read after the abandoned one: %q, %v", v, err)
	}
	if dest != "mine again" {
		t.Fatalf("the abandoned read's destination was written: %q", dest)
	}
}

// TestCancelStorm: reads with random, short deadlines under load: each
// either answers correctly or returns its context's error, and no lane
// writes a destination after its caller returned (the race detector).
func TestCancelStorm(t *testing.T) {
	p := setup(t)
	noLeaks(t, p)
	b := New(p, Config{Lanes: 2})
	var wg sync.WaitGroup
	var answered, cancelled atomic.Int64
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for range 200 {
				k := rng.IntN(rows)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(3000))*time.Microsecond)
				var v string
				err := b.QueryRow(ctx, getSQL, k).Scan(&v)
				cancel()
				switch {
				case err == nil && v == fmt.Sprintf("v%d", k):
					answered.Add(1)
				case err != nil && ctx.Err() != nil:
					cancelled.Add(1)
				default:
					errs <- fmt.Errorf("key %d: %q, %v", k, v, err)
					return
				}
				v = "reused" // the caller owns v again
				_ = v
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The lanes drain: nothing is left queued or running.
	waitFor(t, "the lanes to free", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.running == 0 && len(b.queue) == 0
	})
	t.Logf("%d answered, %d cancelled", answered.Load(), cancelled.Load())
	if answered.Load() == 0 || cancelled.Load() == 0 {
		t.Fatalf("answered %d, cancelled %d: the storm needs both", answered.Load(), cancelled.Load())
	}
}

func (b *Batcher) lanes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}

// waitingOnLock counts the backends waiting on the test's advisory lock.
func waitingOnLock(p *pgxpool.Pool) int {
	var n int
	if err := p.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// TestReadsWaitForTheLaneInFlight: with lanes to spare, reads that arrive
// while one is in flight still queue behind it (within Spread) and go out
// together as one batch, instead of each taking a lane of its own.
func TestReadsWaitForTheLaneInFlight(t *testing.T) {
	p := setup(t)
	var sz sizes
	b := New(p, Config{Lanes: 4, Spread: time.Hour, Observe: sz.observe})
	release, held := holdLane(t, p, b)
	const n = 5
	results := make(chan error, n)
	for k := range n {
		go func() {
			var v string
			err := b.QueryRow(context.Background(), getSQL, k).Scan(&v)
			if err == nil && v != fmt.Sprintf("v%d", k) {
				err = fmt.Errorf("key %d read %q", k, v)
			}
			results <- err
		}()
	}
	waitFor(t, "the reads to queue", func() bool { return b.queued() == n })
	if got := b.lanes(); got != 1 {
		t.Fatalf("%d lanes in flight, want the held one alone", got)
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	if _, largest := sz.get(); largest != n {
		t.Errorf("largest batch %d, want the %d queued reads together", largest, n)
	}
}

// TestSlowLaneSpreads: reads queued behind a lane that does not come back
// within Spread open more lanes, up to Lanes, so slow reads run side by side
// in PostgreSQL: here three reads wait on one lock at once.
func TestSlowLaneSpreads(t *testing.T) {
	p := setup(t)
	noLeaks(t, p)
	b := New(p, Config{Lanes: 3, Spread: time.Millisecond})
	release, held := holdLane(t, p, b)
	const more = 2
	results := make(chan error, more)
	for i := range more {
		go func() {
			var ok bool
			results <- b.QueryRow(context.Background(), `SELECT pg_advisory_xact_lock_shared(42) IS NULL`).Scan(&ok)
		}()
		waitFor(t, "another lane's read to wait on the lock", func() bool { return waitingOnLock(p) == 2+i })
	}
	if got := b.lanes(); got != 3 {
		t.Errorf("%d lanes in flight, want 3", got)
	}
	release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	for range more {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	waitFor(t, "the lanes to free", func() bool { return b.lanes() == 0 && b.queued() == 0 })
}
