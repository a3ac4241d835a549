package fleet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func newPins(t *testing.T, cfg PinsConfig) *SessionPins {
	t.Helper()
	p, err := NewSessionPins(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pins close: %v", err)
		}
	})
	return p
}

// sharedLocks counts granted shared advisory locks on key held by pid.
func sharedLocks(t *testing.T, adm *pgxConn, pid uint32, key int64) int {
	t.Helper()
	var n int
	err := adm.QueryRow(tctx(t), `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND pid = $1 AND mode = 'ShareLock' AND granted AND objsubid = 1
		  AND ((classid::bigint << 32) | objid::bigint) = $2`, int32(pid), key).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// tryExclusive is what GC does: take the blob's exclusive lock if nobody pins
// it (and give it back at once).
func tryExclusive(t *testing.T, adm *pgxConn, key int64) bool {
	t.Helper()
	var ok bool
	if err := adm.QueryRow(tctx(t), `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	if ok {
		if _, err := adm.Exec(tctx(t), `SELECT pg_advisory_unlock($1)`, key); err != nil {
			t.Fatal(err)
		}
	}
	return ok
}

func TestPinsRefcountOneLock(t *testing.T) {
	dsn := pgtestDSN(t)
	adm := admin(t, dsn)
	m := new(Metrics)
	p := newPins(t, PinsConfig{Session: SessionConfig{DSN: dsn, Metrics: m}})
	const n = 20
	const blob = 42
	key := BlobLockKey(blob)
	pins := make([]Pin, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range pins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pin, err := p.Acquire(tctx(t), blob)
			if err != nil {
				errs <- err
				return
			}
			pins[i] = pin
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("acquire: %v", err)
	}
	pid := p.BackendPID()
	if got := sharedLocks(t, adm, pid, key); got != 1 {
		t.Fatalf("%d shared locks for %d pins, want 1", got, n)
	}
	if m.PinsHeld.Load() != 1 || m.PinRefs.Load() != n {
		t.Errorf("metrics: held %d refs %d", m.PinsHeld.Load(), m.PinRefs.Load())
	}
	var appName string
	if err := adm.QueryRow(tctx(t), `SELECT application_name FROM pg_stat_activity WHERE pid = $1`, int32(pid)).Scan(&appName); err != nil || appName != "s3gate-pins" {
		t.Errorf("pin session application_name %q, %v", appName, err)
	}
	if tryExclusive(t, adm, key) {
		t.Fatal("GC's exclusive lock succeeded while pinned")
	}
	for i, pin := range pins[:n-1] {
		pin.Release()
		pin.Release() // idempotent
		if pin.Valid() {
			t.Fatalf("pin %d valid after release", i)
		}
	}
	if !pins[n-1].Valid() {
		t.Fatal("last pin invalid")
	}
	if got := sharedLocks(t, adm, pid, key); got != 1 {
		t.Fatalf("%d shared locks with one pin left, want 1", got)
	}
	if tryExclusive(t, adm, key) {
		t.Fatal("GC's exclusive lock succeeded while the last pin lives")
	}
	pins[n-1].Release()
	if got := sharedLocks(t, adm, pid, key); got != 0 {
		t.Fatalf("%d shared locks after the last release", got)
	}
	if !tryExclusive(t, adm, key) {
		t.Fatal("GC's exclusive lock failed after the last release")
	}
	if m.PinsHeld.Load() != 0 || m.PinRefs.Load() != 0 {
		t.Errorf("metrics after release: held %d refs %d", m.PinsHeld.Load(), m.PinRefs.Load())
	}
	// The session survived it all: same backend.
	if _, err := p.Acquire(tctx(t), 1); err != nil || p.BackendPID() != pid {
		t.Errorf("after release: %v, pid %d -> %d", err, pid, p.BackendPID())
	}
}

func TestPinsCap(t *testing.T) {
	dsn := pgtestDSN(t)
	m := new(Metrics)
	p := newPins(t, PinsConfig{Session: SessionConfig{DSN: dsn, Metrics: m}, MaxPins: 3})
	var held []Pin
	for id := int64(1); id <= 3; id++ {
		pin, err := p.Acquire(tctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, pin)
	}
	if _, err := p.Acquire(tctx(t), 4); !errors.Is(err, ErrTooManyPins) {
		t.Fatalf("4th distinct blob: %v, want ErrTooManyPins", err)
	}
	// Sharing an already locked blob costs no lock and is not capped.
	extra, err := p.Acquire(tctx(t), 2)
	if err != nil {
		t.Fatalf("second stream of a pinned blob: %v", err)
	}
	held[0].Release()
	pin4, err := p.Acquire(tctx(t), 4)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if m.PinsRefused.Load() != 1 || m.PinsHeld.Load() != 3 {
		t.Errorf("refused %d held %d", m.PinsRefused.Load(), m.PinsHeld.Load())
	}
	for _, pin := range append(held[1:], extra, pin4) {
		pin.Release()
	}
}

// Loss of the session invalidates every pin at once; no new session opens
// while a pin of the lost one is held; the old pin never becomes valid again.
func TestPinsLossAndReplacement(t *testing.T) {
	dsn := pgtestDSN(t)
	adm := admin(t, dsn)
	clk := newFakeClock()
	p := newPins(t, PinsConfig{Session: manualCfg(dsn, "", clk)})
	a, err := p.Acquire(tctx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Acquire(tctx(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	old := p.sess
	oldPID := old.BackendPID()
	terminate(t, adm, oldPID)
	if err := old.Check(tctx(t)); !errors.Is(err, ErrSessionLost) {
		t.Fatalf("check: %v", err)
	}
	if a.Valid() || b.Valid() {
		t.Fatal("pins valid after loss")
	}
	a.Release()
	_, err = p.Acquire(tctx(t), 3)
	if !errors.Is(err, ErrHandlesOutstanding) || !errors.Is(err, ErrSessionLost) {
		t.Fatalf("acquire while an old pin lives: %v", err)
	}
	b.Release()
	c, err := p.Acquire(tctx(t), 1)
	if err != nil {
		t.Fatalf("acquire after every old pin was released: %v", err)
	}
	defer c.Release()
	if p.BackendPID() == oldPID || p.sess == old {
		t.Error("same session after loss")
	}
	if a.Valid() || b.Valid() || !c.Valid() {
		t.Errorf("validity after replacement: old %v %v new %v", a.Valid(), b.Valid(), c.Valid())
	}
	if got := sharedLocks(t, adm, p.BackendPID(), BlobLockKey(1)); got != 1 {
		t.Errorf("new session holds %d locks on blob 1", got)
	}
}

// While GC holds a blob's exclusive lock, Acquire waits (without tying up the
// session) and fails only when its context ends; a caller's cancellation never
// harms the shared session.
func TestPinsWaitForGC(t *testing.T) {
	dsn := pgtestDSN(t)
	adm := admin(t, dsn)
	p := newPins(t, PinsConfig{Session: SessionConfig{DSN: dsn}, RetryInterval: 10 * time.Millisecond})
	other, err := p.Acquire(tctx(t), 8) // the session is open and in use
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	pid := p.BackendPID()
	key := BlobLockKey(7)
	if _, err := adm.Exec(tctx(t), `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = p.Acquire(ctx, 7)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire under GC's lock: %v, want deadline exceeded", err)
	}
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	// Either outcome is fine (the lock is free); what matters is the session.
	if pin, err := p.Acquire(canceled, 9); err == nil {
		pin.Release()
	}
	if !other.Valid() || p.BackendPID() != pid {
		t.Fatal("a caller's deadline or cancellation hurt the shared session")
	}
	got := make(chan error, 1)
	go func() {
		pin, err := p.Acquire(tctx(t), 7)
		if err == nil {
			pin.Release()
		}
		got <- err
	}()
	if _, err := adm.Exec(tctx(t), `SELECT pg_advisory_unlock($1)`, key); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("acquire after GC let go: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("acquire never got the pin")
	}
}

func TestPinsClose(t *testing.T) {
	dsn := pgtestDSN(t)
	p, err := NewSessionPins(PinsConfig{Session: SessionConfig{DSN: dsn}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Open(tctx(t)); err != nil {
		t.Fatal(err)
	}
	pin, err := p.Acquire(tctx(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if pin.Valid() {
		t.Error("pin valid after Close")
	}
	pin.Release() // harmless after Close
	if _, err := p.Acquire(tctx(t), 2); !errors.Is(err, ErrPinsClosed) {
		t.Errorf("acquire after Close: %v", err)
	}
	if err := Guard(pin)(); !errors.Is(err, ErrPinLost) {
		t.Errorf("Guard of a dead pin: %v", err)
	}
}

func TestNewSessionPinsRefusesUnsafe(t *testing.T) {
	_, err := NewSessionPins(PinsConfig{Session: SessionConfig{DSN: "postgres://x/y", IdleSessionTimeout: 9 * time.Second}})
	if !errors.Is(err, ErrUnsafeSettings) {
		t.Errorf("NewSessionPins with idle_session_timeout 9s: %v", err)
	}
}

// The pins' mutex is never held across a round trip: while the lock statement
// of blob A (and later its unlock) is stalled on the wire, another stream of an
// already pinned blob B is pinned and released, the metrics and the backend
// are readable, and a new blob's pin waits for the connection only as long as
// its own context allows (with the mutex held across the statement, each of
// these would wait for A).
func TestPinsSlowStatementBlocksNoOtherBlob(t *testing.T) {
	dsn := pgtestDSN(t)
	stall := make(chan struct{})
	entered := make(chan string, 2)
	keyA := BlobLockKey(1)
	cfg := PinsConfig{Session: SessionConfig{DSN: dsn}}
	var gate sync.Mutex // guards stalling
	stalling := true
	cfg.beforeStatement = func(op string, key int64) {
		gate.Lock()
		s := stalling
		gate.Unlock()
		if key == keyA && s {
			entered <- op
			<-stall
		}
	}
	p := newPins(t, cfg)
	b, err := p.Acquire(tctx(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	// quick runs f and fails the test if it is still blocked after a generous
	// deadline: with the old mutex it would block until A's statement ends,
	// which only this test's goroutine can allow.
	quick := func(what string, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		case <-time.After(20 * time.Second):
			close(stall)
			t.Fatalf("%s blocked behind blob A's statement", what)
		}
	}
	stalledPhase := func(op string) {
		t.Helper()
		if got := <-entered; got != op {
			t.Fatalf("stalled statement %q, want %q", got, op)
		}
		quick("second stream of B", func() error {
			b2, err := p.Acquire(tctx(t), 2)
			if err != nil {
				return err
			}
			if !b2.Valid() {
				return errors.New("second pin of B invalid")
			}
			b2.Release()
			return nil
		})
		quick("backend pid", func() error {
			if p.BackendPID() == 0 {
				return errors.New("no backend")
			}
			return nil
		})
		quick("new blob C with a short deadline", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			c, err := p.Acquire(ctx, 3)
			if err == nil {
				c.Release()
				return errors.New("blob C pinned while the connection is busy with A")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		})
	}

	aDone := make(chan Pin, 1)
	go func() {
		a, err := p.Acquire(tctx(t), 1)
		if err != nil {
			t.Errorf("acquire A: %v", err)
		}
		aDone <- a
	}()
	stalledPhase("lock")
	close(stall)
	a := <-aDone
	if a == nil {
		t.FailNow()
	}
	stall = make(chan struct{})
	relDone := make(chan struct{})
	go func() { a.Release(); close(relDone) }()
	stalledPhase("unlock")
	gate.Lock()
	stalling = false
	gate.Unlock()
	close(stall)
	<-relDone
	b.Release()
	if m := p.Metrics(); m.PinsHeld.Load() != 0 || m.PinRefs.Load() != 0 {
		t.Errorf("after release: held %d refs %d", m.PinsHeld.Load(), m.PinRefs.Load())
	}
}
