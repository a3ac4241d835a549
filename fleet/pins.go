package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Pin errors.
var (
	// ErrTooManyPins: the per-instance cap of distinct pinned blobs is reached
	// (the HTTP layer answers 503 SlowDown).
	ErrTooManyPins = errors.New("too many pins")
	// ErrPinLost is what Guard reports once a pin is no longer valid.
	ErrPinLost = errors.New("pin lost")
	// ErrHandlesOutstanding: the pin session was lost and a new one may open
	// only after every pin of the old one is released. Errors wrapping it also
	// wrap ErrSessionLost.
	ErrHandlesOutstanding = errors.New("handles of the lost session still held")
	// ErrPinsClosed: Acquire after Close.
	ErrPinsClosed = errors.New("pins closed")
)

// Pinner protects blob content against GC while it is streamed.
type Pinner interface {
	// Acquire pins the blob. The caller then re-checks that the blob row still
	// exists (see the package documentation) and releases the pin when done.
	Acquire(ctx context.Context, blobID int64) (Pin, error)
}

// Pin is one stream's protection of a blob.
type Pin interface {
	// Valid is false once the pin is released or its session lost; it never
	// becomes true again. It is cheap enough to call for every quantum.
	Valid() bool
	// Release ends the protection; later calls do nothing.
	Release()
}

// Guard adapts a pin to throttle's guard func: nil while valid, an error
// wrapping ErrPinLost afterwards.
func Guard(p Pin) func() error {
	return func() error {
		if p.Valid() {
			return nil
		}
		return ErrPinLost
	}
}

// Defaults of PinsConfig.
const (
	DefaultMaxPins       = 1024
	DefaultRetryInterval = 20 * time.Millisecond
	DefaultReopenBackoff = time.Second
)

// PinsConfig configures SessionPins.
type PinsConfig struct {
	// Session configures the pin session; Role defaults to "s3gate-pins".
	Session SessionConfig
	// MaxPins caps the distinct blobs locked at once (each is one entry in
	// PostgreSQL's shared lock table, which is shared by the whole server).
	MaxPins int
	// RetryInterval paces retries while GC holds a blob's exclusive lock.
	RetryInterval time.Duration
	// ReopenBackoff is the least time between failed attempts to open the
	// session, so that a database outage does not turn every GET into a connect.
	ReopenBackoff time.Duration
	// OnError, if set, receives errors that have no caller to return to (a
	// lost session's close); the caller logs them.
	OnError func(error)

	// beforeStatement, if set (tests), runs on the session before each lock
	// ("lock") or unlock ("unlock") statement of key, outside the pins' mutex.
	beforeStatement func(op string, key int64)
}

// SessionPins holds content pins as shared advisory locks on one dedicated
// session, one lock per blob however many streams read it.
//
// Its mutex guards only in-process state and is never held across a round
// trip: a blob whose lock or unlock statement is in flight has an entry with a
// busy channel that later callers for the same blob wait on, while other blobs
// are pinned and released meanwhile (their statements queue on the session's
// connection, each waiting with its own context).
type SessionPins struct {
	cfg     PinsConfig
	metrics *Metrics

	mu         sync.Mutex // guards everything below; never held across a statement
	sess       *Session
	opening    chan struct{}       // non-nil while a session is being opened; closed after
	entries    map[int64]*pinEntry // by lock key
	openErr    error
	openFailed time.Time
	closed     bool
}

type pinEntry struct {
	key  int64
	refs int
	h    *Handle // the lock's handle on the session it was taken on
	// busy is non-nil while the lock or the unlock statement of this key is
	// in flight (refs is 0 then); it is closed when that statement ended.
	busy chan struct{}
}

type sessionPin struct {
	p        *SessionPins
	e        *pinEntry
	released atomic.Bool
}

// NewSessionPins prepares pins; the session opens on first use. It validates
// the session settings now so that unsafe ones stop start-up.
func NewSessionPins(cfg PinsConfig) (*SessionPins, error) {
	if cfg.Session.Role == "" {
		cfg.Session.Role = "s3gate-pins"
	}
	cfg.Session = cfg.Session.withDefaults()
	if err := cfg.Session.validate(); err != nil {
		return nil, err
	}
	if cfg.MaxPins == 0 {
		cfg.MaxPins = DefaultMaxPins
	}
	if cfg.MaxPins < 0 {
		return nil, fmt.Errorf("pins: negative cap %d", cfg.MaxPins)
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.ReopenBackoff <= 0 {
		cfg.ReopenBackoff = DefaultReopenBackoff
	}
	return &SessionPins{cfg: cfg, metrics: cfg.Session.Metrics, entries: make(map[int64]*pinEntry)}, nil
}

// Metrics are the counters of the pins and their sessions.
func (p *SessionPins) Metrics() *Metrics { return p.metrics }

// Open opens the session now (optional: Acquire opens it on demand), so that
// start-up fails early when the database is unreachable.
func (p *SessionPins) Open(ctx context.Context) error {
	for {
		p.mu.Lock()
		_, wait, err := p.sessionLocked(ctx)
		p.mu.Unlock()
		if wait == nil {
			return err
		}
		if err := waitFor(ctx, wait); err != nil {
			return fmt.Errorf("pins: wait for the session to open: %w", err)
		}
	}
}

// BackendPID is the backend of the current pin session, 0 if none is open.
func (p *SessionPins) BackendPID() uint32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess == nil {
		return 0
	}
	return p.sess.BackendPID()
}

// sessionLocked returns a valid session, opening one if there is none and no
// handle of a lost one is still held. Called with p.mu held; while it connects
// it releases p.mu, and callers that come meanwhile get wait, a channel closed
// when the attempt ended (then they try again).
func (p *SessionPins) sessionLocked(ctx context.Context) (sess *Session, wait <-chan struct{}, err error) {
	if p.closed {
		return nil, nil, ErrPinsClosed
	}
	if p.sess != nil && p.sess.Valid() {
		return p.sess, nil, nil
	}
	if p.opening != nil {
		return nil, p.opening, nil
	}
	if p.sess != nil {
		if n := p.sess.Handles(); n > 0 {
			return nil, nil, fmt.Errorf("pins: %w: %w: %d blob lock(s)", p.sess.Err(), ErrHandlesOutstanding, n)
		}
		// The socket of a lost session is already destroyed: no round trip.
		if err := p.sess.Close(); err != nil && p.cfg.OnError != nil {
			p.cfg.OnError(fmt.Errorf("pins: close lost session: %w", err))
		}
		p.sess = nil
	}
	if p.openErr != nil && time.Since(p.openFailed) < p.cfg.ReopenBackoff {
		return nil, nil, fmt.Errorf("pins: %w: last open failed %s ago: %w", ErrSessionLost,
			time.Since(p.openFailed).Round(time.Millisecond), p.openErr)
	}
	opening := make(chan struct{})
	p.opening = opening
	p.mu.Unlock()
	s, err := OpenSession(ctx, p.cfg.Session)
	p.mu.Lock()
	p.opening = nil
	close(opening)
	if err != nil {
		if ctx.Err() == nil {
			// One caller's cancellation is not a database outage: only real
			// failures start the backoff for everyone.
			p.openErr, p.openFailed = err, time.Now()
		}
		return nil, nil, fmt.Errorf("pins: %w: %w", ErrSessionLost, err)
	}
	if p.closed {
		if cerr := s.Close(); cerr != nil && p.cfg.OnError != nil {
			p.cfg.OnError(fmt.Errorf("pins: close session opened during Close: %w", cerr))
		}
		return nil, nil, ErrPinsClosed
	}
	p.openErr = nil
	p.sess = s
	return s, nil, nil
}

// waitFor waits until ch is closed or ctx ends.
func waitFor(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Acquire pins a blob: the first stream of a blob takes the shared lock, the
// others share it. While GC holds the blob's exclusive lock it retries until
// ctx ends. Errors wrap ErrTooManyPins, ErrSessionLost or ctx's error.
func (p *SessionPins) Acquire(ctx context.Context, blobID int64) (Pin, error) {
	key := BlobLockKey(blobID)
	for {
		pin, wait, busy, err := p.tryAcquire(ctx, blobID, key)
		switch {
		case err != nil || pin != nil:
			return pin, err
		case wait != nil:
			if err := waitFor(ctx, wait); err != nil {
				return nil, fmt.Errorf("pin blob %d: wait for its lock statement: %w", blobID, err)
			}
			continue
		case !busy:
			return nil, fmt.Errorf("pin blob %d: no pin and no reason", blobID) // unreachable
		}
		t := time.NewTimer(p.cfg.RetryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("pin blob %d: held exclusively (GC): %w", blobID, ctx.Err())
		case <-t.C:
		}
	}
}

// tryAcquire makes one attempt. It returns the pin; or wait (a statement for
// this blob, or the session's opening, is in flight: wait for it, then try
// again); or busy (GC holds the blob: retry later); or an error.
func (p *SessionPins) tryAcquire(ctx context.Context, blobID, key int64) (pin Pin, wait <-chan struct{}, busy bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sess, wait, err := p.sessionLocked(ctx)
	if err != nil || wait != nil {
		if err != nil {
			err = fmt.Errorf("pin blob %d: %w", blobID, err)
		}
		return nil, wait, false, err
	}
	if e := p.entries[key]; e != nil {
		if e.busy != nil {
			return nil, e.busy, false, nil
		}
		// The entry's session is the current valid one: a lost session's
		// entries block sessionLocked above until they are gone.
		e.refs++
		p.metrics.PinRefs.Add(1)
		return &sessionPin{p: p, e: e}, nil, false, nil
	}
	if len(p.entries) >= p.cfg.MaxPins {
		p.metrics.PinsRefused.Add(1)
		return nil, nil, false, fmt.Errorf("pin blob %d: %w (cap %d distinct blobs)", blobID, ErrTooManyPins, p.cfg.MaxPins)
	}
	h, err := sess.Hold()
	if err != nil {
		return nil, nil, false, fmt.Errorf("pin blob %d: %w", blobID, err)
	}
	// The entry counts against the cap while its statement runs, and makes
	// other streams of this blob wait for it instead of locking twice.
	e := &pinEntry{key: key, h: h, busy: make(chan struct{})}
	p.entries[key] = e
	p.mu.Unlock()
	var got bool
	err = sess.exec(ctx, func(qctx context.Context, conn *pgx.Conn) error {
		if hook := p.cfg.beforeStatement; hook != nil {
			hook("lock", key)
		}
		return conn.QueryRow(qctx, `SELECT pg_try_advisory_lock_shared($1)`, key).Scan(&got)
	})
	p.mu.Lock()
	done := e.busy
	e.busy = nil
	defer close(done) // before the deferred unlock: waiters then find the entry settled
	if err != nil || !got {
		delete(p.entries, key)
		h.Release()
		if err != nil {
			return nil, nil, false, fmt.Errorf("pin blob %d: lock: %w", blobID, err)
		}
		return nil, nil, true, nil
	}
	e.refs = 1
	p.metrics.PinsHeld.Add(1)
	p.metrics.PinRefs.Add(1)
	return &sessionPin{p: p, e: e}, nil, false, nil
}

func (sp *sessionPin) Valid() bool { return !sp.released.Load() && sp.e.h.Valid() }

func (sp *sessionPin) Release() {
	if !sp.released.CompareAndSwap(false, true) {
		return
	}
	sp.p.release(sp.e)
}

// release drops one reference; the last one unlocks, outside the mutex (the
// entry stays, busy, until the unlock has run, so that a new pin of the blob
// waits for it). A failed unlock is a loss of the session: a lock we cannot
// account for would block GC indefinitely, and destroying the session
// releases it.
func (p *SessionPins) release(e *pinEntry) {
	p.mu.Lock()
	p.metrics.PinRefs.Add(-1)
	e.refs--
	if e.refs > 0 {
		p.mu.Unlock()
		return
	}
	s := e.h.Session()
	if !s.Valid() {
		// The server released the lock with the session.
		delete(p.entries, e.key)
		p.metrics.PinsHeld.Add(-1)
		e.h.Release()
		p.mu.Unlock()
		return
	}
	busy := make(chan struct{})
	e.busy = busy
	p.mu.Unlock()

	var ok bool
	err := s.exec(context.Background(), func(qctx context.Context, conn *pgx.Conn) error {
		if hook := p.cfg.beforeStatement; hook != nil {
			hook("unlock", e.key)
		}
		return conn.QueryRow(qctx, `SELECT pg_advisory_unlock_shared($1)`, e.key).Scan(&ok)
	})
	if err == nil && !ok {
		err = fmt.Errorf("pg_advisory_unlock_shared(%d) found no lock", e.key)
	}
	if err != nil {
		s.fail(fmt.Errorf("unlock pin: %w", err))
	}
	// The handle goes first: a caller waiting on busy to open a new session
	// after a loss must find no handle of the old one.
	e.h.Release()
	p.mu.Lock()
	delete(p.entries, e.key)
	e.busy = nil
	p.metrics.PinsHeld.Add(-1)
	p.mu.Unlock()
	close(busy)
}

// Close invalidates every pin and closes the session. Pins still held become
// invalid; releasing them later is harmless.
func (p *SessionPins) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.sess == nil {
		return nil
	}
	err := p.sess.Close()
	return err
}
