package embedded

import "sync"

// pinTable holds in-process content pins: reference counts of the blobs whose
// files open readers stream. It is the embedded counterpart of the session
// pins of store/pg: many streams of one blob share one entry.
//
// The protocol with a sweeper (GC) that removes blob files: a reader resolves
// its blobs, pins them, then re-checks with a fresh statement that the blob
// rows still exist (a miss means: resolve again). A sweeper deletes the blob
// row first (committed) and only then asks Pinned; a pinned blob's file must
// wait for a later sweep. Either the reader's re-check sees the deletion, or
// the sweeper sees the pin: the pin table's mutex orders the two.
type pinTable struct {
	mu sync.Mutex
	n  map[int64]int
}

func newPinTable() *pinTable { return &pinTable{n: make(map[int64]int)} }

// pin takes one reference on each id and returns the release function, which
// is idempotent.
func (p *pinTable) pin(ids []int64) func() {
	p.mu.Lock()
	for _, id := range ids {
		p.n[id]++
	}
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			for _, id := range ids {
				if p.n[id]--; p.n[id] <= 0 {
					delete(p.n, id)
				}
			}
		})
	}
}

// Pinned reports whether an open reader streams blob id. A sweeper calls it
// only after the deletion of the blob row has committed (see pinTable).
func (e *Engine) Pinned(id int64) bool {
	e.pins.mu.Lock()
	defer e.pins.mu.Unlock()
	return e.pins.n[id] > 0
}

// PinCount returns the number of distinct pinned blobs (for metrics and tests).
func (e *Engine) PinCount() int {
	e.pins.mu.Lock()
	defer e.pins.mu.Unlock()
	return len(e.pins.n)
}
