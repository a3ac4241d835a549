package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

// testObjectLock: a version under Object Lock cannot be removed for good by
// any store call (a delete by version id as lifecycle makes it, with its
// ETag condition; DeleteObjectVersions, where it fails alone; suspending
// the bucket is refused) until its retention ends in database time, which
// the test waits for; GOVERNANCE yields to the bypass; a legal hold blocks
// until lifted; COMPLIANCE is never shortened; a default retention counts
// from the version's own last-modified time; metadata rewrites (tagging,
// ACLs) keep the lock.
func testObjectLock(t *testing.T, v *Env) {
	ctx := context.Background()
	ls, ok := v.Store.(store.LockStore)
	if !ok {
		t.Fatalf("%T keeps no Object Lock", v.Store)
	}
	v.objectLockBucket(t)
	put := func(key string, data []byte, l *store.ObjectLock) store.ObjectInfo {
		t.Helper()
		info, err := v.Store.PutObject(ctx, "b", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data)), Meta: store.ObjectMeta{Lock: l}})
		if err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		return info
	}
	readable := func(key, versionID string, want []byte) store.ObjectInfo {
		t.Helper()
		info, _, b := v.get(t, "b", key, store.GetOptions{VersionID: versionID})
		SameBytes(t, key+"@"+versionID, b, want)
		return info
	}

	// COMPLIANCE, a short retention (seconds) that the test outlives.
	data := Bytes(41, Knee+100)
	until := time.Now().Add(5 * time.Second).UTC()
	c := put("comp", data, &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: &until})
	_, err := v.Store.DeleteObjectVersion(ctx, "b", "comp", store.DeleteOptions{VersionID: c.VersionID, IfMatch: c.ETag, IfMatchLastModified: &c.LastModified})
	wantLocked(t, "lifecycle-style delete by version id", err)
	_, err = v.Store.DeleteObjectVersion(ctx, "b", "comp", store.DeleteOptions{VersionID: c.VersionID, BypassGovernance: true})
	wantLocked(t, "delete with bypass", err)
	free := put("free", []byte("free"), nil)
	res, err := v.Store.DeleteObjectVersions(ctx, "b", []store.ObjectID{{Key: "comp", VersionID: c.VersionID}, {Key: "free", VersionID: free.VersionID}})
	if err != nil || len(res) != 2 {
		t.Fatalf("DeleteObjectVersions: %+v, %v", res, err)
	}
	wantLocked(t, "DeleteObjectVersions of the locked version", res[0].Err)
	if res[1].Err != nil {
		t.Fatalf("the unlocked entry of the same request failed: %v", res[1].Err)
	}
	if _, _, _, err := v.Store.GetObject(ctx, "b", "free", store.GetOptions{VersionID: free.VersionID}, true); !errors.Is(err, store.ErrNoSuchVersion) {
		t.Fatalf("the unlocked version is still there: %v", err)
	}
	if err := v.Store.SetBucketVersioning(ctx, "b", store.VersioningSuspended); !errors.Is(err, store.ErrInvalidBucketState) {
		t.Fatalf("suspending a bucket with Object Lock: %v", err)
	}
	// Overwritten and deleted without a version id: new versions, a marker;
	// the locked one stays readable.
	put("comp", []byte("newer"), nil)
	if _, err := v.Store.DeleteObjectVersion(ctx, "b", "comp", store.DeleteOptions{}); err != nil {
		t.Fatalf("a delete marker over a locked version: %v", err)
	}
	readable("comp", c.VersionID, data)

	// COMPLIANCE is extended, never shortened nor removed (a long one, so
	// that no slow step sees it expire).
	hour := time.Now().Add(time.Hour).UTC()
	cl := put("comp-long", []byte("long"), &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: &hour})
	short := hour.Add(-time.Minute)
	_, err = ls.PutObjectLock(ctx, "b", "comp-long", cl.VersionID, store.LockChange{SetRetention: true, Mode: store.LockCompliance, RetainUntil: &short, BypassGovernance: true})
	wantLocked(t, "shortening COMPLIANCE", err)
	_, err = ls.PutObjectLock(ctx, "b", "comp-long", cl.VersionID, store.LockChange{SetRetention: true, BypassGovernance: true})
	wantLocked(t, "removing COMPLIANCE", err)
	longer := hour.Add(time.Minute)
	if _, err := ls.PutObjectLock(ctx, "b", "comp-long", cl.VersionID, store.LockChange{SetRetention: true, Mode: store.LockCompliance, RetainUntil: &longer}); err != nil {
		t.Fatalf("extending COMPLIANCE: %v", err)
	}
	// A metadata rewrite that names no lock (tagging) keeps it.
	if _, err := v.Store.ReplaceObjectMeta(ctx, "b", "comp-long", cl.VersionID, cl.ETag, store.ObjectMeta{Tags: []store.Tag{{Key: "a", Value: "b"}}}); err != nil {
		t.Fatal(err)
	}
	if got := readable("comp-long", cl.VersionID, []byte("long")); got.Meta.Lock == nil || !got.Meta.Lock.RetainUntil.Equal(longer) || len(got.Meta.Tags) != 1 ||
		!got.LastModified.Equal(cl.LastModified) {
		t.Fatalf("after tagging: lock %+v, tags %v, last-modified %v (was %v)", got.Meta.Lock, got.Meta.Tags, got.LastModified, cl.LastModified)
	}

	// GOVERNANCE yields to the bypass only.
	g := put("gov", []byte("gov"), &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: &longer})
	_, err = v.Store.DeleteObjectVersion(ctx, "b", "gov", store.DeleteOptions{VersionID: g.VersionID})
	wantLocked(t, "GOVERNANCE without bypass", err)
	if _, err := v.Store.DeleteObjectVersion(ctx, "b", "gov", store.DeleteOptions{VersionID: g.VersionID, BypassGovernance: true}); err != nil {
		t.Fatalf("GOVERNANCE with bypass: %v", err)
	}

	// A legal hold blocks until lifted.
	h := put("hold", []byte("hold"), nil)
	if _, err := ls.PutObjectLock(ctx, "b", "hold", h.VersionID, store.LockChange{LegalHold: store.LegalHoldOn}); err != nil {
		t.Fatal(err)
	}
	_, err = v.Store.DeleteObjectVersion(ctx, "b", "hold", store.DeleteOptions{VersionID: h.VersionID, BypassGovernance: true})
	wantLocked(t, "legal hold", err)
	if _, err := ls.PutObjectLock(ctx, "b", "hold", h.VersionID, store.LockChange{LegalHold: store.LegalHoldOff}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Store.DeleteObjectVersion(ctx, "b", "hold", store.DeleteOptions{VersionID: h.VersionID}); err != nil {
		t.Fatalf("after the hold was lifted: %v", err)
	}

	// A default retention counts from the version's last-modified time; a
	// named date not after it is refused and writes nothing.
	d := put("def", []byte("def"), &store.ObjectLock{Default: &store.DefaultRetention{Mode: store.LockGovernance, Days: 1}})
	got := readable("def", d.VersionID, []byte("def"))
	if l := got.Meta.Lock; l == nil || l.Default != nil || l.Mode != store.LockGovernance || !l.RetainUntil.Equal(got.LastModified.AddDate(0, 0, 1)) {
		t.Fatalf("default retention: %+v, last-modified %v", l, got.LastModified)
	}
	past := time.Now().Add(-time.Second)
	if _, err := v.Store.PutObject(ctx, "b", "def", bytes.NewReader([]byte("x")), store.PutOptions{Size: 1,
		Meta: store.ObjectMeta{Lock: &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: &past}}}); !errors.Is(err, store.ErrRetentionInPast) {
		t.Fatalf("a retention in the past: %v", err)
	}
	if cur := readable("def", "", []byte("def")); cur.VersionID != d.VersionID {
		t.Fatalf("a refused put made version %s", cur.VersionID)
	}

	// Once the database's clock passes the retain-until date, the version
	// goes (polled: the clock is the database's, not the test's).
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := v.Store.DeleteObjectVersion(ctx, "b", "comp", store.DeleteOptions{VersionID: c.VersionID})
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrObjectLocked) || time.Now().After(deadline) {
			t.Fatalf("delete after the retention: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, _, _, err := v.Store.GetObject(ctx, "b", "comp", store.GetOptions{VersionID: c.VersionID}, true); !errors.Is(err, store.ErrNoSuchVersion) {
		t.Fatalf("the expired version is still there: %v", err)
	}
	v.Idle(t)
}

// objectLockBucket turns on versioning and Object Lock on bucket "b".
func (v *Env) objectLockBucket(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cfgs, ok := v.Store.(store.BucketConfigStore)
	if !ok {
		t.Fatalf("%T keeps no bucket configuration", v.Store)
	}
	if err := v.Store.SetBucketVersioning(ctx, "b", store.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	if err := cfgs.PutBucketConfig(ctx, "b", store.BucketConfigObjectLock, `{"enabled":true}`); err != nil {
		t.Fatal(err)
	}
}

// wantLocked fails t unless err is Object Lock's refusal.
func wantLocked(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrObjectLocked) {
		t.Fatalf("%s: %v, want ErrObjectLocked", what, err)
	}
}
