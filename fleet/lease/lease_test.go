package lease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeClock is a manual clock: time moves only by Advance.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
	changed chan struct{} // closed and replaced whenever a waiter is added
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), changed: make(chan struct{})}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Advance moves the clock and fires every timer that is due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(c.now) {
			w.ch <- c.now
			continue
		}
		kept = append(kept, w)
	}
	c.waiters = kept
}

// waitTimer blocks until someone waits for the clock to reach at: the renewal
// loop has scheduled its next step, so advancing now cannot race it.
func (c *fakeClock) waitTimer(t *testing.T, at time.Time) {
	t.Helper()
	deadline := time.After(30 * time.Second) // a hang guard, not a timing assertion
	for {
		c.mu.Lock()
		for _, w := range c.waiters {
			if w.at.Equal(at) {
				c.mu.Unlock()
				return
			}
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no timer was set for %s", at)
		}
	}
}

// fakeStore hands every renewal to the test, which answers when it likes.
type fakeStore struct {
	gen        int64
	acquireOK  bool
	confirmOK  bool
	renewCalls chan *renewCall

	mu          sync.Mutex
	inflight    int
	maxInflight int
	releases    int
}

type renewCall struct {
	gen   int64
	reply chan renewResult
}

func newFakeStore() *fakeStore {
	return &fakeStore{gen: 7, acquireOK: true, confirmOK: true, renewCalls: make(chan *renewCall, 16)}
}

func (s *fakeStore) Acquire(context.Context, string, string, time.Duration) (int64, bool, error) {
	return s.gen, s.acquireOK, nil
}

func (s *fakeStore) Confirm(_ context.Context, _, _ string, gen int64) (bool, error) {
	return s.confirmOK && gen == s.gen, nil
}

// Renew waits for the test's answer; like a server that already executed the
// statement, it answers even when the caller gave up (ctx is ignored).
func (s *fakeStore) Renew(_ context.Context, _, _ string, gen int64, _ time.Duration) (bool, error) {
	s.mu.Lock()
	s.inflight++
	s.maxInflight = max(s.maxInflight, s.inflight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	c := &renewCall{gen: gen, reply: make(chan renewResult, 1)}
	s.renewCalls <- c
	r := <-c.reply
	return r.ok, r.err
}

func (s *fakeStore) Release(context.Context, string, string, int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases++
	return true, nil
}

func (s *fakeStore) nextCall(t *testing.T) *renewCall {
	t.Helper()
	select {
	case c := <-s.renewCalls:
		return c
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("no renewal was sent")
		return nil
	}
}

func (s *fakeStore) noPendingCall(t *testing.T) {
	t.Helper()
	select {
	case c := <-s.renewCalls:
		t.Fatalf("unexpected renewal (generation %d)", c.gen)
	default:
	}
}

func testConfig(clk Clock) Config {
	return Config{
		Kind: "gc", Holder: "a", TTL: 30 * time.Second, Window: 8 * time.Second,
		RenewInterval: 2 * time.Second, RetryInterval: 500 * time.Millisecond,
		RequestTimeout: 20 * time.Second, // long: a delayed renewal stays in flight
		Clock:          clk,
	}
}

func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("grant context was not cancelled")
	}
}

// TestDelayedRenewalWindow proves the 8 s window, measured from the send time
// of the last confirmed renewal, and that a late answer never revives a lost
// grant.
func TestDelayedRenewalWindow(t *testing.T) {
	clk := newFakeClock()
	st := newFakeStore()
	t0 := clk.Now()
	g, err := Acquire(context.Background(), st, testConfig(clk))
	if err != nil {
		t.Fatal(err)
	}
	if g.Generation() != 7 {
		t.Fatalf("generation %d, want 7", g.Generation())
	}

	// First renewal at t0+2 s, answered at once: window ends at t0+10 s.
	clk.waitTimer(t, t0.Add(2*time.Second))
	clk.Advance(2 * time.Second)
	st.nextCall(t).reply <- renewResult{ok: true}

	// Second renewal at t0+4 s is delayed. Answered at t0+9 s, it extends
	// the window from its SEND time: to t0+12 s, not t0+17 s.
	clk.waitTimer(t, t0.Add(4*time.Second))
	clk.Advance(2 * time.Second)
	second := st.nextCall(t)
	clk.Advance(5 * time.Second) // t0+9 s
	if !g.Valid() {
		t.Fatal("grant invalid at t0+9s; the first renewal confirmed it until t0+10s")
	}
	st.noPendingCall(t) // one request in flight at most, even though 2 s passed
	second.reply <- renewResult{ok: true}

	// Third renewal at t0+11 s is delayed for good.
	clk.waitTimer(t, t0.Add(11*time.Second))
	clk.Advance(2 * time.Second) // t0+11 s
	third := st.nextCall(t)
	clk.Advance(time.Second - time.Millisecond) // t0+11.999 s
	if !g.Valid() {
		t.Fatal("grant invalid at t0+11.999s; the second renewal (sent at t0+4s) confirmed it until t0+12s")
	}
	if err := g.Context().Err(); err != nil {
		t.Fatalf("job context ended while valid: %v", err)
	}
	clk.Advance(time.Millisecond) // t0+12 s: window over
	if g.Valid() {
		t.Fatal("grant still valid at t0+12s, 8s after the send time of the last confirmed renewal")
	}
	waitDone(t, g.Context())
	if cause := context.Cause(g.Context()); !errors.Is(cause, ErrLost) {
		t.Fatalf("context cause %v, want ErrLost", cause)
	}

	// The delayed renewal now succeeds in SQL: the grant stays lost.
	third.reply <- renewResult{ok: true}
	clk.Advance(time.Minute)
	if g.Valid() || g.Err() == nil {
		t.Fatal("a late renewal revived a lost grant")
	}
	st.noPendingCall(t)
	done, err := g.Finish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if done {
		t.Fatal("Finish reported true for a lost grant")
	}
	if st.maxInflight != 1 {
		t.Fatalf("%d renewals in flight at once, want 1", st.maxInflight)
	}
	if st.releases != 1 {
		t.Fatalf("%d releases, want 1", st.releases)
	}
}

// TestRenewalOutcomes covers how one renewal answer changes the grant.
func TestRenewalOutcomes(t *testing.T) {
	tests := []struct {
		name      string
		answer    renewResult
		wantValid bool // right after the answer
		// wantRetryAfter is when the next renewal is scheduled after the answer
		// (0: none, the grant is over).
		wantRetryAfter time.Duration
	}{
		{"confirmed", renewResult{ok: true}, true, 2 * time.Second},
		{"not ours any more", renewResult{ok: false}, false, 0},
		{"failed request", renewResult{err: errors.New("connection reset")}, true, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			st := newFakeStore()
			t0 := clk.Now()
			g, err := Acquire(context.Background(), st, testConfig(clk))
			if err != nil {
				t.Fatal(err)
			}
			clk.waitTimer(t, t0.Add(2*time.Second))
			clk.Advance(2 * time.Second)
			st.nextCall(t).reply <- renewResult(tt.answer)
			if tt.wantRetryAfter > 0 {
				clk.waitTimer(t, t0.Add(2*time.Second+tt.wantRetryAfter))
				if !g.Valid() {
					t.Fatal("grant lost after the answer")
				}
			} else {
				waitDone(t, g.Context())
				if g.Valid() {
					t.Fatal("grant valid after the row was reported not ours")
				}
			}
			if g.Valid() != tt.wantValid {
				t.Fatalf("Valid() = %v, want %v", g.Valid(), tt.wantValid)
			}
			done, err := g.Finish(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if done != tt.wantValid {
				t.Fatalf("Finish = %v, want %v", done, tt.wantValid)
			}
			if err := g.Context().Err(); err == nil {
				t.Fatal("job context still live after Finish")
			}
		})
	}
}

// TestRequestTimeout: a renewal that does not answer within the request
// timeout is cancelled and retried, and the retry is sent only after the
// first request returned.
func TestRequestTimeout(t *testing.T) {
	clk := newFakeClock()
	st := newFakeStore()
	cfg := testConfig(clk)
	cfg.RequestTimeout = 2 * time.Second
	t0 := clk.Now()
	g, err := Acquire(context.Background(), st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	clk.waitTimer(t, t0.Add(2*time.Second))
	clk.Advance(2 * time.Second)
	first := st.nextCall(t)
	clk.waitTimer(t, t0.Add(4*time.Second)) // the request timeout
	clk.Advance(2 * time.Second)            // t0+4 s: timed out, cancelled
	clk.Advance(time.Second)                // more than the retry interval
	st.noPendingCall(t)                     // the first has not returned yet
	first.reply <- renewResult{err: context.Canceled}
	clk.waitTimer(t, t0.Add(5*time.Second+500*time.Millisecond))
	clk.Advance(500 * time.Millisecond)
	st.nextCall(t).reply <- renewResult{ok: true} // sent at t0+5.5 s
	clk.waitTimer(t, t0.Add(7*time.Second+500*time.Millisecond))
	clk.Advance(8 * time.Second) // t0+13.5 s = 5.5 s + 8 s
	if g.Valid() {
		t.Fatal("valid beyond the window of the retry")
	}
	if done, err := g.Finish(context.Background()); err != nil || done {
		t.Fatalf("Finish = %v, %v; want false", done, err)
	}
	if st.maxInflight != 1 {
		t.Fatalf("%d renewals in flight at once, want 1", st.maxInflight)
	}
}

func TestAcquireRefused(t *testing.T) {
	tests := []struct {
		name               string
		acquire, confirmOK bool
	}{
		{"held", false, true},
		{"taken before confirmation", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			st.acquireOK, st.confirmOK = tt.acquire, tt.confirmOK
			_, err := Acquire(context.Background(), st, testConfig(newFakeClock()))
			if !errors.Is(err, ErrHeld) {
				t.Fatalf("err = %v, want ErrHeld", err)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no kind", Config{Holder: "a"}},
		{"no holder", Config{Kind: "gc"}},
		{"window not below ttl", Config{Kind: "gc", Holder: "a", TTL: 8 * time.Second, Window: 8 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Acquire(context.Background(), newFakeStore(), tt.cfg); err == nil {
				t.Fatal("Acquire accepted an invalid config")
			}
		})
	}
}
