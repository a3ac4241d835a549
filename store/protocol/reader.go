package protocol

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/throttle"
)

// PinSet is the content pins of one response.
type PinSet []fleet.Pin

// Release releases every pin.
func (s PinSet) Release() {
	for _, p := range s {
		p.Release()
	}
}

// Check is the guard of a stream: nil while every pin is valid, afterwards an
// error wrapping store.ErrUnavailable and fleet.ErrPinLost.
func (s PinSet) Check() error {
	for _, p := range s {
		if !p.Valid() {
			return fmt.Errorf("content pin: %w: %w", store.ErrUnavailable, fleet.ErrPinLost)
		}
	}
	return nil
}

// GuardMode says when a response stream checks its pins.
type GuardMode int

const (
	// GuardAlways checks the pins around every read, through the governor if
	// there is one, else by itself (store/pg: pins can be lost).
	GuardAlways GuardMode = iota
	// GuardWithGovernor checks the pins only through the governor
	// (store/embedded: local pins are never lost).
	GuardWithGovernor
)

// GuardedReader wraps the content reader of a response: paced by gov (if not
// nil) and guarded by pins (if any) as mode says; Close closes src and then
// releases the pins, exactly once.
func GuardedReader(ctx context.Context, src io.ReadCloser, pins PinSet, gov *throttle.BandwidthGovernor, mode GuardMode) store.Reader {
	var guard func() error
	if len(pins) > 0 {
		guard = pins.Check
	}
	rd := &pinnedReader{src: src, r: src, pins: pins}
	switch {
	case gov != nil:
		rd.r = gov.NewReader(ctx, src, guard)
	case guard != nil && mode == GuardAlways:
		rd.r = &checkedReader{src: src, guard: guard}
	}
	return rd
}

// pinnedReader is the store.Reader that GetObject returns.
type pinnedReader struct {
	src  io.ReadCloser // the content
	r    io.Reader     // src as the caller reads it (paced, guarded)
	pins PinSet
	once sync.Once
}

func (p *pinnedReader) Read(b []byte) (int, error) { return p.r.Read(b) }

// Close stops reading the content and then releases the pins, exactly once;
// later calls do nothing.
func (p *pinnedReader) Close() error {
	var err error
	p.once.Do(func() {
		err = p.src.Close()
		p.pins.Release()
	})
	if err != nil {
		return fmt.Errorf("close object reader: %w", err)
	}
	return nil
}

// checkedReader is the guard without a governor: it checks before the first
// read and after every read, before handing the bytes over, which covers EOF.
// Its error is sticky.
type checkedReader struct {
	src     io.Reader
	guard   func() error
	started bool
	err     error
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if !c.started {
		c.started = true
		if err := c.guard(); err != nil {
			c.err = err
			return 0, err
		}
	}
	n, err := c.src.Read(p)
	if gerr := c.guard(); gerr != nil {
		// Bytes read after the loss are withheld: the caller gets a prefix.
		c.err = gerr
		return 0, gerr
	}
	if err != nil {
		c.err = err
	}
	return n, err
}
