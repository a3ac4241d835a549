package protocol

import (
	"errors"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

func TestApplyLockChange(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	gov := &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: at(time.Hour)}
	comp := &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: at(time.Hour)}
	expired := &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: at(-time.Second)}
	held := &store.ObjectLock{LegalHold: store.LegalHoldOn}
	ret := func(mode string, until *time.Time, bypass bool) store.LockChange {
		return store.LockChange{SetRetention: true, Mode: mode, RetainUntil: until, BypassGovernance: bypass}
	}
	for _, c := range []struct {
		name string
		cur  *store.ObjectLock
		ch   store.LockChange
		want *store.ObjectLock
		err  error
	}{
		{"new retention", nil, ret(store.LockCompliance, at(time.Minute), false), &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: at(time.Minute)}, nil},
		{"date in the past", nil, ret(store.LockGovernance, at(-time.Minute), false), nil, store.ErrRetentionInPast},
		{"date now", nil, ret(store.LockGovernance, at(0), false), nil, store.ErrRetentionInPast},
		{"compliance extended", comp, ret(store.LockCompliance, at(2*time.Hour), false), &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: at(2 * time.Hour)}, nil},
		{"compliance same date", comp, ret(store.LockCompliance, at(time.Hour), false), comp, nil},
		{"compliance shortened", comp, ret(store.LockCompliance, at(time.Minute), true), nil, store.ErrObjectLocked},
		{"compliance removed", comp, ret("", nil, true), nil, store.ErrObjectLocked},
		{"compliance to governance", comp, ret(store.LockGovernance, at(2*time.Hour), true), nil, store.ErrObjectLocked},
		{"governance extended", gov, ret(store.LockGovernance, at(2*time.Hour), false), &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: at(2 * time.Hour)}, nil},
		{"governance shortened", gov, ret(store.LockGovernance, at(time.Minute), false), nil, store.ErrObjectLocked},
		{"governance shortened with bypass", gov, ret(store.LockGovernance, at(time.Minute), true), &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: at(time.Minute)}, nil},
		{"governance removed", gov, ret("", nil, false), nil, store.ErrObjectLocked},
		{"governance removed with bypass", gov, ret("", nil, true), nil, nil},
		{"governance to compliance", gov, ret(store.LockCompliance, at(2*time.Hour), false), nil, store.ErrObjectLocked},
		{"governance to compliance with bypass", gov, ret(store.LockCompliance, at(2*time.Hour), true), &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: at(2 * time.Hour)}, nil},
		{"expired compliance replaced", expired, ret(store.LockGovernance, at(time.Minute), false), &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: at(time.Minute)}, nil},
		{"expired compliance removed", expired, ret("", nil, false), nil, nil},
		{"legal hold on", comp, store.LockChange{LegalHold: store.LegalHoldOn}, &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: at(time.Hour), LegalHold: store.LegalHoldOn}, nil},
		{"legal hold off", held, store.LockChange{LegalHold: store.LegalHoldOff}, &store.ObjectLock{LegalHold: store.LegalHoldOff}, nil},
		{"retention beside a hold", held, ret(store.LockGovernance, at(time.Minute), false), &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: at(time.Minute), LegalHold: store.LegalHoldOn}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ApplyLockChange(c.cur, c.ch, now)
			if !errors.Is(err, c.err) || (c.err != nil && err == nil) {
				t.Fatalf("err = %v, want %v", err, c.err)
			}
			if !sameLock(got, c.want) {
				t.Fatalf("lock = %+v, want %+v", got, c.want)
			}
		})
	}
}

func sameLock(a, b *store.ObjectLock) bool {
	if a == nil || b == nil {
		return a == b
	}
	ta, tb := a.RetainUntil, b.RetainUntil
	return a.Mode == b.Mode && a.LegalHold == b.LegalHold && (ta == nil) == (tb == nil) && (ta == nil || ta.Equal(*tb))
}

func TestCheckRemovable(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, c := range []struct {
		name   string
		lock   *store.ObjectLock
		bypass bool
		locked bool
	}{
		{"no lock", nil, false, false},
		{"compliance running", &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: at(time.Second)}, true, true},
		{"compliance expired", &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: at(-time.Second)}, false, false},
		{"compliance ends now", &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: at(0)}, false, false},
		{"governance running", &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: at(time.Hour)}, false, true},
		{"governance bypassed", &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: at(time.Hour)}, true, false},
		{"legal hold", &store.ObjectLock{LegalHold: store.LegalHoldOn}, true, true},
		{"legal hold on an expired governance", &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: at(-time.Hour), LegalHold: store.LegalHoldOn}, true, true},
		{"legal hold lifted", &store.ObjectLock{LegalHold: store.LegalHoldOff}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckRemovable(c.lock, now, c.bypass)
			if got := errors.Is(err, store.ErrObjectLocked); got != c.locked || (!c.locked && err != nil) {
				t.Fatalf("CheckRemovable = %v, want locked %v", err, c.locked)
			}
		})
	}
}

func TestResolveDefaultRetention(t *testing.T) {
	lm := time.Date(2026, 2, 28, 23, 59, 59, 123456000, time.UTC)
	named := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		lock    *store.ObjectLock
		changed bool
		want    *store.ObjectLock
	}{
		{"none", nil, false, nil},
		{"days", &store.ObjectLock{Default: &store.DefaultRetention{Mode: store.LockGovernance, Days: 1}}, true,
			&store.ObjectLock{Mode: store.LockGovernance, RetainUntil: ptr(lm.AddDate(0, 0, 1))}},
		{"years", &store.ObjectLock{Default: &store.DefaultRetention{Mode: store.LockCompliance, Years: 2}, LegalHold: store.LegalHoldOn}, true,
			&store.ObjectLock{Mode: store.LockCompliance, RetainUntil: ptr(lm.AddDate(2, 0, 0)), LegalHold: store.LegalHoldOn}},
		{"named wins", &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: &named, Default: &store.DefaultRetention{Mode: store.LockCompliance, Days: 1}}, true,
			&store.ObjectLock{Mode: store.LockGovernance, RetainUntil: &named}},
	} {
		t.Run(c.name, func(t *testing.T) {
			meta := store.ObjectMeta{Lock: c.lock}
			if got := ResolveDefaultRetention(&meta, lm); got != c.changed {
				t.Fatalf("changed = %v", got)
			}
			if !sameLock(meta.Lock, c.want) || (meta.Lock != nil && meta.Lock.Default != nil) {
				t.Fatalf("lock = %+v, want %+v", meta.Lock, c.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestCheckVersioningChange(t *testing.T) {
	on := `{"enabled":true}`
	for _, c := range []struct {
		doc, status string
		refused     bool
	}{
		{"", store.VersioningSuspended, false},
		{"", store.VersioningEnabled, false},
		{on, store.VersioningEnabled, false},
		{on, store.VersioningSuspended, true},
	} {
		err := CheckVersioningChange(c.doc, c.status)
		if errors.Is(err, store.ErrInvalidBucketState) != c.refused || (!c.refused && err != nil) {
			t.Errorf("CheckVersioningChange(%q, %s) = %v", c.doc, c.status, err)
		}
	}
}
