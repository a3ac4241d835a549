package store

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestLockedError pins the texts clients, logs and fsck's REPAIR lines have
// always shown, and that the typed error still counts as ErrObjectLocked.
func TestLockedError(t *testing.T) {
	until := time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		name   string
		err    *LockedError
		reason string
	}{
		{"legal hold", &LockedError{LegalHold: true},
			"the version is under a legal hold"},
		{"legal hold beside a retention", &LockedError{LegalHold: true, Mode: LockCompliance, RetainUntil: until},
			"the version is under a legal hold"},
		{"governance retention", &LockedError{Mode: LockGovernance, RetainUntil: until},
			"the version is retained in GOVERNANCE mode until 2030-01-02T02:04:05Z"},
		{"compliance retention", &LockedError{Mode: LockCompliance, RetainUntil: until},
			"the version is retained in COMPLIANCE mode until 2030-01-02T02:04:05Z"},
		{"compliance change", &LockedError{Mode: LockCompliance, RetainUntil: until, RetentionChange: true},
			"a COMPLIANCE retention until 2030-01-02T02:04:05Z cannot be shortened, removed or changed"},
		{"governance change", &LockedError{Mode: LockGovernance, RetainUntil: until, RetentionChange: true},
			"shortening, removing or changing a GOVERNANCE retention needs x-amz-bypass-governance-retention"},
		{"no reason", &LockedError{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := "the version is protected by Object Lock"
			if c.reason != "" {
				want += ": " + c.reason
			}
			if got := c.err.Error(); got != want {
				t.Errorf("Error() = %q, want %q", got, want)
			}
			if got := c.err.Reason(); got != c.reason {
				t.Errorf("Reason() = %q, want %q", got, c.reason)
			}
			wrapped := fmt.Errorf("version v1 of b/k: %w", c.err)
			if !errors.Is(wrapped, ErrObjectLocked) {
				t.Errorf("errors.Is(%v, ErrObjectLocked) = false", wrapped)
			}
			var le *LockedError
			if !errors.As(wrapped, &le) || le != c.err {
				t.Fatalf("errors.As(%v) = %v, want the error itself", wrapped, le)
			}
			if got := le.Reason(); got != c.reason {
				t.Errorf("Reason() through the wrap = %q, want %q", got, c.reason)
			}
		})
	}
	if errors.Is(&LockedError{LegalHold: true}, ErrRetentionInPast) {
		t.Error("a LockedError is ErrRetentionInPast")
	}
}
