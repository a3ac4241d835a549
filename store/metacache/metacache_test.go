package metacache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a PostgreSQL engine behind a listening cache, and a second session
// that writes as another instance, an admin command or psql would.
type env struct {
	c     *Cache
	st    *Store
	other *pgx.Conn
	dsn   string
	// heard receives every payload the listener applied.
	heard chan string
	marks int
}

func newEnv(t *testing.T, o Options) *env {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	e, err := pg.Open(ctx, pg.Config{DatabaseURL: dsn, Large: pg.LargePGChunks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(ctx) })
	v := &env{c: New(o), other: other, dsn: dsn, heard: make(chan string, 1024)}
	v.st = Wrap(e, v.c)
	v.c.onInvalidate = func(p string) { v.heard <- p }
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); Listen(lctx, dsn, v.c, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the cache on", v.c.On)
	return v
}

// waitFor polls cond (a condition, not a timing) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// sync waits until the listener has applied every change committed so far
// on the other session: PostgreSQL delivers notifications in commit order,
// so hearing a marker sent after them means they were heard. The marker
// names a bucket that does not exist (dropping it drops nothing).
func (v *env) sync(t *testing.T) {
	t.Helper()
	v.marks++
	mark := fmt.Sprintf("b:sync marker %d", v.marks)
	v.exec(t, `SELECT pg_notify($1, $2)`, Channel, mark)
	timeout := time.After(20 * time.Second)
	for {
		select {
		case p := <-v.heard:
			if p == mark {
				return
			}
		case <-timeout:
			t.Fatalf("no notification %q", mark)
		}
	}
}

func (v *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := v.other.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestNotifications: every kind of change made outside this instance drops
// what the cache holds of it once its notification is heard, and the next
// read sees the change; the same writes through the cache drop the entry
// at once, before any notification.
func TestNotifications(t *testing.T) {
	ctx := context.Background()
	v := newEnv(t, Options{})
	if err := v.st.CreateBucket(ctx, "b", "us-east-1"); err != nil {
		t.Fatal(err)
	}
	if err := v.st.CreateKey(ctx, store.AccessKey{ID: "K1", Secret: "s1", Buckets: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	policy := func() (string, error) {
		m, err := v.st.BucketConfigs(ctx, "b")
		return m[store.BucketConfigPolicy], err
	}
	tests := []struct {
		name, sql, payload string
		check              func() error
	}{
		{"config inserted", `INSERT INTO bucket_configs (bucket, name, value) VALUES ('b', 'policy', 'p1')`, "b:b",
			func() error { return want(policy, "p1") }},
		{"config updated", `UPDATE bucket_configs SET value = 'p2' WHERE bucket = 'b'`, "b:b",
			func() error { return want(policy, "p2") }},
		{"config deleted", `DELETE FROM bucket_configs WHERE bucket = 'b'`, "b:b",
			func() error { return want(policy, "") }},
		{"key updated", `UPDATE access_keys SET read_only = true WHERE id = 'K1'`, "k:K1", func() error {
			k, err := v.st.GetKey(ctx, "K1")
			if err != nil || !k.ReadOnly {
				return fmt.Errorf("key after the update: %+v, %v", k, err)
			}
			return nil
		}},
		{"bucket deleted", `DELETE FROM buckets WHERE name = 'b'`, "b:b", func() error {
			if _, err := v.st.BucketConfigs(ctx, "b"); !errors.Is(err, store.ErrNoSuchBucket) {
				return fmt.Errorf("deleted bucket: %v", err)
			}
			return nil
		}},
		{"truncated", `TRUNCATE access_keys`, "*", func() error {
			if _, err := v.st.GetKey(ctx, "K1"); !errors.Is(err, store.ErrNoSuchAccessKey) {
				return fmt.Errorf("key after TRUNCATE: %v", err)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Fill what the change is about, and prove it is served cached.
			_, _ = v.st.BucketConfigs(ctx, "b")
			_, _ = v.st.GetKey(ctx, "K1")
			hits := v.c.m.Hits.Load()
			_, _ = v.st.BucketConfigs(ctx, "b")
			_, _ = v.st.GetKey(ctx, "K1")
			if v.c.m.Hits.Load() == hits {
				t.Fatal("nothing served from the cache")
			}
			v.exec(t, tt.sql)
			v.sync(t)
			if err := tt.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("own writes", func(t *testing.T) {
		if err := v.st.CreateBucket(ctx, "own", "us-east-1"); err != nil {
			t.Fatal(err)
		}
		for _, val := range []string{"a", "b", "c"} {
			if _, err := v.st.BucketConfigs(ctx, "own"); err != nil { // cached
				t.Fatal(err)
			}
			if err := v.st.PutBucketConfig(ctx, "own", store.BucketConfigPolicy, val); err != nil {
				t.Fatal(err)
			}
			// No wait for the notification: this instance reads its write.
			if m, err := v.st.BucketConfigs(ctx, "own"); err != nil || m[store.BucketConfigPolicy] != val {
				t.Fatalf("own write %q read back as %q, %v", val, m[store.BucketConfigPolicy], err)
			}
		}
	})
}

func want(get func() (string, error), v string) error {
	got, err := get()
	if err != nil || got != v {
		return fmt.Errorf("read %q, %v; want %q", got, err, v)
	}
	return nil
}

// TestKeyDeleteWindow measures the window of `admin key delete` (a DELETE
// on another session): from the moment its COMMIT is acknowledged to the
// moment this instance has dropped the key. After that the key is refused.
func TestKeyDeleteWindow(t *testing.T) {
	ctx := context.Background()
	v := newEnv(t, Options{})
	const n = 100
	var afterAck, afterSend []time.Duration
	for i := range n {
		id := fmt.Sprintf("KEY%d", i)
		if err := v.st.CreateKey(ctx, store.AccessKey{ID: id, Secret: "secret"}); err != nil {
			t.Fatal(err)
		}
		v.sync(t) // the insert and its notification are behind us
		for range 2 {
			if _, err := v.st.GetKey(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		var heardAt atomic.Int64
		v.c.mu.Lock()
		v.c.onInvalidate = func(p string) {
			if p == "k:"+id {
				heardAt.Store(time.Now().UnixNano())
			}
			v.heard <- p
		}
		v.c.mu.Unlock()
		sent := time.Now()
		v.exec(t, `DELETE FROM access_keys WHERE id = $1`, id)
		acked := time.Now()
		v.sync(t)
		at := time.Unix(0, heardAt.Load())
		afterAck, afterSend = append(afterAck, at.Sub(acked)), append(afterSend, at.Sub(sent))
		if _, err := v.st.GetKey(ctx, id); !errors.Is(err, store.ErrNoSuchAccessKey) {
			t.Fatalf("key %s after its delete was heard: %v", id, err)
		}
	}
	slices.Sort(afterAck)
	slices.Sort(afterSend)
	q := func(d []time.Duration, p int) time.Duration { return d[(len(d)-1)*p/100] }
	t.Logf("key delete window over %d deletes: from COMMIT acknowledged: p50 %v p90 %v p99 %v max %v; from DELETE sent: p50 %v p99 %v max %v",
		n, q(afterAck, 50), q(afterAck, 90), q(afterAck, 99), q(afterAck, 100), q(afterSend, 50), q(afterSend, 99), q(afterSend, 100))
}

// TestStaleReadNeverFills: readers hammer a bucket's configuration while
// another session changes it; once a change has been heard, every read
// sees it. A read that began before the change but ends after the
// invalidation would otherwise fill the cache with the old value: without
// the epoch comparison in fill, this fails within a few iterations.
func TestStaleReadNeverFills(t *testing.T) {
	ctx := context.Background()
	v := newEnv(t, Options{})
	if err := v.st.CreateBucket(ctx, "race", "us-east-1"); err != nil {
		t.Fatal(err)
	}
	v.sync(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr atomic.Value
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := v.st.BucketConfigs(ctx, "race"); err != nil {
					readErr.Store(err)
					return
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 150 {
		val := fmt.Sprintf("v%d", i)
		v.exec(t, `INSERT INTO bucket_configs (bucket, name, value) VALUES ('race', 'policy', $1)
			ON CONFLICT (bucket, name) DO UPDATE SET value = excluded.value`, val)
		v.sync(t)
		for range 3 {
			m, err := v.st.BucketConfigs(ctx, "race")
			if err != nil {
				t.Fatal(err)
			}
			if got := m[store.BucketConfigPolicy]; got != val {
				t.Fatalf("iteration %d: read %q after the change to %q was heard", i, got, val)
			}
		}
	}
	if err, _ := readErr.Load().(error); err != nil {
		t.Fatal(err)
	}
}

// TestListenerKilled: when the notification session is terminated, the
// cache empties and serves nothing until LISTEN is back; a change made
// meanwhile (whose notification nobody hears) is read from the database.
func TestListenerKilled(t *testing.T) {
	ctx := context.Background()
	v := newEnv(t, Options{})
	if err := v.st.CreateKey(ctx, store.AccessKey{ID: "KILL", Secret: "old"}); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		secret := fmt.Sprintf("s%d", round)
		v.exec(t, `UPDATE access_keys SET secret = $1 WHERE id = 'KILL'`, secret)
		v.sync(t)
		for range 2 {
			if k, err := v.st.GetKey(ctx, "KILL"); err != nil || k.Secret != secret {
				t.Fatalf("key before the kill: %+v, %v", k, err)
			}
		}
		resets := v.c.m.Resets.Load()
		v.exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, ApplicationName)
		waitFor(t, "the cache off", func() bool { return v.c.m.Resets.Load() > resets })
		// The change while nobody listens: its notification is lost. What
		// runs below may already see the cache back on; either way the
		// read must see the change.
		secret += "-unheard"
		v.exec(t, `UPDATE access_keys SET secret = $1 WHERE id = 'KILL'`, secret)
		for range 2 {
			if k, err := v.st.GetKey(ctx, "KILL"); err != nil || k.Secret != secret {
				t.Fatalf("round %d: key after an unheard change: %+v, %v", round, k, err)
			}
		}
		waitFor(t, "the cache back on", v.c.On)
		if k, err := v.st.GetKey(ctx, "KILL"); err != nil || k.Secret != secret {
			t.Fatalf("round %d: key once the cache is back: %+v, %v", round, k, err)
		}
	}
}

// TestBoundAndTTL: the cache keeps at most MaxEntries of each kind, and an
// entry older than the TTL is read again.
func TestBoundAndTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := New(Options{MaxEntries: 3, now: func() time.Time { return now }})
	c.SetOn()
	for i := range 10 {
		_, _, epoch, _ := lookup(c, c.keys, fmt.Sprint(i))
		fill(c, c.keys, fmt.Sprint(i), store.AccessKey{ID: fmt.Sprint(i)}, epoch)
	}
	if len(c.keys) != 3 {
		t.Fatalf("%d keys cached, bound 3", len(c.keys))
	}
	var k string
	for k = range c.keys {
		break
	}
	if _, hit, _, _ := lookup(c, c.keys, k); !hit {
		t.Fatal("a fresh entry missed")
	}
	now = now.Add(DefaultTTL)
	if _, hit, _, _ := lookup(c, c.keys, k); hit {
		t.Fatal("an entry as old as the TTL hit")
	}
	c.SetOff()
	_, _, epoch, on := lookup(c, c.keys, "x")
	fill(c, c.keys, "x", store.AccessKey{}, epoch)
	if on || len(c.keys) != 0 {
		t.Fatalf("the cache off: on=%v, %d keys", on, len(c.keys))
	}
}

// TestConfirm: Confirm returns once every listening cache has applied the
// changes committed before it: each has dropped the deleted key, with no
// wait of the test's own; it counts the listeners.
func TestConfirm(t *testing.T) {
	ctx := context.Background()
	v := newEnv(t, Options{})
	second := New(Options{})
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); Listen(lctx, v.dsn, second, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, "the second cache on", second.On)
	other := Wrap(v.st.Engine, second)
	for i := range 20 {
		id := fmt.Sprintf("CONFIRM%d", i)
		if err := v.st.CreateKey(ctx, store.AccessKey{ID: id, Secret: "s"}); err != nil {
			t.Fatal(err)
		}
		v.sync(t)
		for range 2 {
			_, err1 := v.st.GetKey(ctx, id)
			_, err2 := other.GetKey(ctx, id)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
		}
		v.exec(t, `DELETE FROM access_keys WHERE id = $1`, id)
		cctx, ccancel := context.WithTimeout(ctx, 20*time.Second)
		ok, of, err := Confirm(cctx, v.dsn)
		ccancel()
		if err != nil || ok != 2 || of != 2 {
			t.Fatalf("Confirm: %d of %d, %v; want 2 of 2", ok, of, err)
		}
		for name, st := range map[string]*Store{"first": v.st, "second": other} {
			if _, err := st.GetKey(ctx, id); !errors.Is(err, store.ErrNoSuchAccessKey) {
				t.Fatalf("%s cache after Confirm: key %s: %v", name, id, err)
			}
		}
	}
}
