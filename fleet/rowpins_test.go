package fleet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// memRows is a RowPinStore in memory with the SQL's rules: expiry is checked
// against the clock, an expired row is never renewed. store/pg's tests run
// the real statements; these test the guard's logic alone.
type memRows struct {
	mu       sync.Mutex
	expires  map[int64]time.Time
	renewals map[int64]int // rows renewed, by blob
	fail     error         // Renew fails with it while set
}

func newMemRows() *memRows {
	return &memRows{expires: map[int64]time.Time{}, renewals: map[int64]int{}}
}

func (m *memRows) Pin(_ context.Context, id int64, _ string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expires[id] = time.Now().Add(ttl)
	return nil
}

func (m *memRows) Renew(_ context.Context, _ string, ids []int64, ttl time.Duration) ([]int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	var got []int64
	for _, id := range ids {
		if exp, ok := m.expires[id]; ok && exp.After(time.Now()) {
			m.expires[id] = time.Now().Add(ttl)
			m.renewals[id]++
			got = append(got, id)
		}
	}
	return got, nil
}

func (m *memRows) DropOwner(context.Context, string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.expires)
	return nil
}

func (m *memRows) renewed(id int64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renewals[id]
}

func (m *memRows) set(f func(m *memRows)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

// waitFor polls cond (no sleeps as synchronization) for up to 20 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const testTTL = 300 * time.Millisecond

func newTestRowPins(t *testing.T, m *memRows) *RowPins {
	t.Helper()
	p, err := NewRowPins(RowPinsConfig{Store: m, Owner: "me", TTL: testTTL})
	if err != nil {
		t.Fatalf("NewRowPins: %v", err)
	}
	return p
}

func acquire(t *testing.T, p *RowPins, id int64) Pin {
	t.Helper()
	pin, err := p.Acquire(context.Background(), id)
	if err != nil {
		t.Fatalf("Acquire %d: %v", id, err)
	}
	return pin
}

// TestRowPinsDropEndsRenewals: a released guard's row is renewed no more
// while another's still is, and Close stops the shared loop (no goroutine
// left behind).
func TestRowPinsDropEndsRenewals(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m := newMemRows()
	p := newTestRowPins(t, m)
	a, b := acquire(t, p, 1), acquire(t, p, 2)
	shared := acquire(t, p, 1) // one row, two handles
	waitUntil(t, "both rows renewed", func() bool { return m.renewed(1) > 0 && m.renewed(2) > 0 })
	a.Release()
	waitUntil(t, "blob 1 renewed after one of its two handles went", func() bool { return m.renewed(1) > 1 })
	shared.Release()
	n1, n2 := m.renewed(1), m.renewed(2)
	waitUntil(t, "blob 2 renewed twice more", func() bool { return m.renewed(2) >= n2+2 })
	if got := m.renewed(1); got > n1+1 { // at most a round already in flight
		t.Errorf("blob 1 renewed %d more times after its last guard was dropped", got-n1)
	}
	if !b.Valid() {
		t.Error("the live guard is not valid")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if b.Valid() {
		t.Error("a guard is valid after Close")
	}
	b.Release()
	if h := p.Metrics().Held.Load(); h != 0 {
		t.Errorf("held gauge %d after Close", h)
	}
}

// TestRowPinsLoss covers the two ways a guard is lost: renewals failing until
// its deadline passed (counted, and never revived once the store answers
// again), and a renewal that finds its row gone (reaped).
func TestRowPinsLoss(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tc := range []struct {
		name    string
		breakIt func(m *memRows)
	}{
		{"renewals fail", func(m *memRows) { m.fail = errors.New("connection refused") }},
		{"row reaped", func(m *memRows) { delete(m.expires, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemRows()
			p := newTestRowPins(t, m)
			defer p.Close()
			pin := acquire(t, p, 1)
			defer pin.Release()
			start := time.Now()
			m.set(tc.breakIt)
			waitUntil(t, "the guard is lost", func() bool { return !pin.Valid() })
			if tc.name == "renewals fail" {
				if lived := time.Since(start); lived < testTTL/2 {
					t.Errorf("lost after %s: a failed renewal must not end a guard before its deadline", lived)
				}
				if p.Metrics().RenewalFailures.Load() == 0 {
					t.Error("no renewal failure counted")
				}
				m.set(func(m *memRows) { m.fail = nil })
			}
			// Rounds run again for another guard; the lost one stays lost,
			// and a new guard of the same blob is a new entry.
			other := acquire(t, p, 2)
			defer other.Release()
			r := p.Metrics().Rounds.Load()
			waitUntil(t, "two more renewal rounds", func() bool { return p.Metrics().Rounds.Load() >= r+2 })
			if pin.Valid() {
				t.Error("a lost guard became valid again")
			}
			again := acquire(t, p, 1)
			defer again.Release()
			if !again.Valid() || pin.Valid() {
				t.Errorf("new guard valid=%v, old one valid=%v; want true, false", again.Valid(), pin.Valid())
			}
		})
	}
}
