package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// testBucketUsage: the usage counts (store.UsageStore, and the same figures
// in BlobStats) see current objects, noncurrent versions, delete markers and
// uploads per bucket, each bucket on its own.
func testBucketUsage(t *testing.T, v *Env) {
	ctx := context.Background()
	us, ok := v.Store.(store.UsageStore)
	if !ok {
		t.Fatalf("%T keeps no usage counts", v.Store)
	}
	v.setVersioning(t, "b", store.VersioningEnabled)
	v.put(t, "b", "k1", []byte("one"))
	v.put(t, "b", "k1", []byte("one, again")) // "one" is noncurrent now
	v.put(t, "b", "k2", []byte("two"))
	if _, err := v.Store.DeleteObjectVersion(ctx, "b", "k2", store.DeleteOptions{}); err != nil { // a marker; "two" is noncurrent
		t.Fatal(err)
	}
	if _, err := v.Store.CreateMultipartUpload(ctx, "b", "up", store.ObjectMeta{}, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := v.Store.CreateBucket(ctx, "empty", ""); err != nil {
		t.Fatal(err)
	}
	want := []store.BucketUsage{
		{Bucket: "b", Objects: 1, ObjectBytes: 10, NoncurrentVersions: 2, NoncurrentBytes: 6, DeleteMarkers: 1, Uploads: 1},
		{Bucket: "empty"},
	}
	got, err := us.BucketUsage(ctx, "")
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("usage of every bucket: %+v, %v; want %+v", got, err, want)
	}
	got, err = us.BucketUsage(ctx, "b")
	if err != nil || !slices.Equal(got, want[:1]) {
		t.Fatalf("usage of b: %+v, %v; want %+v", got, err, want[:1])
	}
	if _, err := us.BucketUsage(ctx, "nope"); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Fatalf("usage of a missing bucket: %v", err)
	}
	if bs, ok := v.Store.(interface {
		BlobStats(context.Context) (store.BlobStats, error)
	}); ok {
		st, err := bs.BlobStats(ctx)
		if err != nil || !slices.Equal(st.Buckets, want) {
			t.Fatalf("BlobStats buckets: %+v, %v; want %+v", st.Buckets, err, want)
		}
		if st.LogicalBytes != 16 { // every version's bytes: 10 current, 6 noncurrent
			t.Fatalf("BlobStats logical bytes %d, want 16", st.LogicalBytes)
		}
	}
}
