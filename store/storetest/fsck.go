package storetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

// testRemoveObjectWithBlobs: fsck's repair of an object whose blobs have no
// bytes (protocol.RemoveObjectWithBlobs through the engine's GC) removes the
// current row of a key that references one of the blobs, directly or
// through its manifest, and nothing else; a repeat removes nothing. Object
// Lock decides as for every removal for good: a legal hold and a running
// COMPLIANCE retention keep their version with or without the bypass, a
// running GOVERNANCE retention yields to the bypass only. On a bucket with
// versioning the next newest version takes the removed one's place
// (testRemoveVersionWithBlobs).
func testRemoveObjectWithBlobs(t *testing.T, v *Env) {
	ctx := context.Background()
	if v.RemoveObjectWithBlobs == nil {
		t.Fatal("the Env has no RemoveObjectWithBlobs")
	}
	v.objectLockBucket(t)
	remove := func(key string, ids []int64, bypass bool, want bool) error {
		t.Helper()
		removed, err := v.RemoveObjectWithBlobs(ctx, "b", key, ids, bypass)
		if removed != want {
			t.Fatalf("remove %s (blobs %v, bypass %v): removed %v (%v), want %v", key, ids, bypass, removed, err, want)
		}
		return err
	}
	present := func(key string, want bool) {
		t.Helper()
		_, _, _, err := v.Store.GetObject(ctx, "b", key, store.GetOptions{}, true)
		switch {
		case want && err != nil:
			t.Fatalf("%s after the repair: %v", key, err)
		case !want && !errors.Is(err, store.ErrNoSuchKey):
			t.Fatalf("%s after the repair: %v, want ErrNoSuchKey", key, err)
		}
	}
	put := func(key string, seed uint64, l *store.ObjectLock) int64 {
		t.Helper()
		data := Bytes(seed, Knee+10)
		if _, err := v.Store.PutObject(ctx, "b", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data)), Meta: store.ObjectMeta{Lock: l}}); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		return v.Object(t, "b", key).Blob
	}

	// Only a key that references one of the blobs goes, and only once.
	plain, other := put("plain", 61, nil), put("other", 62, nil)
	if err := remove("plain", []int64{other}, false, false); err != nil {
		t.Fatal(err)
	}
	present("plain", true)
	if err := remove("plain", []int64{other, plain}, false, true); err != nil {
		t.Fatal(err)
	}
	present("plain", false)
	present("other", true)
	if err := remove("plain", []int64{plain}, false, false); err != nil {
		t.Fatal(err)
	}

	// A multipart object goes by its manifest's blob.
	before := v.Content(t)["blobs"]
	uploadID, parts, _ := v.upload(t, "b", "mp", store.ObjectMeta{}, "", "", 63, 100)
	if _, err := v.Store.CompleteMultipartUpload(ctx, "b", "mp", uploadID, completeAll(parts), store.PutOptions{}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	var part []int64
	for _, s := range v.Content(t)["blobs"] {
		if !slices.Contains(before, s) {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			part = append(part, id)
		}
	}
	if len(part) != 1 || v.Object(t, "b", "mp").Parts != 1 {
		t.Fatalf("the multipart object's blobs: %v, %+v", part, v.Object(t, "b", "mp"))
	}
	if err := remove("mp", part, false, true); err != nil {
		t.Fatal(err)
	}
	present("mp", false)

	// Object Lock (retentions long enough that no slow step sees them end).
	hour := time.Now().Add(time.Hour).UTC()
	comp := put("comp", 64, &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: &hour})
	wantLocked(t, "COMPLIANCE", remove("comp", []int64{comp}, false, false))
	wantLocked(t, "COMPLIANCE with bypass", remove("comp", []int64{comp}, true, false))
	present("comp", true)
	hold := put("hold", 65, &store.ObjectLock{LegalHold: store.LegalHoldOn})
	wantLocked(t, "legal hold with bypass", remove("hold", []int64{hold}, true, false))
	present("hold", true)
	gov := put("gov", 66, &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: &hour})
	wantLocked(t, "GOVERNANCE", remove("gov", []int64{gov}, false, false))
	present("gov", true)
	if err := remove("gov", []int64{gov}, true, true); err != nil {
		t.Fatalf("GOVERNANCE with bypass: %v", err)
	}
	present("gov", false)

	testRemoveVersionWithBlobs(t, v, put)
	v.Idle(t)
}

// testRemoveVersionWithBlobs: on a bucket with versioning (b, enabled, and
// a suspended one) the repair leaves the key as a DELETE of the removed
// version's id would: the next newest version becomes current, or a delete
// marker stays the latest, and the removed version is gone.
func testRemoveVersionWithBlobs(t *testing.T, v *Env, put func(key string, seed uint64, l *store.ObjectLock) int64) {
	ctx := context.Background()
	info := func(bucket, key string) store.ObjectInfo {
		t.Helper()
		i, _, _, err := v.Store.GetObject(ctx, bucket, key, store.GetOptions{}, true)
		if err != nil {
			t.Fatalf("HEAD %s/%s: %v", bucket, key, err)
		}
		return i
	}
	// check compares key's versions with want (newest first) and reads
	// each, the key without an id too; the removed version is no more.
	check := func(bucket, key, removed string, want []mver) {
		t.Helper()
		got, _ := v.listAllVersions(t, bucket, store.ListVersionsParams{Prefix: key})
		sameVersions(t, "versions of "+key+" after the repair", got, (&vmodel{keys: map[string][]mver{key: want}}).want(bucket))
		v.checkVersionReads(t, bucket, key, want)
		if _, _, _, err := v.Store.GetObject(ctx, bucket, key, store.GetOptions{VersionID: removed}, true); !errors.Is(err, store.ErrNoSuchVersion) {
			t.Fatalf("HEAD of the removed version %s of %s: %v, want ErrNoSuchVersion", removed, key, err)
		}
	}

	// Enabled: the older object is served again.
	put("versioned", 67, nil)
	older := info("b", "versioned")
	blob := put("versioned", 68, nil)
	newer := info("b", "versioned")
	removed, err := v.RemoveObjectWithBlobs(ctx, "b", "versioned", []int64{blob}, false)
	if err != nil || !removed {
		t.Fatalf("remove the current version of versioned: %v, %v", removed, err)
	}
	check("b", "versioned", newer.VersionID, []mver{{id: older.VersionID, data: Bytes(67, Knee+10)}})

	// A delete marker under the removed version stays the latest: GET
	// answers NoSuchKey, the object under it stays noncurrent.
	put("marked", 69, nil)
	older = info("b", "marked")
	marker, err := v.Store.DeleteObjectVersion(ctx, "b", "marked", store.DeleteOptions{})
	if err != nil || !marker.DeleteMarker {
		t.Fatalf("delete marked: %+v, %v", marker, err)
	}
	blob = put("marked", 70, nil)
	newer = info("b", "marked")
	if removed, err := v.RemoveObjectWithBlobs(ctx, "b", "marked", []int64{blob}, false); err != nil || !removed {
		t.Fatalf("remove the current version of marked: %v, %v", removed, err)
	}
	check("b", "marked", newer.VersionID, []mver{{id: marker.VersionID, marker: true}, {id: older.VersionID, data: Bytes(69, Knee+10)}})

	// Suspended (never with Object Lock, so a bucket of its own): the null
	// version goes and the versioned one under it is current again.
	if err := v.Store.CreateBucket(ctx, "suspended", ""); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	v.setVersioning(t, "suspended", store.VersioningEnabled)
	first := v.put(t, "suspended", "k", []byte("first"))
	v.setVersioning(t, "suspended", store.VersioningSuspended)
	if null := v.put(t, "suspended", "k", []byte("null version")); null.VersionID != store.NullVersion {
		t.Fatalf("put on a suspended bucket: version %q", null.VersionID)
	}
	if removed, err := v.RemoveObjectWithBlobs(ctx, "suspended", "k", []int64{v.Object(t, "suspended", "k").Blob}, false); err != nil || !removed {
		t.Fatalf("remove the null version: %v, %v", removed, err)
	}
	check("suspended", "k", store.NullVersion, []mver{{id: first.VersionID, data: []byte("first")}})
}
