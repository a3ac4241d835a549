package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Object Lock retention modes (S3's ObjectLockRetentionMode).
const (
	LockGovernance = "GOVERNANCE"
	LockCompliance = "COMPLIANCE"
)

// Legal hold states (S3's ObjectLockLegalHoldStatus).
const (
	LegalHoldOn  = "ON"
	LegalHoldOff = "OFF"
)

// BucketConfigObjectLock is the bucket configuration document of Object Lock
// (JSON of ObjectLockConfig); a bucket without it has no Object Lock. Once
// stored it is never removed: S3 cannot turn Object Lock off.
const BucketConfigObjectLock = "object-lock"

// ErrObjectLocked is a removal or a retention change that a version's Object
// Lock forbids (403 AccessDenied, as S3 answers).
var ErrObjectLocked = errors.New("the version is protected by Object Lock")

// LockedError is ErrObjectLocked with what of the lock refuses, so a caller
// that reports why (fsck's repair) reads fields instead of parsing the text.
// errors.Is(err, ErrObjectLocked) holds for it.
type LockedError struct {
	// LegalHold is a legal hold (LegalHoldOn) that refuses the removal; Mode
	// and RetainUntil are then not part of the reason.
	LegalHold bool
	// Mode (LockGovernance or LockCompliance) and RetainUntil are the
	// running retention that refuses.
	Mode        string
	RetainUntil time.Time
	// RetentionChange is a refused change of that retention (shortened,
	// removed or given another mode), rather than a removal of the version.
	RetentionChange bool
}

// Error is ErrObjectLocked's text, then ": " and Reason when there is one.
func (e *LockedError) Error() string {
	if r := e.Reason(); r != "" {
		return ErrObjectLocked.Error() + ": " + r
	}
	return ErrObjectLocked.Error()
}

// Is makes the error ErrObjectLocked for errors.Is, as s3api's mapping to
// AccessDenied and every caller that tells a locked version apart expect.
func (e *LockedError) Is(target error) bool { return target == ErrObjectLocked }

// Reason is why the lock refuses, without ErrObjectLocked's text: the legal
// hold, or the retention by its mode and (but for a GOVERNANCE change, which
// the bypass header would allow) its retain-until date, UTC in RFC 3339; ""
// if e names neither. The wording is what logs and fsck's REPAIR lines have
// always shown.
func (e *LockedError) Reason() string {
	until := e.RetainUntil.UTC().Format(time.RFC3339)
	switch {
	case e.LegalHold:
		return "the version is under a legal hold"
	case e.Mode == "":
		return ""
	case !e.RetentionChange:
		return fmt.Sprintf("the version is retained in %s mode until %s", e.Mode, until)
	case e.Mode == LockCompliance:
		return fmt.Sprintf("a %s retention until %s cannot be shortened, removed or changed", e.Mode, until)
	}
	return fmt.Sprintf("shortening, removing or changing a %s retention needs x-amz-bypass-governance-retention", e.Mode)
}

// ErrRetentionInPast is a retain-until date that is not in the future of the
// database's clock (400 InvalidArgument).
var ErrRetentionInPast = errors.New("the retain until date must be in the future")

// ObjectLock is the Object Lock state of one version, kept in its metadata
// (ObjectMeta.Lock), so it travels with the version when it becomes
// noncurrent.
type ObjectLock struct {
	// Mode is LockGovernance or LockCompliance with RetainUntil, "" for no
	// retention.
	Mode        string     `json:"mode,omitempty"`
	RetainUntil *time.Time `json:"until,omitempty"`
	// LegalHold is LegalHoldOn, LegalHoldOff, or "" when never set (S3 then
	// answers GetObjectLegalHold with NoSuchObjectLockConfiguration).
	LegalHold string `json:"hold,omitempty"`
	// Default, set by s3api on a write to a bucket with a default retention
	// that names none, asks the protocol to apply it: inside the write
	// transaction it becomes Mode and RetainUntil, counted from the new
	// version's last-modified time (database time). A stored object never
	// keeps it; an upload row does until its Complete.
	Default *DefaultRetention `json:"default,omitempty"`
}

// Locked reports whether l forbids removing its version at now (database
// time): a legal hold, or a retention not yet expired.
func (l *ObjectLock) Locked(now time.Time) bool {
	return l != nil && (l.LegalHold == LegalHoldOn || l.Retained(now))
}

// Retained reports whether l has a retention that has not expired at now.
func (l *ObjectLock) Retained(now time.Time) bool {
	return l != nil && l.Mode != "" && l.RetainUntil != nil && l.RetainUntil.After(now)
}

// DefaultRetention is a bucket's default retention: a mode and a period of
// Days or Years (exactly one is non-zero).
type DefaultRetention struct {
	Mode  string `json:"mode"`
	Days  int    `json:"days,omitempty"`
	Years int    `json:"years,omitempty"`
}

// Until is the retain-until date of a version last modified at lm.
func (d DefaultRetention) Until(lm time.Time) time.Time {
	return lm.AddDate(d.Years, 0, d.Days)
}

// ObjectLockConfig is a bucket's Object Lock configuration document.
type ObjectLockConfig struct {
	// Enabled is always true in a stored document.
	Enabled bool              `json:"enabled"`
	Default *DefaultRetention `json:"default,omitempty"`
}

// LockChange is a change of one version's Object Lock state
// (PutObjectRetention, PutObjectLegalHold).
type LockChange struct {
	// SetRetention replaces the retention with Mode and RetainUntil (Mode ""
	// removes it).
	SetRetention bool
	Mode         string
	RetainUntil  *time.Time
	// LegalHold, if set, is the new legal hold status.
	LegalHold string
	// BypassGovernance lets the change shorten or remove a GOVERNANCE
	// retention (x-amz-bypass-governance-retention with the permission
	// s3:BypassGovernanceRetention, which s3api checks).
	BypassGovernance bool
}

// LockStore changes the Object Lock state of versions. The protocol
// implements it; the rules (protocol.ApplyLockChange) are checked inside
// the write transaction against the version as stored, in database time.
type LockStore interface {
	// PutObjectLock applies ch to the version versionID of bucket/key ("" the
	// latest) without making a new version, and returns the version as it
	// now is. A change the lock forbids is ErrObjectLocked; a retain-until
	// date not in the future is ErrRetentionInPast; a delete marker is
	// ErrDeleteMarker.
	PutObjectLock(ctx context.Context, bucket, key, versionID string, ch LockChange) (ObjectInfo, error)
}

// PutObjectLock implements LockStore when the engine does
// (ErrNotImplemented otherwise).
func (s *Store) PutObjectLock(ctx context.Context, bucket, key, versionID string, ch LockChange) (ObjectInfo, error) {
	l, ok := s.e.(LockStore)
	if !ok {
		return ObjectInfo{}, fmt.Errorf("%w: this metadata engine keeps no Object Lock", ErrNotImplemented)
	}
	if err := ValidKey(key); err != nil {
		return ObjectInfo{}, s.bucketFirst(ctx, bucket, fmt.Errorf("%w: %v", ErrNoSuchKey, err))
	}
	return l.PutObjectLock(ctx, bucket, key, versionID, ch)
}
