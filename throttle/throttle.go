// Package throttle paces object streams: a BandwidthGovernor with a global cap
// and a per-request cap (token buckets from golang.org/x/time/rate) and the
// paced, guarded reader that the GET path streams through.
//
// The reader releases data in quanta (DefaultQuantum, 64 KiB). Its guard (the
// pin check) runs before the first read from the source (inner guard), for
// every quantum after the governor released it and before it is handed to the
// caller (outer guard: a chunk already read may wait for bandwidth after the pin
// is lost), and at the source's EOF. The governor checks its own closure after
// every grant and at EOF, an empty source included. With no caps the reader
// adds no copy and no allocation per read.
package throttle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// DefaultQuantum is the largest slice of data released at once.
const DefaultQuantum = 64 << 10

// ErrClosed is returned by readers of a closed governor.
var ErrClosed = errors.New("bandwidth governor closed")

// Config configures a BandwidthGovernor. Rates are in bytes per second; 0 means
// unlimited.
type Config struct {
	Global     int64
	PerRequest int64
	// Quantum is the largest slice released at once (and the granularity of the
	// guard); 0 means DefaultQuantum.
	Quantum int
}

// Metrics are the governor's counters, as plain atomics for the caller to
// export.
type Metrics struct {
	// PacedBytes counts bytes handed to callers by the governor's readers.
	PacedBytes atomic.Int64
	// ThrottledNanos is the total time readers spent waiting for tokens.
	ThrottledNanos atomic.Int64
}

// BandwidthGovernor hands out bandwidth to readers. Safe for concurrent use.
type BandwidthGovernor struct {
	quantum    int
	perRequest int64
	global     *rate.Limiter // nil when unlimited
	closed     atomic.Bool
	metrics    Metrics
}

// New returns a governor. Negative rates are an error.
func New(cfg Config) (*BandwidthGovernor, error) {
	if cfg.Global < 0 || cfg.PerRequest < 0 {
		return nil, fmt.Errorf("throttle: negative bandwidth (global %d, per request %d)", cfg.Global, cfg.PerRequest)
	}
	if cfg.Quantum < 0 {
		return nil, fmt.Errorf("throttle: negative quantum %d", cfg.Quantum)
	}
	if cfg.Quantum == 0 {
		cfg.Quantum = DefaultQuantum
	}
	g := &BandwidthGovernor{quantum: cfg.Quantum, perRequest: cfg.PerRequest}
	if cfg.Global > 0 {
		g.global = newLimiter(cfg.Global, cfg.Quantum)
	}
	return g, nil
}

// newLimiter makes a bucket whose burst is one quantum, or the rate if that is
// smaller, so that no single grant is worth more than a second. A new limiter
// starts full.
func newLimiter(bps int64, quantum int) *rate.Limiter {
	burst := int64(quantum)
	if bps < burst {
		burst = bps
	}
	return rate.NewLimiter(rate.Limit(bps), int(burst))
}

// Metrics returns the governor's counters.
func (g *BandwidthGovernor) Metrics() *Metrics { return &g.metrics }

// Close closes the governor: its readers fail with ErrClosed at their next
// grant or at EOF.
func (g *BandwidthGovernor) Close() { g.closed.Store(true) }

// Unpaced reports whether the governor sets no cap: its readers then only
// guard, count and check closure, which a stream may do itself (ADR 020).
func (g *BandwidthGovernor) Unpaced() bool { return g.perRequest == 0 && g.global == nil }

// Closed reports whether Close was called.
func (g *BandwidthGovernor) Closed() bool { return g.closed.Load() }

func (g *BandwidthGovernor) checkClosed() error {
	if g.closed.Load() {
		return ErrClosed
	}
	return nil
}

// NewReader returns src paced by the governor and guarded by guard (nil: no
// guard). A guard error, a closed governor or ctx's end aborts the stream with
// that error, which every later Read returns too. Bytes are handed to the
// caller only after the guard approved them.
func (g *BandwidthGovernor) NewReader(ctx context.Context, src io.Reader, guard func() error) io.Reader {
	r := &reader{ctx: ctx, g: g, src: src, guard: guard}
	if g.perRequest > 0 {
		r.perRequest = newLimiter(g.perRequest, g.quantum)
	}
	return r
}

type reader struct {
	ctx        context.Context
	g          *BandwidthGovernor
	src        io.Reader
	guard      func() error
	perRequest *rate.Limiter // nil when unlimited
	started    bool
	eof        bool  // the source reported EOF with the last bytes delivered
	err        error // sticky
}

func (r *reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !r.started {
		r.started = true
		if err := r.check(); err != nil { // inner guard
			return r.fail(err)
		}
	}
	if r.eof {
		return r.atEOF()
	}
	if len(p) > r.g.quantum {
		p = p[:r.g.quantum]
	}
	// Read straight into the caller's buffer: the bytes count as handed over
	// only when Read returns n, after pacing and the outer guard.
	n, err := r.src.Read(p)
	if n > 0 {
		if perr := r.pace(n); perr != nil {
			return r.fail(perr)
		}
		if gerr := r.check(); gerr != nil { // outer guard
			return r.fail(gerr)
		}
		r.g.metrics.PacedBytes.Add(int64(n))
		switch {
		case err == io.EOF:
			r.eof = true
		case err != nil:
			r.err = fmt.Errorf("read source: %w", err)
			return n, r.err
		}
		return n, nil
	}
	switch {
	case err == io.EOF:
		return r.atEOF()
	case err != nil:
		return r.fail(fmt.Errorf("read source: %w", err))
	}
	return 0, nil
}

// atEOF checks closure and the guard once more before reporting EOF, so that a
// stream never looks complete when its protection or governor went away.
func (r *reader) atEOF() (int, error) {
	if err := r.g.checkClosed(); err != nil {
		return r.fail(err)
	}
	if err := r.check(); err != nil {
		return r.fail(err)
	}
	r.err = io.EOF
	return 0, io.EOF
}

func (r *reader) check() error {
	if r.guard == nil {
		return nil
	}
	return r.guard()
}

func (r *reader) fail(err error) (int, error) {
	r.err = err
	return 0, err
}

// pace waits for n bytes' worth of tokens, per request first (so a slow stream
// does not sit on global tokens), then global, each wait clamped to the
// bucket's burst because WaitN fails beyond it; closure is checked after every
// grant.
func (r *reader) pace(n int) error {
	if err := r.ctx.Err(); err != nil {
		return fmt.Errorf("paced read: %w", err)
	}
	for _, lim := range [2]*rate.Limiter{r.perRequest, r.g.global} {
		if lim == nil {
			continue
		}
		burst := lim.Burst()
		for rem := n; rem > 0; {
			k := min(rem, burst)
			start := time.Now()
			err := lim.WaitN(r.ctx, k)
			r.g.metrics.ThrottledNanos.Add(int64(time.Since(start)))
			if err != nil {
				return fmt.Errorf("paced read: %w", err)
			}
			if err := r.g.checkClosed(); err != nil {
				return err
			}
			rem -= k
		}
	}
	return r.g.checkClosed()
}
