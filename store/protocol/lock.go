package protocol

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// The rules of Object Lock (ADR 016). Each is checked inside the write
// transaction that changes or removes a version, against the version as it
// reads there and the database's clock (Tx.Now), never the gateway's.

// ApplyLockChange returns the lock state of a version whose state is cur
// after ch at now, or the reason the rules refuse it:
//   - a new retention's date must be in the future;
//   - while a retention runs, COMPLIANCE is never shortened, removed nor
//     changed to another mode; GOVERNANCE only with BypassGovernance;
//     extending (same mode, a later or equal date) is always allowed;
//   - a legal hold is set or lifted freely (s3:PutObjectLegalHold suffices).
func ApplyLockChange(cur *store.ObjectLock, ch store.LockChange, now time.Time) (*store.ObjectLock, error) {
	var next store.ObjectLock
	if cur != nil {
		next = *cur
	}
	if ch.SetRetention {
		if ch.Mode != "" && (ch.RetainUntil == nil || !ch.RetainUntil.After(now)) {
			return nil, store.ErrRetentionInPast
		}
		if cur.Retained(now) {
			weakens := ch.Mode != cur.Mode || ch.RetainUntil == nil || ch.RetainUntil.Before(*cur.RetainUntil)
			if weakens && (cur.Mode == store.LockCompliance || !ch.BypassGovernance) {
				return nil, &store.LockedError{Mode: cur.Mode, RetainUntil: *cur.RetainUntil, RetentionChange: true}
			}
		}
		next.Mode, next.RetainUntil = ch.Mode, nil
		if ch.Mode != "" {
			t := ch.RetainUntil.UTC()
			next.RetainUntil = &t
		}
	}
	if ch.LegalHold != "" {
		next.LegalHold = ch.LegalHold
	}
	next.Default = nil
	if next == (store.ObjectLock{}) {
		return nil, nil
	}
	return &next, nil
}

// CheckRemovable is the rule of every removal of a version for good (a
// delete by version id, DeleteObjects with version ids, lifecycle's
// expiry, the replacement of a suspended bucket's null version): nil unless
// the version's lock forbids it at now. A legal hold and a running
// COMPLIANCE retention forbid it always; a running GOVERNANCE retention
// unless bypass.
func CheckRemovable(l *store.ObjectLock, now time.Time, bypass bool) error {
	switch {
	case l == nil:
		return nil
	case l.LegalHold == store.LegalHoldOn:
		return &store.LockedError{LegalHold: true}
	case !l.Retained(now):
		return nil
	case l.Mode == store.LockGovernance && bypass:
		return nil
	}
	return &store.LockedError{Mode: l.Mode, RetainUntil: *l.RetainUntil}
}

// ResolveDefaultRetention turns a pending default retention of meta (set
// by s3api on a write that names no retention) into the version's retention,
// counted from its last-modified time lm. It reports whether meta changed.
func ResolveDefaultRetention(meta *store.ObjectMeta, lm time.Time) bool {
	if meta.Lock == nil || meta.Lock.Default == nil {
		return false
	}
	l := *meta.Lock
	d := *l.Default
	l.Default = nil
	if l.Mode == "" { // a retention named by the request wins
		until := d.Until(lm).UTC()
		l.Mode, l.RetainUntil = d.Mode, &until
	}
	meta.Lock = &l
	return true
}

// ParseObjectLockConfig reads a bucket's Object Lock document ("" or absent:
// none).
func ParseObjectLockConfig(doc string) (*store.ObjectLockConfig, error) {
	if doc == "" {
		return nil, nil
	}
	var c store.ObjectLockConfig
	if err := json.Unmarshal([]byte(doc), &c); err != nil {
		return nil, fmt.Errorf("stored object lock configuration: %w", err)
	}
	return &c, nil
}

// CheckVersioningChange is the rule of SetBucketVersioning on a bucket whose
// Object Lock document is lockDoc: a bucket with Object Lock keeps its
// versioning Enabled (store.ErrInvalidBucketState otherwise, as S3).
func CheckVersioningChange(lockDoc, status string) error {
	c, err := ParseObjectLockConfig(lockDoc)
	if err != nil {
		return err
	}
	if c != nil && c.Enabled && status != store.VersioningEnabled {
		return fmt.Errorf("%w: the bucket has Object Lock, so its versioning stays Enabled", store.ErrInvalidBucketState)
	}
	return nil
}

// checkRemove is the lock check of every removal for good in the protocol
// (deleteVersion, and the null version a suspended bucket replaces): the
// version versionID of bucket/key, as it reads in tx, may go unless its lock
// forbids it at the database's time.
func checkRemove(ctx context.Context, tx Tx, bucket, key, versionID string, bypass bool) error {
	l, now, err := tx.VersionLock(ctx, bucket, key, versionID)
	if err != nil {
		return err
	}
	if err := CheckRemovable(l, now, bypass); err != nil {
		return fmt.Errorf("version %s of %s/%s: %w", versionID, bucket, key, err)
	}
	return nil
}

// resolveLock completes the lock of the object row o just written at lm (the
// database's time of the write): a retention the request named must end
// after lm; a pending default retention is counted from lm and written into
// the row's metadata (which keeps lm).
func resolveLock(ctx context.Context, tx Tx, o ObjectRow, lm time.Time) error {
	l := o.Meta.Lock
	if l == nil {
		return nil
	}
	if l.Mode != "" && (l.RetainUntil == nil || !l.RetainUntil.After(lm)) {
		return store.ErrRetentionInPast
	}
	meta := o.Meta
	if !ResolveDefaultRetention(&meta, lm) {
		return nil
	}
	return tx.ReplaceMeta(ctx, o.Bucket, o.Key, 0, meta)
}

// PutObjectLock implements store.LockStore: under the key's object lock, the
// version is read, the change checked by ApplyLockChange against its stored
// lock at the database's time, and its metadata rewritten in place (no new
// version; content, version id and last-modified stay).
func (s *Store) PutObjectLock(ctx context.Context, bucket, key, versionID string, ch store.LockChange) (store.ObjectInfo, error) {
	var info store.ObjectInfo
	err := s.dialect.Write(ctx, []int64{fleet.ObjectLockKey(bucket, key)}, func(tx Tx) error {
		r, err := resolve(ctx, tx, bucket, key, versionID, false)
		if err != nil {
			return err
		}
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		meta := r.Info.Meta
		if meta.Lock, err = ApplyLockChange(meta.Lock, ch, now); err != nil {
			return err
		}
		if err := tx.ReplaceMeta(ctx, bucket, key, r.Seq, meta); err != nil {
			return err
		}
		info = r.Info
		info.Meta = meta
		return nil
	})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("object lock of %s/%s: %w", bucket, key, err)
	}
	return info, nil
}
