package lease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func newPGStore(t *testing.T) (*PGStore, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Several instances starting at once must all succeed.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = EnsureSchema(ctx, pool)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	st, err := NewPGStore(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	return st, pool
}

// expire moves the row's expiry into the past, as if TTL had passed.
func expire(t *testing.T, pool *pgxpool.Pool, kind string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		`UPDATE leases SET expires_at = clock_timestamp() - interval '1 second' WHERE kind = $1`, kind); err != nil {
		t.Fatal(err)
	}
}

// TestPGStoreTwoHolders walks two holders through the SQL protocol: exclusion,
// fencing on the generation, release, expiry, and no revival of an expired row.
func TestPGStoreTwoHolders(t *testing.T) {
	st, pool := newPGStore(t)
	ctx := context.Background()
	const ttl = 30 * time.Second
	must := func(ok bool, err error) bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	genA, ok, err := st.Acquire(ctx, "gc", "a", ttl)
	if err != nil || !ok {
		t.Fatalf("a: acquire = %v, %v", ok, err)
	}
	if _, ok, _ := st.Acquire(ctx, "gc", "b", ttl); ok {
		t.Fatal("b acquired a lease that a holds")
	}
	if _, ok, _ := st.Acquire(ctx, "other", "b", ttl); !ok {
		t.Fatal("b could not acquire another kind")
	}
	if !must(st.Confirm(ctx, "gc", "a", genA)) {
		t.Fatal("a: not confirmed")
	}
	if must(st.Confirm(ctx, "gc", "b", genA)) {
		t.Fatal("b confirmed a's lease")
	}
	if !must(st.Renew(ctx, "gc", "a", genA, ttl)) {
		t.Fatal("a: renewal refused")
	}
	if !must(st.Release(ctx, "gc", "a", genA)) {
		t.Fatal("a: release refused")
	}
	if must(st.Renew(ctx, "gc", "a", genA, ttl)) {
		t.Fatal("a renewed a released lease")
	}

	genB, ok, err := st.Acquire(ctx, "gc", "b", ttl)
	if err != nil || !ok {
		t.Fatalf("b: acquire after release = %v, %v", ok, err)
	}
	if genB <= genA {
		t.Fatalf("generation %d after %d: must grow", genB, genA)
	}
	// b's row expires: nobody revives it, b included; a takes it over.
	expire(t, pool, "gc")
	if must(st.Renew(ctx, "gc", "b", genB, ttl)) {
		t.Fatal("an expired lease was renewed")
	}
	if must(st.Confirm(ctx, "gc", "b", genB)) {
		t.Fatal("an expired lease was confirmed")
	}
	genA2, ok, err := st.Acquire(ctx, "gc", "a", ttl)
	if err != nil || !ok {
		t.Fatalf("a: acquire after expiry = %v, %v", ok, err)
	}
	if genA2 <= genB {
		t.Fatalf("generation %d after %d: must grow", genA2, genB)
	}
	// b's stale generation is fenced out even by the same holder name.
	if must(st.Release(ctx, "gc", "b", genB)) || must(st.Renew(ctx, "gc", "a", genA, ttl)) {
		t.Fatal("a stale generation touched the new grant")
	}
	if !must(st.Confirm(ctx, "gc", "a", genA2)) {
		t.Fatal("a: new grant not confirmed")
	}
}

// TestGrantsRace has two holders race for one lease with real grants: at
// most one holds a valid grant at any time, and a holder whose row is taken
// away loses its grant and its job context.
func TestGrantsRace(t *testing.T) {
	st, pool := newPGStore(t)
	ctx := context.Background()
	cfg := func(holder string) Config {
		return Config{Kind: "gc", Holder: holder, RenewInterval: 20 * time.Millisecond, RetryInterval: 10 * time.Millisecond}
	}
	var mu sync.Mutex
	active, maxActive, runs := 0, 0, 0
	var wg sync.WaitGroup
	for _, h := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				g, err := Acquire(ctx, st, cfg(h))
				if errors.Is(err, ErrHeld) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				active++
				maxActive = max(maxActive, active)
				runs++
				mu.Unlock()
				// A short job: it checks that it is still the holder in SQL.
				if ok, err := st.Confirm(ctx, "gc", h, g.Generation()); err != nil || !ok {
					t.Errorf("%s: job lost its confirmed lease: %v %v", h, ok, err)
				}
				mu.Lock()
				active--
				mu.Unlock()
				done, err := g.Finish(ctx)
				if err != nil || !done {
					t.Errorf("%s: Finish = %v, %v", h, done, err)
				}
			}
		}()
	}
	wg.Wait()
	if maxActive != 1 {
		t.Fatalf("%d holders at once, want 1", maxActive)
	}
	if runs == 0 {
		t.Fatal("no holder ever acquired the lease")
	}

	// Take the row away from a live grant: its next renewal is refused, the
	// grant is lost and its context cancelled; Finish reports false.
	g, err := Acquire(ctx, st, cfg("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE leases SET holder = 'intruder', generation = generation + 1 WHERE kind = 'gc'`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Context().Done():
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("grant not lost after its row was taken")
	}
	if !errors.Is(context.Cause(g.Context()), ErrLost) || g.Valid() {
		t.Fatalf("cause %v, valid %v", context.Cause(g.Context()), g.Valid())
	}
	if done, err := g.Finish(ctx); err != nil || done {
		t.Fatalf("Finish = %v, %v; want false", done, err)
	}
	var holder string
	if err := pool.QueryRow(ctx, `SELECT holder FROM leases WHERE kind = 'gc'`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if holder != "intruder" {
		t.Fatalf("a stale Finish released the intruder's row (holder %q)", holder)
	}
}
