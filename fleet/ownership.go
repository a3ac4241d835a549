package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Ownership errors.
var (
	// ErrClaimHeld: another instance holds the writer claim and Claim was told
	// not to wait.
	ErrClaimHeld = errors.New("writer claim held by another instance")
	// ErrAlreadyClaimed: Claim on an Ownership that already ran one.
	ErrAlreadyClaimed = errors.New("ownership already claimed")
	// ErrOwnershipClosed: Claim after (or interrupted by) Close.
	ErrOwnershipClosed = errors.New("ownership closed")
)

// DefaultPollInterval is how often a standby retries the claim.
const DefaultPollInterval = time.Second

// OwnershipConfig configures Ownership.
type OwnershipConfig struct {
	// Session configures the ownership session; Role defaults to "s3gate-owner".
	Session SessionConfig
	// PollInterval paces a standby's pg_try_advisory_lock attempts.
	PollInterval time.Duration
	// Key is the claim's advisory lock key; 0 means OwnerLockKey().
	Key int64
	// OnError, if set, receives errors a waiting standby recovers from (its
	// session lost while waiting, a failed connect); the caller logs them.
	OnError func(error)
}

// Ownership is the single-instance writer claim: a session-level exclusive
// advisory lock held on its own session. The claim holds while Valid; Lost is
// closed when its session is lost, and the process must then stop its work.
type Ownership struct {
	cfg OwnershipConfig

	mu       sync.Mutex
	sess     *Session
	claim    *Handle
	lostCh   chan struct{} // the claimed session's Lost, or nil before the claim
	closed   bool
	claiming bool // a Claim is running (it drops mu while it waits)
}

// NewOwnership validates the settings; nothing connects until Claim.
func NewOwnership(cfg OwnershipConfig) (*Ownership, error) {
	if cfg.Session.Role == "" {
		cfg.Session.Role = "s3gate-owner"
	}
	cfg.Session = cfg.Session.withDefaults()
	if err := cfg.Session.validate(); err != nil {
		return nil, err
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Key == 0 {
		cfg.Key = OwnerLockKey()
	}
	return &Ownership{cfg: cfg}, nil
}

// Claim takes the writer claim. If another instance holds it, Claim returns an
// error wrapping ErrClaimHeld when wait is false, or waits as a standby
// (retrying every PollInterval, reopening its session if it is lost while
// waiting) until it gets the claim or ctx ends.
func (o *Ownership) Claim(ctx context.Context, wait bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.claim != nil {
		return ErrAlreadyClaimed
	}
	if o.claiming {
		return errors.New("claim ownership: a Claim is already running")
	}
	o.claiming = true
	defer func() { o.claiming = false }()
	for {
		if o.closed {
			o.dropLocked()
			return fmt.Errorf("claim ownership: %w", ErrOwnershipClosed)
		}
		got, err := o.tryLocked(ctx)
		switch {
		case got:
			return nil
		case errors.Is(err, ErrModeConflict): // waiting would not end it
			o.dropLocked()
			return err
		case !wait && err != nil:
			o.dropLocked()
			return err
		case !wait:
			o.dropLocked()
			return fmt.Errorf("claim ownership: %w", ErrClaimHeld)
		case err != nil && o.cfg.OnError != nil:
			o.cfg.OnError(fmt.Errorf("standby: %w", err))
		}
		// Wait without the lock so that Close and the accessors do not block
		// behind a standby.
		o.mu.Unlock()
		t := time.NewTimer(o.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			o.mu.Lock()
			o.dropLocked()
			return fmt.Errorf("claim ownership: %w", ctx.Err())
		case <-t.C:
		}
		o.mu.Lock()
	}
}

// tryLocked makes one attempt, opening a session if there is no valid one.
func (o *Ownership) tryLocked(ctx context.Context) (bool, error) {
	if o.sess != nil && !o.sess.Valid() {
		o.dropLocked()
	}
	if o.sess == nil {
		s, err := OpenSession(ctx, o.cfg.Session)
		if err != nil {
			return false, fmt.Errorf("claim ownership: %w", err)
		}
		o.sess = s
	}
	s := o.sess
	h, err := s.Hold()
	if err != nil {
		return false, fmt.Errorf("claim ownership: %w", err)
	}
	var got bool
	err = s.exec(ctx, func(qctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(qctx, `SELECT pg_try_advisory_lock($1)`, o.cfg.Key).Scan(&got)
	})
	if err == nil && got {
		// After the lock, so that a fleet instance registering at the same
		// moment sees one of the two: this claim there, or its row here.
		if err = refuseFleet(ctx, s, o.cfg.Key); err != nil {
			// The claim may still be held if the check failed: closing
			// the session gives it back whatever happened.
			h.Release()
			o.dropLocked()
			return false, fmt.Errorf("claim ownership: %w", err)
		}
	}
	if err != nil || !got {
		h.Release()
		if err != nil {
			return false, fmt.Errorf("claim ownership: %w", err)
		}
		return false, nil
	}
	o.claim = h
	o.lostCh = make(chan struct{})
	go func(lost <-chan struct{}, out chan struct{}) {
		<-lost
		close(out)
	}(s.Lost(), o.lostCh)
	return true, nil
}

// dropLocked closes a session that holds no claim.
func (o *Ownership) dropLocked() {
	if o.sess == nil {
		return
	}
	if err := o.sess.Close(); err != nil && o.cfg.OnError != nil {
		o.cfg.OnError(fmt.Errorf("standby: %w", err))
	}
	o.sess = nil
}

// Lost is closed when the claimed session is lost or closed. Before a
// successful Claim it returns nil (a channel that never fires).
func (o *Ownership) Lost() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lostCh
}

// Valid reports whether the claim is held and its session valid.
func (o *Ownership) Valid() bool {
	o.mu.Lock()
	h := o.claim
	o.mu.Unlock()
	return h != nil && h.Valid()
}

// Err is why the claim was lost (nil while it holds or before Claim).
func (o *Ownership) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.claim == nil {
		return nil
	}
	return o.claim.Session().Err()
}

// BackendPID is the backend of the ownership session (0 if none).
func (o *Ownership) BackendPID() uint32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sess == nil {
		return 0
	}
	return o.sess.BackendPID()
}

// Close gives the claim up by destroying its session (the server releases the
// lock at once) and closes Lost.
func (o *Ownership) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.claim != nil {
		o.claim.Release()
	}
	if o.sess == nil {
		return nil
	}
	err := o.sess.Close()
	return err
}

// refuseFleet fails with ErrModeConflict, and gives the claim key back, while
// fleet instances are registered live on the database of s. A refusal is
// no loss of the session: its statements succeeded.
func refuseFleet(ctx context.Context, s *Session, key int64) error {
	var live int64
	err := s.exec(ctx, func(qctx context.Context, conn *pgx.Conn) error {
		var exists bool // no registry before the migrations ran: no fleet either
		if err := conn.QueryRow(qctx, `SELECT to_regclass('instances') IS NOT NULL`).Scan(&exists); err != nil || !exists {
			return err
		}
		return conn.QueryRow(qctx, `SELECT count(*) FROM instances WHERE heartbeat_at + ttl > clock_timestamp()`).Scan(&live)
	})
	if err != nil {
		return fmt.Errorf("look up fleet instances: %w", err)
	}
	if live == 0 {
		return nil
	}
	err = fmt.Errorf("%w: %d fleet instance(s) are registered live on this database; run this one with S3GATE_FLEET=true too, or stop them (see s3gate admin instances)", ErrModeConflict, live)
	if uerr := s.exec(ctx, func(qctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(qctx, `SELECT pg_advisory_unlock($1)`, key)
		return err
	}); uerr != nil {
		err = errors.Join(err, fmt.Errorf("give the claim back: %w", uerr))
	}
	return err
}
