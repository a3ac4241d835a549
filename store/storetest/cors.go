package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// testBucketCors round-trips a bucket's CORS rules: none at first, replaced
// whole by a second put, gone after a delete and with the bucket, and
// NoSuchBucket for a bucket that does not exist.
func testBucketCors(t *testing.T, v *Env) {
	ctx := context.Background()
	st := v.Store
	if _, err := st.GetBucketCors(ctx, "b"); !errors.Is(err, store.ErrNoSuchCORSConfiguration) {
		t.Fatalf("GetBucketCors before any put: %v, want ErrNoSuchCORSConfiguration", err)
	}
	age := 600
	first := []store.CORSRule{
		{ID: "one", AllowedOrigins: []string{"https://*.example.com"}, AllowedMethods: []string{"GET", "HEAD"},
			AllowedHeaders: []string{"x-amz-*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: &age},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"PUT"}},
	}
	second := []store.CORSRule{{AllowedOrigins: []string{"http://127.0.0.1:1"}, AllowedMethods: []string{"POST"}}}
	for _, rules := range [][]store.CORSRule{first, second} {
		if err := st.PutBucketCors(ctx, "b", rules); err != nil {
			t.Fatalf("PutBucketCors: %v", err)
		}
		got, err := st.GetBucketCors(ctx, "b")
		if err != nil {
			t.Fatalf("GetBucketCors: %v", err)
		}
		if !reflect.DeepEqual(got, rules) {
			t.Fatalf("GetBucketCors = %+v, want %+v", got, rules)
		}
	}
	if err := st.DeleteBucketCors(ctx, "b"); err != nil {
		t.Fatalf("DeleteBucketCors: %v", err)
	}
	if _, err := st.GetBucketCors(ctx, "b"); !errors.Is(err, store.ErrNoSuchCORSConfiguration) {
		t.Fatalf("GetBucketCors after delete: %v, want ErrNoSuchCORSConfiguration", err)
	}
	if err := st.DeleteBucketCors(ctx, "b"); err != nil {
		t.Fatalf("DeleteBucketCors of none: %v", err)
	}

	// The rules go with their bucket: a bucket made again has none.
	if err := st.CreateBucket(ctx, "cors-gone", ""); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if err := st.PutBucketCors(ctx, "cors-gone", first); err != nil {
		t.Fatalf("PutBucketCors: %v", err)
	}
	if err := st.DeleteBucket(ctx, "cors-gone"); err != nil {
		t.Fatalf("DeleteBucket with CORS rules: %v", err)
	}
	if err := st.CreateBucket(ctx, "cors-gone", ""); err != nil {
		t.Fatalf("CreateBucket again: %v", err)
	}
	if _, err := st.GetBucketCors(ctx, "cors-gone"); !errors.Is(err, store.ErrNoSuchCORSConfiguration) {
		t.Fatalf("GetBucketCors of a re-created bucket: %v, want ErrNoSuchCORSConfiguration", err)
	}

	for name, call := range map[string]func() error{
		"put":    func() error { return st.PutBucketCors(ctx, "nobucket", first) },
		"get":    func() error { _, err := st.GetBucketCors(ctx, "nobucket"); return err },
		"delete": func() error { return st.DeleteBucketCors(ctx, "nobucket") },
	} {
		if err := call(); !errors.Is(err, store.ErrNoSuchBucket) {
			t.Errorf("%s on a missing bucket: %v, want ErrNoSuchBucket", name, err)
		}
	}
}

// testBucketCorsRace races PutBucketCors with DeleteBucket: each either
// succeeds or finds no bucket (never another error), and rules never outlive
// their bucket.
func testBucketCorsRace(t *testing.T, v *Env) {
	ctx := context.Background()
	st := v.Store
	rules := []store.CORSRule{{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}}}
	for i := range 25 {
		name := fmt.Sprintf("cors-race-%d", i)
		if err := st.CreateBucket(ctx, name, ""); err != nil {
			t.Fatalf("CreateBucket: %v", err)
		}
		var putErr, delErr error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() { <-start; putErr = st.PutBucketCors(ctx, name, rules) })
		wg.Go(func() { <-start; delErr = st.DeleteBucket(ctx, name) })
		close(start)
		wg.Wait()
		if delErr != nil {
			t.Fatalf("DeleteBucket racing PutBucketCors: %v", delErr)
		}
		if putErr != nil && !errors.Is(putErr, store.ErrNoSuchBucket) {
			t.Fatalf("PutBucketCors racing DeleteBucket: %v, want success or ErrNoSuchBucket", putErr)
		}
		if err := st.CreateBucket(ctx, name, ""); err != nil {
			t.Fatalf("CreateBucket again: %v", err)
		}
		if _, err := st.GetBucketCors(ctx, name); !errors.Is(err, store.ErrNoSuchCORSConfiguration) {
			t.Fatalf("rules outlived their bucket: GetBucketCors = %v", err)
		}
	}
}
