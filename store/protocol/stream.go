package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/throttle"
)

// Pinning is how a response stream protects a blob when it reaches it.
type Pinning struct {
	// Acquire pins a blob. Its errors wrap store's sentinels (a full pin
	// table is store.ErrSlowDown).
	Acquire func(ctx context.Context, blobID int64) (fleet.Pin, error)
	// Exists re-checks, with a fresh statement (not the resolving snapshot),
	// that the blob row still exists.
	Exists func(ctx context.Context, blobID int64) (bool, error)
}

// ErrVanished is what PinFirst reports when the pinned blob's row is gone: the
// object changed after its metadata was resolved, so the caller resolves
// again. Mid-stream the same cause aborts the stream (wrapping
// store.ErrUnavailable).
var ErrVanished = errors.New("blob vanished after the object was resolved")

// Mid-stream pins wait this long at most for a free slot when the pin table is
// full (a stream that already sent headers would otherwise be cut off by
// newer requests taking the slot it just gave back).
const (
	midStreamPinWait = 5 * time.Second
	midStreamPinPoll = 20 * time.Millisecond
)

// PinFirst pins blobID and re-checks that its row still exists, the step
// before a response's headers: a pin already lost, or a blob already gone, is
// an error now (ErrVanished: resolve again) rather than a truncated body.
func (p Pinning) PinFirst(ctx context.Context, blobID int64) (fleet.Pin, error) {
	pin, err := p.Acquire(ctx, blobID)
	if errors.Is(err, fleet.ErrBlobGone) { // a row pin found no blob row
		return nil, fmt.Errorf("blob %d: %w", blobID, ErrVanished)
	}
	if err != nil {
		return nil, err
	}
	ok, err := p.Exists(ctx, blobID)
	if err == nil && !ok {
		err = fmt.Errorf("blob %d: %w", blobID, ErrVanished)
	}
	if err == nil && !pin.Valid() {
		err = fmt.Errorf("content pin of blob %d: %w: %w", blobID, store.ErrUnavailable, fleet.ErrPinLost)
	}
	if err != nil {
		pin.Release()
		return nil, err
	}
	return pin, nil
}

// pinNext is PinFirst in the middle of a stream: a full pin table is waited
// out for a while, and a vanished blob aborts the stream.
func (p Pinning) pinNext(ctx context.Context, blobID int64) (fleet.Pin, error) {
	deadline := time.Now().Add(midStreamPinWait)
	for {
		pin, err := p.PinFirst(ctx, blobID)
		switch {
		case err == nil:
			return pin, nil
		case errors.Is(err, ErrVanished):
			// Referenced blobs are never collected; this is a GC race the
			// stream cannot repair: end it short, never with other bytes.
			return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		case !errors.Is(err, store.ErrSlowDown) || time.Now().After(deadline):
			return nil, err
		}
		t := time.NewTimer(midStreamPinPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("wait for a pin of blob %d: %w", blobID, ctx.Err())
		case <-t.C:
		}
	}
}

// PinnedSegments reads segments in order and pins only what it streams: a
// segment whose blob needs protection is pinned, re-checked and only then
// opened when the stream reaches it, and the pin of the previous blob is
// released at that point. So a stream holds at most one pin whatever the
// number of parts, and the previous blob's pin lasts until the bytes read
// from it were approved by the guard (the next Read); the last one lasts
// until Close.
type PinnedSegments[S any] struct {
	ctx    context.Context
	segs   []S
	blobOf func(S) (id int64, needsPin bool)
	open   func(context.Context, S) (io.ReadCloser, error)
	pins   Pinning

	cur    io.ReadCloser
	pin    fleet.Pin // the one pin held, of blob pinID; nil if none
	pinID  int64
	err    error
	closed error
}

// NewPinnedSegments returns a stream of segs. first, if not nil, is the pin of
// blob firstID that the caller took (with PinFirst) before the headers; the
// stream owns it from now on. engine names the engine in the error of a read
// after Close.
func NewPinnedSegments[S any](ctx context.Context, engine string, segs []S, blobOf func(S) (int64, bool),
	open func(context.Context, S) (io.ReadCloser, error), pins Pinning, first fleet.Pin, firstID int64) *PinnedSegments[S] {
	return &PinnedSegments[S]{ctx: ctx, segs: segs, blobOf: blobOf, open: open, pins: pins,
		pin: first, pinID: firstID, closed: fmt.Errorf("%s: read after close", engine)}
}

// FirstPinned returns the blob of the first segment that needs a pin.
func FirstPinned[S any](segs []S, blobOf func(S) (int64, bool)) (int64, bool) {
	for _, s := range segs {
		if id, ok := blobOf(s); ok {
			return id, true
		}
	}
	return 0, false
}

// Guard is the stream's pin check: nil while the held pin (if any) is valid.
func (m *PinnedSegments[S]) Guard() error {
	if m.pin != nil && !m.pin.Valid() {
		return fmt.Errorf("content pin of blob %d: %w: %w", m.pinID, store.ErrUnavailable, fleet.ErrPinLost)
	}
	return nil
}

func (m *PinnedSegments[S]) releasePin() {
	if m.pin != nil {
		m.pin.Release()
		m.pin = nil
	}
}

// advance opens the next segment, pinning its blob first if it needs one.
func (m *PinnedSegments[S]) advance() error {
	s := m.segs[0]
	m.segs = m.segs[1:]
	if id, need := m.blobOf(s); need && (m.pin == nil || id != m.pinID) {
		m.releasePin()
		pin, err := m.pins.pinNext(m.ctx, id)
		if err != nil {
			return err
		}
		m.pin, m.pinID = pin, id
	}
	rc, err := m.open(m.ctx, s)
	if err != nil {
		return err
	}
	m.cur = rc
	return nil
}

// Read implements io.Reader. Errors are sticky.
func (m *PinnedSegments[S]) Read(p []byte) (int, error) {
	for {
		if m.err != nil {
			return 0, m.err
		}
		if m.cur == nil {
			if len(m.segs) == 0 {
				// The last pin stays until Close: the guard checks it once
				// more at EOF.
				return 0, io.EOF
			}
			if err := m.advance(); err != nil {
				m.err = err
				return 0, err
			}
		}
		n, err := m.cur.Read(p)
		if errors.Is(err, io.EOF) {
			cerr := m.cur.Close()
			m.cur = nil
			if cerr != nil {
				m.err = fmt.Errorf("close part reader: %w", cerr)
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			m.err = err
		}
		return n, err
	}
}

// Close closes the open segment and releases the pin; later reads fail.
func (m *PinnedSegments[S]) Close() error {
	m.segs = nil
	if m.err == nil {
		m.err = m.closed
	}
	var err error
	if m.cur != nil {
		if cerr := m.cur.Close(); cerr != nil {
			err = fmt.Errorf("close part reader: %w", cerr)
		}
		m.cur = nil
	}
	m.releasePin()
	return err
}

// GuardedStream wraps a PinnedSegments for a response: paced by gov (if not
// nil) and guarded by the stream's pins as mode says; Close closes the stream
// (releasing its pin) exactly once. files says that segments may be files
// (FileSender): when gov sets no cap, the reader is then also an io.WriterTo
// that hands them to the writer (sendfile) under the same checks (ADR 020).
func GuardedStream[S any](ctx context.Context, src *PinnedSegments[S], gov *throttle.BandwidthGovernor, mode GuardMode, files bool) store.Reader {
	rd := &pinnedReader{src: src, r: src}
	var guard func() error
	switch {
	case gov != nil:
		rd.r = gov.NewReader(ctx, src, src.Guard)
		guard = src.Guard
	case mode == GuardAlways:
		rd.r = &checkedReader{src: src, guard: src.Guard}
		guard = src.Guard
	}
	if files && (gov == nil || gov.Unpaced()) {
		return &sendingStream[S]{pinnedReader: rd, src: src, gov: gov, guard: guard}
	}
	return rd
}

// FileSender is content in a file that can hand the file itself to a writer's
// ReadFrom, so that net/http's connection sends it with sendfile, never
// through a Read (store/localfs).
type FileSender interface {
	// SendTo sends at most max bytes of what is left by dst.ReadFrom and
	// returns io.EOF (beside the count) once nothing is left.
	SendTo(dst io.ReaderFrom, max int64) (int64, error)
}

// sendSlice is the most bytes sent between two checks: the governor's
// quantum, so a stream is guarded as often as a Read-served one.
const sendSlice = throttle.DefaultQuantum

// sendingStream is an unpaced response stream whose file segments go to the
// writer by sendfile. Its checks are those of the Read path (ADR 004, 020):
// ctx, the governor's closure and the guard before the first slice and
// before every further one, and once more at the end; the pins (one per
// blob, taken as the stream reaches it) and Close are PinnedSegments' own.
type sendingStream[S any] struct {
	*pinnedReader
	src   *PinnedSegments[S]
	gov   *throttle.BandwidthGovernor // nil or without caps
	guard func() error                // nil: none
}

// WriteTo implements io.WriterTo. Segments that are not files, and every
// segment when dst is not an io.ReaderFrom, are copied through the guarded
// Read path. Errors are sticky (the stream's).
func (s *sendingStream[S]) WriteTo(dst io.Writer) (int64, error) {
	rf, ok := dst.(io.ReaderFrom)
	if !ok {
		return io.Copy(dst, struct{ io.Reader }{s.pinnedReader})
	}
	m := s.src
	var total int64
	for {
		if err := s.check(); err != nil {
			m.err = err
			return total, err
		}
		if m.err != nil {
			return total, m.err
		}
		if m.cur == nil {
			if len(m.segs) == 0 {
				return total, nil // checked above, after the last bytes
			}
			if err := m.advance(); err != nil {
				m.err = err
				return total, err
			}
		}
		fs, isFile := m.cur.(FileSender)
		var n int64
		var err error
		if isFile {
			n, err = fs.SendTo(rf, sendSlice)
		} else {
			n, err = s.copySegment(dst)
		}
		total += n
		if s.gov != nil {
			s.gov.Metrics().PacedBytes.Add(n)
		}
		if errors.Is(err, io.EOF) {
			cerr := m.cur.Close()
			m.cur = nil
			if cerr != nil {
				m.err = fmt.Errorf("close part reader: %w", cerr)
			}
			continue
		}
		if err != nil {
			m.err = err
			return total, err
		}
	}
}

// copySegment copies the rest of the current segment through the guard, by
// Read, and returns io.EOF when it is done.
func (s *sendingStream[S]) copySegment(dst io.Writer) (int64, error) {
	var r io.Reader = struct{ io.Reader }{s.src.cur}
	if s.guard != nil {
		r = &checkedReader{src: r, guard: s.guard}
	}
	n, err := io.CopyBuffer(struct{ io.Writer }{dst}, r, make([]byte, sendSlice))
	if err == nil {
		err = io.EOF
	}
	return n, err
}

// check is what the Read path checks per quantum and at EOF.
func (s *sendingStream[S]) check() error {
	if err := s.src.ctx.Err(); err != nil {
		return fmt.Errorf("send object: %w", err)
	}
	if s.gov != nil && s.gov.Closed() {
		return throttle.ErrClosed
	}
	if s.guard != nil {
		return s.guard()
	}
	return nil
}
