package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// Content pins of the embedded engine are a fleet.LocalPins: in-process,
// reference-counted (many streams of one blob share one entry) and never lost,
// because one process owns the storage.
//
// The protocol with a sweeper (GC) that removes blob files: a reader resolves
// its blobs, pins them, then re-checks with a fresh statement that the blob
// rows still exist (a miss means: resolve again). A sweeper either deletes the
// blob row first (committed) and only then asks Pinned, leaving a pinned
// blob's file to a later sweep; or it takes LocalPins.TryExclusive before it
// checks references and deletes. Either the reader's re-check sees the
// deletion, or the sweeper sees the pin: the LocalPins mutex orders the two.

// Pinned reports whether an open reader streams blob id. A sweeper calls it
// only after the deletion of the blob row has committed (see above).
func (e *Engine) Pinned(id int64) bool { return e.pins.Pinned(id) }

// PinCount returns the number of distinct pinned blobs (for metrics and tests).
func (e *Engine) PinCount() int { return int(e.pins.Metrics().PinsHeld.Load()) }

// Pins returns the engine's pins, for a sweeper's TryExclusive and metrics.
func (e *Engine) Pins() *fleet.LocalPins { return e.pins }

// pinBlobs pins every blob of ids. On failure nothing stays pinned; a full
// pin table is store.ErrSlowDown.
func (e *Engine) pinBlobs(ctx context.Context, ids []int64) (pinSet, error) {
	pins := make(pinSet, 0, len(ids))
	for _, id := range ids {
		p, err := e.pins.Acquire(ctx, id)
		if err != nil {
			pins.release()
			if errors.Is(err, fleet.ErrTooManyPins) {
				return nil, fmt.Errorf("%w: %w", store.ErrSlowDown, err)
			}
			return nil, err
		}
		pins = append(pins, p)
	}
	return pins, nil
}

// pinSet is the pins of one response.
type pinSet []fleet.Pin

func (s pinSet) release() {
	for _, p := range s {
		p.Release()
	}
}

// check is the stream's guard. Local pins are never lost, but a pin released
// too early (a bug) must stop the stream rather than let it read unprotected
// content; the error matches store/pg's.
func (s pinSet) check() error {
	for _, p := range s {
		if !p.Valid() {
			return fmt.Errorf("content pin: %w: %w", store.ErrUnavailable, fleet.ErrPinLost)
		}
	}
	return nil
}

// pacedReader is the store.Reader that GetObject returns: the segments paced
// by the governor (if any) and guarded by the pins; Close releases the pins
// once.
type pacedReader struct {
	src  io.ReadCloser
	r    io.Reader
	pins pinSet
	once sync.Once
}

// newPacedReader wraps src for a response.
func (e *Engine) newPacedReader(ctx context.Context, src io.ReadCloser, pins pinSet) store.Reader {
	rd := &pacedReader{src: src, r: src, pins: pins}
	if e.gov != nil {
		var guard func() error
		if len(pins) > 0 {
			guard = pins.check
		}
		rd.r = e.gov.NewReader(ctx, src, guard)
	}
	return rd
}

func (p *pacedReader) Read(b []byte) (int, error) { return p.r.Read(b) }

// Close stops reading and then releases the pins, exactly once; later calls
// do nothing.
func (p *pacedReader) Close() error {
	var err error
	p.once.Do(func() {
		err = p.src.Close()
		p.pins.release()
	})
	return err
}
