// Package lease runs background work at most once across a fleet: a row per
// job kind in PostgreSQL, with a generation (the fence) and an expiry kept in
// database time.
//
// The protocol (design §3, "Leases"):
//   - Acquire takes the row if it is expired or free, bumping the generation,
//     with an expiry of TTL (30 s) computed by clock_timestamp() in SQL; the
//     holder then confirms its reservation by re-reading holder and generation
//     before it starts.
//   - One renewal is in flight at most: the next one is scheduled RenewInterval
//     after the previous answer, never on a ticker that could queue requests.
//     Renewals are fenced on the generation and never revive an expired row.
//   - Locally, the grant is valid for Window (8 s) after the SEND time of the
//     last confirmed request (the acquisition counts as one); the local window
//     is shorter than the SQL expiry, so the grant is gone here before anyone
//     else can take it there. A lost grant is never revived: a late "ok" is
//     ignored. Loss cancels the grant's context, which is the job's context.
//   - Finish reports false when the grant was no longer ours; the caller must
//     not count the job as done.
package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of Config.
const (
	DefaultTTL            = 30 * time.Second
	DefaultWindow         = 8 * time.Second
	DefaultRenewInterval  = 2 * time.Second
	DefaultRetryInterval  = 500 * time.Millisecond
	DefaultRequestTimeout = 2 * time.Second
)

// Errors of Acquire and of a grant's context.
var (
	// ErrHeld means another holder has the lease (or took it between our
	// acquisition and its confirmation).
	ErrHeld = errors.New("lease: held by another holder")
	// ErrLost is the cause of a grant's context when the grant was lost: no
	// confirmed renewal within the window, or the row was no longer ours.
	ErrLost = errors.New("lease: lost")
	// ErrFinished is the cause of a grant's context after Finish.
	ErrFinished = errors.New("lease: finished")
)

// Store is the SQL side of the lease table. PGStore implements it; tests
// inject their own. Every method is one short statement in database time.
type Store interface {
	// Acquire takes the row of kind for holder if it is free or expired, with
	// a new generation and an expiry ttl from now; ok is false if it is held.
	Acquire(ctx context.Context, kind, holder string, ttl time.Duration) (gen int64, ok bool, err error)
	// Confirm re-reads the row: true if holder and generation are ours and it
	// has not expired.
	Confirm(ctx context.Context, kind, holder string, gen int64) (bool, error)
	// Renew extends an unexpired row of ours (same holder and generation) by
	// ttl from now; false if the row is expired or no longer ours.
	Renew(ctx context.Context, kind, holder string, gen int64, ttl time.Duration) (bool, error)
	// Release frees an unexpired row of ours; false if it was not ours.
	Release(ctx context.Context, kind, holder string, gen int64) (bool, error)
}

// Clock is the time source of the local window; tests inject a fake one.
type Clock interface {
	Now() time.Time
	// After delivers the time once d has elapsed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// RealClock is the wall clock (monotonic readings).
var RealClock Clock = realClock{}

// Config configures Acquire. Zero fields take the defaults above.
type Config struct {
	Kind   string // job kind, e.g. "gc"
	Holder string // this instance's identity
	// TTL is the expiry set in SQL by acquisitions and renewals (30 s).
	TTL time.Duration
	// Window is how long the grant stays valid locally after the send time of
	// the last confirmed request (8 s). It must be well below TTL.
	Window time.Duration
	// RenewInterval is the pause between an answer and the next renewal (2 s).
	RenewInterval time.Duration
	// RetryInterval is the pause after a failed renewal (0.5 s).
	RetryInterval time.Duration
	// RequestTimeout bounds one renewal (2 s, measured on Clock): a request
	// that times out is cancelled and counts as failed.
	RequestTimeout time.Duration
	Clock          Clock
}

func (c Config) withDefaults() (Config, error) {
	if c.Kind == "" || c.Holder == "" {
		return c, errors.New("lease: kind and holder are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.TTL, DefaultTTL)
	def(&c.Window, DefaultWindow)
	def(&c.RenewInterval, DefaultRenewInterval)
	def(&c.RetryInterval, DefaultRetryInterval)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	if c.Clock == nil {
		c.Clock = RealClock
	}
	// The local window must end before the SQL expiry, or another holder
	// could take the row while we still think we hold it.
	if c.Window >= c.TTL {
		return c, fmt.Errorf("lease: window %s must be shorter than the TTL %s", c.Window, c.TTL)
	}
	return c, nil
}

// Grant is a held lease. Its context is cancelled when the grant is lost or
// finished (or the parent context ends).
type Grant struct {
	cfg   Config
	st    Store
	gen   int64
	ctx   context.Context
	cause context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time // end of the local window
	lost     bool

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup // the renewal loop and its in-flight request
}

// Acquire takes the lease of cfg.Kind for cfg.Holder and confirms it. It
// returns ErrHeld if another holder has it. The grant renews itself until
// Finish; the returned grant's Context is the job's context.
func Acquire(ctx context.Context, st Store, cfg Config) (*Grant, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	sent := cfg.Clock.Now()
	gen, ok, err := st.Acquire(ctx, cfg.Kind, cfg.Holder, cfg.TTL)
	if err != nil {
		return nil, fmt.Errorf("lease %s: acquire: %w", cfg.Kind, err)
	}
	if !ok {
		return nil, fmt.Errorf("lease %s: %w", cfg.Kind, ErrHeld)
	}
	confirmed, err := st.Confirm(ctx, cfg.Kind, cfg.Holder, gen)
	if err != nil {
		return nil, fmt.Errorf("lease %s: confirm generation %d: %w", cfg.Kind, gen, err)
	}
	if !confirmed {
		return nil, fmt.Errorf("lease %s: generation %d not confirmed: %w", cfg.Kind, gen, ErrHeld)
	}
	g := &Grant{cfg: cfg, st: st, gen: gen, deadline: sent.Add(cfg.Window), stop: make(chan struct{})}
	g.ctx, g.cause = context.WithCancelCause(ctx)
	if !g.Valid() {
		// Acquisition and confirmation took longer than the window: the grant
		// was never safely ours. Release what SQL gave us (best effort: it
		// expires anyway) and report the loss.
		g.cause(ErrLost)
		if _, rerr := st.Release(ctx, cfg.Kind, cfg.Holder, gen); rerr != nil {
			return nil, errors.Join(fmt.Errorf("lease %s: %w during acquisition", cfg.Kind, ErrLost), rerr)
		}
		return nil, fmt.Errorf("lease %s: %w during acquisition", cfg.Kind, ErrLost)
	}
	g.wg.Add(1)
	go g.renewLoop()
	return g, nil
}

// Context is cancelled (cause ErrLost or ErrFinished) when the grant ends.
func (g *Grant) Context() context.Context { return g.ctx }

// Generation is the fencing token of this grant.
func (g *Grant) Generation() int64 { return g.gen }

// Valid reports whether the grant is still ours locally: not lost, and within
// the window of the last confirmed request. Once false it stays false.
func (g *Grant) Valid() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.validLocked()
}

// Err is nil while the grant is valid and ErrLost afterwards.
func (g *Grant) Err() error {
	if g.Valid() {
		return nil
	}
	return ErrLost
}

func (g *Grant) validLocked() bool {
	if g.lost {
		return false
	}
	if !g.cfg.Clock.Now().Before(g.deadline) {
		g.loseLocked()
		return false
	}
	return true
}

func (g *Grant) loseLocked() {
	if !g.lost {
		g.lost = true
		g.cause(ErrLost)
	}
}

func (g *Grant) lose() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.loseLocked()
}

// confirmed records a successful renewal sent at sent. A grant already lost,
// or whose window closed before the answer came, is not revived.
func (g *Grant) confirmed(sent time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.validLocked() {
		return
	}
	if d := sent.Add(g.cfg.Window); d.After(g.deadline) {
		g.deadline = d
	}
}

func (g *Grant) untilDeadline() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.deadline.Sub(g.cfg.Clock.Now())
}

type renewResult struct {
	ok  bool
	err error
}

// renewLoop renews the grant with at most one request in flight until it is
// stopped, lost, or its context ends.
func (g *Grant) renewLoop() {
	defer g.wg.Done()
	clk := g.cfg.Clock
	pause := g.cfg.RenewInterval
	for {
		expire := clk.After(g.untilDeadline())
		select {
		case <-g.stop:
			return
		case <-g.ctx.Done():
			return
		case <-expire:
			g.lose()
			return
		case <-clk.After(pause):
		}
		if !g.Valid() {
			return
		}
		sent := clk.Now()
		rctx, cancel := context.WithCancel(g.ctx)
		res := make(chan renewResult, 1)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			ok, err := g.st.Renew(rctx, g.cfg.Kind, g.cfg.Holder, g.gen, g.cfg.TTL)
			res <- renewResult{ok, err}
		}()
		timeout := clk.After(g.cfg.RequestTimeout)
		var r renewResult
	wait:
		for {
			select {
			case r = <-res:
				break wait
			case <-timeout:
				// Cancel and keep waiting for the answer: the next request
				// starts only after this one returned (one in flight at most).
				cancel()
				timeout = nil
			case <-expire:
				cancel()
				g.lose()
				return
			case <-g.stop:
				cancel()
				return
			}
		}
		cancel()
		switch {
		case r.err != nil:
			// A failed request is not a loss by itself; the window decides.
			pause = g.cfg.RetryInterval
		case !r.ok:
			// The row is expired or someone else's: gone for good.
			g.lose()
			return
		default:
			g.confirmed(sent)
			pause = g.cfg.RenewInterval
		}
	}
}

// Finish stops renewing and releases the lease. It returns true only if the
// grant was still ours, locally and in SQL, up to the release: false means
// the job ran (partly) unprotected and must not be counted as done. The
// grant's context is cancelled afterwards.
func (g *Grant) Finish(ctx context.Context) (bool, error) {
	g.stopOnce.Do(func() { close(g.stop) })
	g.wg.Wait()
	valid := g.Valid()
	g.mu.Lock()
	g.lost = true // no use of this grant after Finish
	g.mu.Unlock()
	defer g.cause(ErrFinished)
	// Release even a locally lost grant: the generation fences it, and a
	// released row lets the next holder start without waiting for the expiry.
	released, err := g.st.Release(ctx, g.cfg.Kind, g.cfg.Holder, g.gen)
	if err != nil {
		return false, fmt.Errorf("lease %s: release generation %d: %w", g.cfg.Kind, g.gen, err)
	}
	return valid && released, nil
}
