package fleet

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLocalPins(t *testing.T) {
	l := NewLocalPins(2, nil)
	ctx := context.Background()
	a1, err := l.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := l.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Acquire(ctx, 3); !errors.Is(err, ErrTooManyPins) {
		t.Fatalf("third distinct blob: %v", err)
	}
	if m := l.Metrics(); m.PinsHeld.Load() != 2 || m.PinRefs.Load() != 3 || m.PinsRefused.Load() != 1 {
		t.Errorf("metrics held %d refs %d refused %d", m.PinsHeld.Load(), m.PinRefs.Load(), m.PinsRefused.Load())
	}
	if _, ok := l.TryExclusive(1); ok {
		t.Fatal("exclusive granted on a pinned blob")
	}
	a1.Release()
	a1.Release()
	if a1.Valid() || !a2.Valid() || !l.Pinned(1) {
		t.Fatal("refcount: one release must not unpin a shared blob")
	}
	a2.Release()
	if l.Pinned(1) {
		t.Fatal("pinned after the last release")
	}
	release, ok := l.TryExclusive(1)
	if !ok {
		t.Fatal("exclusive refused on an unpinned blob")
	}
	// Acquire waits while GC holds the blob, and fails with its context.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = l.Acquire(short, 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire under exclusive: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		p, err := l.Acquire(ctx, 1)
		if err == nil {
			p.Release()
		}
		got <- err
	}()
	release()
	release() // idempotent
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("acquire never woke after the exclusive release")
	}
	b.Release()
	if m := l.Metrics(); m.PinsHeld.Load() != 0 || m.PinRefs.Load() != 0 {
		t.Errorf("metrics after all releases: held %d refs %d", m.PinsHeld.Load(), m.PinRefs.Load())
	}
	var _ Pinner = l
	var _ Pinner = (*SessionPins)(nil)
}
