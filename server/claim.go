package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
)

// Claim errors.
var (
	// ErrNoClaim: New did not get the writer claim (another instance owns the
	// database and STANDBY=refuse, the claim failed, or ctx ended while New
	// waited as a standby). New has logged why.
	ErrNoClaim = errors.New("writer claim not taken")
	// ErrClaimLost: Serve stopped because the writer claim was lost. The loss
	// is logged when it happens; the process should exit 1, so that its
	// supervisor restarts it as a standby (ADR 004).
	ErrClaimLost = errors.New("writer claim lost")
)

// claim is the single-instance writer claim of a server on PostgreSQL and
// the watch that stops all work when it is lost.
type claim struct {
	own  *fleet.Ownership
	lost chan struct{} // closed when the claim is lost; nil without a claim
	stop chan struct{} // closed by Close: ends the watch
	done chan struct{} // closed when the watch ended
}

// takeClaim takes the writer claim on the database: at once, or, as a
// standby, when the owner lets go (STANDBY=wait). Then it watches the claim:
// its loss cancels every request and background job and stops Serve.
// In fleet mode there is no claim: every instance serves (ADR 009).
func (s *Server) takeClaim(ctx context.Context) error {
	if s.cfg.Fleet || skipClaim(s.cfg.DatabaseURL) {
		return nil
	}
	own, err := fleet.NewOwnership(fleet.OwnershipConfig{
		Session: fleet.SessionConfig{DSN: s.cfg.DirectURL()},
		OnError: func(err error) { s.log.Warn("standby", "err", err) },
	})
	if err != nil {
		s.log.Error("ownership", "err", err)
		return fmt.Errorf("%w: %w", ErrNoClaim, err)
	}
	err = own.Claim(ctx, false)
	if errors.Is(err, fleet.ErrClaimHeld) {
		if s.cfg.Standby == "refuse" {
			s.log.Error("another instance owns this database (" + config.Prefix + "STANDBY=refuse)")
			return s.noClaim(own, err)
		}
		s.log.Info("standby: another instance owns this database; waiting to take over")
		s.role.Store(RoleStandby)
		if err := s.serveStandbyMetrics(); err != nil {
			s.log.Error("standby: cannot serve health and metrics", "err", err)
			return s.noClaim(own, err)
		}
		err = own.Claim(ctx, true)
	}
	if err != nil {
		if ctx.Err() == nil { // stopped while waiting: not an error
			s.log.Error("claim ownership of the database", "err", err)
		}
		return s.noClaim(own, err)
	}
	s.role.Store(RoleOwner)
	s.log.Info("owner of the database", "backend_pid", own.BackendPID())
	c := &claim{own: own, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	s.claim = c
	go func() {
		defer close(c.done)
		select {
		case <-own.Lost():
			s.log.Error("ownership of the database lost: stopping all work", "err", own.Err())
			close(c.lost)
			s.cancelWork()
		case <-c.stop:
		}
	}()
	// Released last, after the engines: the claim covers all their work.
	s.onClose("close ownership session", func() error {
		close(c.stop)
		<-c.done
		return own.Close()
	})
	return nil
}

func (s *Server) noClaim(own *fleet.Ownership, err error) error {
	if cerr := own.Close(); cerr != nil {
		s.log.Error("close ownership session", "err", cerr)
	}
	return fmt.Errorf("%w: %w", ErrNoClaim, err)
}

// lostClaim is closed when the writer claim is lost (nil, never closed,
// without a claim).
func (s *Server) lostClaim() <-chan struct{} {
	if s.claim == nil {
		return nil
	}
	return s.claim.lost
}

// unclaimed holds the database URLs whose servers take no writer claim. It
// is a test hook (export_test.go) for the tests that stop or cut PostgreSQL
// under a running gateway to watch its data path: by design such an outage
// costs the claim and stops the gateway (ADR 004).
var unclaimed sync.Map

func skipClaim(dsn string) bool {
	_, ok := unclaimed.Load(dsn)
	return ok
}
