package fleet

import (
	"context"
	"errors"
	"testing"
	"time"
)

func newOwnership(t *testing.T, dsn string) *Ownership {
	t.Helper()
	cfg := fastCfg(dsn, "")
	o, err := NewOwnership(OwnershipConfig{Session: cfg, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Errorf("ownership close: %v", err)
		}
	})
	return o
}

func TestOwnershipTakeover(t *testing.T) {
	dsn := pgtestDSN(t)
	adm := admin(t, dsn)
	for _, how := range []string{"terminate", "close"} {
		t.Run(how, func(t *testing.T) {
			first, second := newOwnership(t, dsn), newOwnership(t, dsn)
			if err := first.Claim(tctx(t), false); err != nil {
				t.Fatal(err)
			}
			if !first.Valid() {
				t.Fatal("first claim not valid")
			}
			var app string
			if err := adm.QueryRow(tctx(t), `SELECT application_name FROM pg_stat_activity WHERE pid = $1`,
				int32(first.BackendPID())).Scan(&app); err != nil || app != "s3gate-owner" {
				t.Errorf("owner session application_name %q, %v", app, err)
			}
			if err := second.Claim(tctx(t), false); !errors.Is(err, ErrClaimHeld) {
				t.Fatalf("second claim without waiting: %v, want ErrClaimHeld", err)
			}
			claimed := make(chan error, 1)
			go func() { claimed <- second.Claim(tctx(t), true) }()
			// The standby keeps waiting while the first holds the claim.
			select {
			case err := <-claimed:
				t.Fatalf("standby claimed while the first holds it: %v", err)
			case <-time.After(300 * time.Millisecond):
			}
			switch how {
			case "terminate":
				terminate(t, adm, first.BackendPID())
				waitClosed(t, first.Lost(), "first owner noticing its loss")
				if first.Valid() || !errors.Is(first.Err(), ErrSessionLost) {
					t.Errorf("first after loss: valid %v err %v", first.Valid(), first.Err())
				}
			case "close":
				if err := first.Close(); err != nil {
					t.Fatal(err)
				}
				waitClosed(t, first.Lost(), "Lost after Close")
			}
			select {
			case err := <-claimed:
				if err != nil {
					t.Fatalf("standby claim: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("standby never took over")
			}
			if !second.Valid() {
				t.Error("second claim not valid")
			}
			if err := second.Claim(tctx(t), false); !errors.Is(err, ErrAlreadyClaimed) {
				t.Errorf("claiming twice: %v", err)
			}
			select {
			case <-second.Lost():
				t.Error("second reports loss")
			default:
			}
		})
	}
}

func TestOwnershipStandbyStops(t *testing.T) {
	dsn := pgtestDSN(t)
	first, second := newOwnership(t, dsn), newOwnership(t, dsn)
	if err := first.Claim(tctx(t), false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := second.Claim(ctx, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("standby with a deadline: %v", err)
	}
	if second.Lost() != nil || second.Valid() {
		t.Error("standby without a claim reports a claim")
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if err := second.Claim(tctx(t), true); !errors.Is(err, ErrOwnershipClosed) {
		t.Errorf("claim after Close: %v", err)
	}
}
