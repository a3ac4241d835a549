package fleet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// LocalPins is the in-process Pinner of the embedded engine (one process owns
// the storage): reference-counted pins that are never lost, and an exclusive
// side for GC with the same semantics as the advisory locks.
type LocalPins struct {
	max     int
	metrics *Metrics

	mu    sync.Mutex
	locks map[int64]*localLock
}

type localLock struct {
	shared    int
	exclusive bool
	freed     chan struct{} // closed when the exclusive holder releases
}

// NewLocalPins returns in-process pins capped at maxPins distinct blobs (0: no
// cap). m may be nil.
func NewLocalPins(maxPins int, m *Metrics) *LocalPins {
	if m == nil {
		m = new(Metrics)
	}
	return &LocalPins{max: maxPins, metrics: m, locks: make(map[int64]*localLock)}
}

// Metrics are the pin counters.
func (l *LocalPins) Metrics() *Metrics { return l.metrics }

// Acquire pins a blob, waiting while GC holds it exclusively.
func (l *LocalPins) Acquire(ctx context.Context, blobID int64) (Pin, error) {
	for {
		l.mu.Lock()
		lk := l.locks[blobID]
		if lk != nil && lk.exclusive {
			freed := lk.freed
			l.mu.Unlock()
			select {
			case <-freed:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("pin blob %d: held exclusively (GC): %w", blobID, ctx.Err())
			}
		}
		if lk == nil {
			if l.max > 0 && len(l.locks) >= l.max {
				l.mu.Unlock()
				l.metrics.PinsRefused.Add(1)
				return nil, fmt.Errorf("pin blob %d: %w (cap %d distinct blobs)", blobID, ErrTooManyPins, l.max)
			}
			lk = &localLock{}
			l.locks[blobID] = lk
			l.metrics.PinsHeld.Add(1)
		}
		lk.shared++
		l.mu.Unlock()
		l.metrics.PinRefs.Add(1)
		return &localPin{l: l, blob: blobID}, nil
	}
}

// TryExclusive takes the blob's exclusive lock if no pin holds it, for GC to
// check references and delete. release must be called exactly once.
func (l *LocalPins) TryExclusive(blobID int64) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locks[blobID] != nil {
		return nil, false
	}
	lk := &localLock{exclusive: true, freed: make(chan struct{})}
	l.locks[blobID] = lk
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.locks, blobID)
			l.mu.Unlock()
			close(lk.freed)
		})
	}, true
}

// Pinned reports whether any pin holds the blob.
func (l *LocalPins) Pinned(blobID int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lk := l.locks[blobID]
	return lk != nil && lk.shared > 0
}

type localPin struct {
	l        *LocalPins
	blob     int64
	released atomic.Bool
}

func (p *localPin) Valid() bool { return !p.released.Load() }

func (p *localPin) Release() {
	if !p.released.CompareAndSwap(false, true) {
		return
	}
	l := p.l
	l.metrics.PinRefs.Add(-1)
	l.mu.Lock()
	defer l.mu.Unlock()
	lk := l.locks[p.blob]
	lk.shared--
	if lk.shared == 0 {
		delete(l.locks, p.blob)
		l.metrics.PinsHeld.Add(-1)
	}
}
