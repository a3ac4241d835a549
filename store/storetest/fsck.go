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
// running GOVERNANCE retention yields to the bypass only.
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
	v.Idle(t)
}
