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
// bytes (protocol.RemoveVersionWithBlobs through the engine's GC, for the current
// version) removes the
// current row of a key that references one of the blobs, directly or
// through its manifest, and nothing else; a repeat removes nothing. Object
// Lock decides as for every removal for good: a legal hold and a running
// COMPLIANCE retention keep their version with or without the bypass, a
// running GOVERNANCE retention yields to the bypass only. On a bucket with
// versioning the next newest version takes the removed one's place
// (testRemoveVersionWithBlobs).
func testRemoveObjectWithBlobs(t *testing.T, v *Env) {
	ctx := context.Background()
	if v.RemoveVersionWithBlobs == nil {
		t.Fatal("the Env has no RemoveVersionWithBlobs")
	}
	v.objectLockBucket(t)
	remove := func(key string, ids []int64, bypass bool, want bool) error {
		t.Helper()
		removed, err := v.RemoveVersionWithBlobs(ctx, "b", key, "", ids, bypass)
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
	part := v.newBlobs(t, before)
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

// newBlobs returns the ids of the blobs stored since v.Content(t)["blobs"]
// was before.
func (v *Env) newBlobs(t *testing.T, before []string) []int64 {
	t.Helper()
	var ids []int64
	for _, s := range v.Content(t)["blobs"] {
		if !slices.Contains(before, s) {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	return ids
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
	removed, err := v.RemoveVersionWithBlobs(ctx, "b", "versioned", "", []int64{blob}, false)
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
	if removed, err := v.RemoveVersionWithBlobs(ctx, "b", "marked", "", []int64{blob}, false); err != nil || !removed {
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
	if removed, err := v.RemoveVersionWithBlobs(ctx, "suspended", "k", "", []int64{v.Object(t, "suspended", "k").Blob}, false); err != nil || !removed {
		t.Fatalf("remove the null version: %v, %v", removed, err)
	}
	check("suspended", "k", store.NullVersion, []mver{{id: first.VersionID, data: []byte("first")}})

	testRemoveNoncurrentWithBlobs(t, v, put, check)
}

// testRemoveNoncurrentWithBlobs: a noncurrent version without bytes goes
// as a DELETE of its version id would remove it, directly or through its
// manifest, and the current version stays current and whole; Object Lock
// decides as for the current version; a version that no longer references
// the blobs (or a delete marker, which references none) stays.
func testRemoveNoncurrentWithBlobs(t *testing.T, v *Env, put func(key string, seed uint64, l *store.ObjectLock) int64,
	check func(bucket, key, removed string, want []mver)) {
	ctx := context.Background()
	remove := func(bucket, key, versionID string, ids []int64, bypass bool, want bool) error {
		t.Helper()
		removed, err := v.RemoveVersionWithBlobs(ctx, bucket, key, versionID, ids, bypass)
		if removed != want {
			t.Fatalf("remove version %s of %s/%s (blobs %v, bypass %v): removed %v (%v), want %v", versionID, bucket, key, ids, bypass, removed, err, want)
		}
		return err
	}
	head := func(key string) store.ObjectInfo {
		t.Helper()
		i, _, _, err := v.Store.GetObject(ctx, "b", key, store.GetOptions{}, true)
		if err != nil {
			t.Fatalf("HEAD b/%s: %v", key, err)
		}
		return i
	}
	// versions puts v1 (noncurrent, with l) and v2 (current) at key and
	// returns them, v1's blob and the expected versions, newest first.
	versions := func(key string, seed uint64, l *store.ObjectLock) (v1, v2 store.ObjectInfo, blob1 int64, want []mver) {
		t.Helper()
		blob1 = put(key, seed, l)
		v1 = head(key)
		put(key, seed+1, nil)
		v2 = head(key)
		return v1, v2, blob1, []mver{{id: v2.VersionID, data: Bytes(seed+1, Knee+10)}, {id: v1.VersionID, data: Bytes(seed, Knee+10)}}
	}
	same := func(bucket, key string, want []mver) {
		t.Helper()
		got, _ := v.listAllVersions(t, bucket, store.ListVersionsParams{Prefix: key})
		sameVersions(t, "versions of "+key+" after the repair", got, (&vmodel{keys: map[string][]mver{key: want}}).want(bucket))
		v.checkVersionReads(t, bucket, key, want)
	}

	// v1 goes, v2 stays current and byte-exact; only once; the current
	// version named by its id goes only for its own blobs.
	v1, v2, blob1, want := versions("nc", 71, nil)
	if err := remove("b", "nc", v2.VersionID, []int64{blob1}, false, false); err != nil {
		t.Fatal(err)
	}
	if err := remove("b", "nc", v1.VersionID, []int64{blob1}, false, true); err != nil {
		t.Fatal(err)
	}
	check("b", "nc", v1.VersionID, want[:1])
	if err := remove("b", "nc", v1.VersionID, []int64{blob1}, false, false); err != nil {
		t.Fatal(err)
	}

	// A noncurrent multipart version goes by its manifest's blob.
	before := v.Content(t)["blobs"]
	uploadID, parts, _ := v.upload(t, "b", "ncmp", store.ObjectMeta{}, "", "", 73, 100)
	mp, err := v.Store.CompleteMultipartUpload(ctx, "b", "ncmp", uploadID, completeAll(parts), store.PutOptions{})
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	part := v.newBlobs(t, before)
	put("ncmp", 74, nil)
	cur := head("ncmp")
	if err := remove("b", "ncmp", mp.VersionID, part, false, true); err != nil {
		t.Fatal(err)
	}
	check("b", "ncmp", mp.VersionID, []mver{{id: cur.VersionID, data: Bytes(74, Knee+10)}})

	// Object Lock (retentions long enough that no slow step sees them end).
	hour := time.Now().Add(time.Hour).UTC()
	v1, _, blob1, want = versions("nccomp", 75, &store.ObjectLock{Mode: store.LockCompliance, RetainUntil: &hour})
	// Not its blobs: left before Object Lock is asked.
	if err := remove("b", "nccomp", v1.VersionID, []int64{v.Object(t, "b", "nccomp").Blob}, true, false); err != nil {
		t.Fatalf("noncurrent COMPLIANCE, another blob: %v", err)
	}
	wantLocked(t, "noncurrent COMPLIANCE with bypass", remove("b", "nccomp", v1.VersionID, []int64{blob1}, true, false))
	same("b", "nccomp", want)
	v1, _, blob1, want = versions("nchold", 77, &store.ObjectLock{LegalHold: store.LegalHoldOn})
	wantLocked(t, "noncurrent legal hold with bypass", remove("b", "nchold", v1.VersionID, []int64{blob1}, true, false))
	same("b", "nchold", want)
	v1, _, blob1, want = versions("ncgov", 79, &store.ObjectLock{Mode: store.LockGovernance, RetainUntil: &hour})
	wantLocked(t, "noncurrent GOVERNANCE", remove("b", "ncgov", v1.VersionID, []int64{blob1}, false, false))
	same("b", "ncgov", want)
	if err := remove("b", "ncgov", v1.VersionID, []int64{blob1}, true, true); err != nil {
		t.Fatalf("noncurrent GOVERNANCE with bypass: %v", err)
	}
	check("b", "ncgov", v1.VersionID, want[:1])

	// A delete marker references no blob: it stays.
	marker, err := v.Store.DeleteObjectVersion(ctx, "b", "nc", store.DeleteOptions{})
	if err != nil || !marker.DeleteMarker {
		t.Fatalf("delete nc: %+v, %v", marker, err)
	}
	if err := remove("b", "nc", marker.VersionID, []int64{blob1, v.Object(t, "b", "ncgov").Blob}, false, false); err != nil {
		t.Fatal(err)
	}

	// Replaced meanwhile: the noncurrent null version that referenced the
	// blob was replaced by a put on the suspended bucket (a current null
	// version with other bytes); the version named "null" stays.
	v.put(t, "suspended", "nullk", []byte("old null"))
	old := v.Object(t, "suspended", "nullk").Blob
	v.setVersioning(t, "suspended", store.VersioningEnabled)
	enabled := v.put(t, "suspended", "nullk", []byte("enabled"))
	v.setVersioning(t, "suspended", store.VersioningSuspended)
	v.put(t, "suspended", "nullk", []byte("new null"))
	if err := remove("suspended", "nullk", store.NullVersion, []int64{old}, false, false); err != nil {
		t.Fatal(err)
	}
	same("suspended", "nullk", []mver{{id: store.NullVersion, data: []byte("new null")}, {id: enabled.VersionID, data: []byte("enabled")}})
}
