package embedded

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

func TestAccessKeys(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	created := time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC)

	steps := []struct {
		name string
		run  func() error
		want error
	}{
		{"create scoped read-only", func() error {
			return e.CreateKey(ctx, store.AccessKey{ID: "AKB", Secret: "sb", Buckets: []string{"x", "y"}, ReadOnly: true, Created: created})
		}, nil},
		{"create unscoped", func() error { return e.CreateKey(ctx, store.AccessKey{ID: "AKA", Secret: "sa"}) }, nil},
		{"ids are case-sensitive", func() error { return e.CreateKey(ctx, store.AccessKey{ID: "aka", Secret: "lower"}) }, nil},
		{"duplicate refused", func() error { return e.CreateKey(ctx, store.AccessKey{ID: "AKA", Secret: "other", ReadOnly: true}) }, store.ErrAccessKeyExists},
		{"empty id refused", func() error { return e.CreateKey(ctx, store.AccessKey{Secret: "s"}) }, store.ErrInvalidArgument},
		{"empty secret refused", func() error { return e.CreateKey(ctx, store.AccessKey{ID: "AKC"}) }, store.ErrInvalidArgument},
		{"get missing", func() error { _, err := e.GetKey(ctx, "nope"); return err }, store.ErrNoSuchAccessKey},
		{"delete missing", func() error { return e.DeleteKey(ctx, "nope") }, store.ErrNoSuchAccessKey},
	}
	for _, s := range steps {
		if err := s.run(); !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.want)
		}
	}

	a, err := e.GetKey(ctx, "AKA")
	if err != nil {
		t.Fatalf("GetKey AKA: %v", err)
	}
	if a.Secret != "sa" || a.ReadOnly || a.Buckets != nil || a.Created.IsZero() {
		t.Errorf("AKA = %+v, want secret sa, read-write, all buckets, a creation time", a)
	}
	b, err := e.GetKey(ctx, "AKB")
	if err != nil {
		t.Fatalf("GetKey AKB: %v", err)
	}
	if b.Secret != "sb" || !b.ReadOnly || !slices.Equal(b.Buckets, []string{"x", "y"}) || !b.Created.Equal(created) {
		t.Errorf("AKB = %+v", b)
	}

	keys, err := e.ListKeys(ctx)
	if err != nil {
		t.Fatalf("ListKeys: %v", err)
	}
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	if !slices.Equal(ids, []string{"AKA", "AKB", "aka"}) {
		t.Fatalf("ListKeys ids = %v, want [AKA AKB aka] (byte order)", ids)
	}

	if err := e.DeleteKey(ctx, "AKA"); err != nil {
		t.Fatalf("DeleteKey: %v", err)
	}
	if _, err := e.GetKey(ctx, "AKA"); !errors.Is(err, store.ErrNoSuchAccessKey) {
		t.Fatalf("GetKey after delete: %v", err)
	}
	if err := e.DeleteKey(ctx, "AKA"); !errors.Is(err, store.ErrNoSuchAccessKey) {
		t.Fatalf("second DeleteKey: %v", err)
	}
	if _, err := e.GetKey(ctx, "aka"); err != nil {
		t.Fatalf("deleting AKA touched aka: %v", err)
	}
}

// TestAccessKeysAcrossOpens: the admin command opens the same data directory
// while the gateway runs; what it creates or deletes is seen at once, and the
// keys survive a reopen.
func TestAccessKeysAcrossOpens(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	gw, admin := openAt(t, dir), openKeysOnly(t, dir)
	if err := admin.CreateKey(ctx, store.AccessKey{ID: "AK1", Secret: "s1", Buckets: []string{"b"}}); err != nil {
		t.Fatal(err)
	}
	if k, err := gw.GetKey(ctx, "AK1"); err != nil || k.Secret != "s1" || !slices.Equal(k.Buckets, []string{"b"}) {
		t.Fatalf("gateway GetKey after create = %+v, %v", k, err)
	}
	if err := gw.CreateKey(ctx, store.AccessKey{ID: "AK1", Secret: "x"}); !errors.Is(err, store.ErrAccessKeyExists) {
		t.Fatalf("duplicate through the other handle: %v", err)
	}
	if err := admin.DeleteKey(ctx, "AK1"); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.GetKey(ctx, "AK1"); !errors.Is(err, store.ErrNoSuchAccessKey) {
		t.Fatalf("gateway GetKey after delete: %v", err)
	}
	if err := admin.CreateKey(ctx, store.AccessKey{ID: "AK2", Secret: "s2"}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Close(); err != nil {
		t.Fatal(err)
	}
	again := openKeysOnly(t, dir)
	if k, err := again.GetKey(ctx, "AK2"); err != nil || k.Secret != "s2" {
		t.Fatalf("after reopen: %+v, %v", k, err)
	}
}

// openKeysOnly opens dir as the admin command does, beside a running
// gateway (which holds the data directory's lock).
func openKeysOnly(t *testing.T, dir string) *Engine {
	t.Helper()
	e, err := Open(context.Background(), Config{Dir: dir, KeysOnly: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}
