package lifecycle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/store"
)

// fakeLeases is a lease table whose row is held by someone else (held) or
// taken by us and then lost at the first renewal.
type fakeLeases struct {
	held     bool
	renewals atomic.Int64
}

func (l *fakeLeases) Acquire(context.Context, string, string, time.Duration) (int64, bool, error) {
	return 1, !l.held, nil
}
func (l *fakeLeases) Confirm(context.Context, string, string, int64) (bool, error) { return true, nil }
func (l *fakeLeases) Renew(context.Context, string, string, int64, time.Duration) (bool, error) {
	l.renewals.Add(1)
	return false, nil // the row is someone else's now
}
func (l *fakeLeases) Release(context.Context, string, string, int64) (bool, error) { return false, nil }

// ctxStore remembers the context of the run (its lease's).
type ctxStore struct {
	*fakeStore
	ctx context.Context
}

func (s *ctxStore) ListBuckets(ctx context.Context) ([]store.Bucket, error) {
	s.ctx = ctx
	return s.fakeStore.ListBuckets(ctx)
}

// TestRunnerLease: a lease held elsewhere means no run at all; a lease lost
// during a run stops it before its next deletion, and the run is an error.
func TestRunnerLease(t *testing.T) {
	f := newFake(t, "", `<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)
	f.put("a", 1, t0)
	f.put("b", 1, t0)
	s := &ctxStore{fakeStore: f}
	r := &Runner{Store: s, Leases: &fakeLeases{held: true}, Lease: lease.Config{Holder: "me"},
		Options: Options{Now: clock(t0.Add(day(3)))}}
	if _, err := r.RunOnce(context.Background()); !errors.Is(err, lease.ErrHeld) || s.ctx != nil {
		t.Fatalf("held lease: %v (store used: %v), want ErrHeld and no run", err, s.ctx != nil)
	}
	leases := &fakeLeases{}
	r.Leases, r.Lease = leases, lease.Config{Holder: "me", RenewInterval: time.Millisecond}
	r.Options.beforeExpire = func(string, string) { <-s.ctx.Done() } // the first deletion waits for the loss
	st, err := r.RunOnce(context.Background())
	if !errors.Is(err, lease.ErrLost) || st.Expired > 1 || len(f.ids()) != 1 {
		t.Errorf("lost lease: %v, %+v, keys left %v: want ErrLost after at most the deletion in flight", err, st, f.ids())
	}
	if leases.renewals.Load() == 0 {
		t.Error("the lease was never renewed")
	}
}
