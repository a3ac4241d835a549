package pg

import (
	"bytes"
	"context"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// TestVersionStatements: versioning costs an unversioned bucket no
// statement (its state rides in the statement that locks the current row),
// and a versioned overwrite one more than an unversioned one (the demotion,
// manifest included, is one statement).
func TestVersionStatements(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	ctx := context.Background()
	if err := v.e.CreateBucket(ctx, "v", ""); err != nil {
		t.Fatal(err)
	}
	if err := v.e.SetBucketVersioning(ctx, "v", store.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	c := countStatements(t, v)
	cost := func(op func() error) int64 {
		t.Helper()
		before := c.n.Load()
		if err := op(); err != nil {
			t.Fatal(err)
		}
		return c.n.Load() - before
	}
	put := func(bucket, key string, seed uint64) func() error {
		return func() error {
			data := randBytes(seed, 100)
			_, err := v.e.PutObject(ctx, bucket, key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
			return err
		}
	}
	del := func(bucket, key string) func() error {
		return func() error { return v.e.DeleteObject(ctx, bucket, key) }
	}
	got := map[string]int64{
		"unversioned put":       cost(put("b", "k", 1)),
		"unversioned overwrite": cost(put("b", "k", 2)),
		"unversioned delete":    cost(del("b", "k")),
		"versioned put":         cost(put("v", "k", 1)),
		"versioned overwrite":   cost(put("v", "k", 2)),
		"versioned delete":      cost(del("v", "k")),
	}
	t.Logf("statements: %v", got)
	if got["versioned put"] != got["unversioned put"] || got["unversioned overwrite"] != got["unversioned put"] {
		t.Fatalf("a put of a new key or an unversioned overwrite costs more than the other: %v", got)
	}
	if got["versioned overwrite"] != got["unversioned overwrite"]+1 {
		t.Fatalf("a versioned overwrite costs %d statements, an unversioned one %d: want one more", got["versioned overwrite"], got["unversioned overwrite"])
	}
}
