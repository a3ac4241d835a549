package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
)

func openKeys(t *testing.T, dsn string) *Engine {
	t.Helper()
	e, err := Open(context.Background(), Config{DatabaseURL: dsn, Large: LargePGChunks})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

func TestAccessKeys(t *testing.T) {
	ctx := context.Background()
	e := openKeys(t, pgtest.DSN(t))
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

	// The duplicate left the first key as it was.
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
	if got := keyIDs(keys); !slices.Equal(got, []string{"AKA", "AKB", "aka"}) {
		t.Fatalf("ListKeys ids = %v, want [AKA AKB aka] (byte order)", got)
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

// TestAccessKeysAcrossInstances: a key created or deleted through one engine
// (the admin command) is seen at once by another (a running gateway).
func TestAccessKeysAcrossInstances(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	gw, admin := openKeys(t, dsn), openKeys(t, dsn)
	if err := admin.CreateKey(ctx, store.AccessKey{ID: "AK1", Secret: "s1"}); err != nil {
		t.Fatal(err)
	}
	if k, err := gw.GetKey(ctx, "AK1"); err != nil || k.Secret != "s1" {
		t.Fatalf("gateway GetKey after create = %+v, %v", k, err)
	}
	if err := admin.DeleteKey(ctx, "AK1"); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.GetKey(ctx, "AK1"); !errors.Is(err, store.ErrNoSuchAccessKey) {
		t.Fatalf("gateway GetKey after delete: %v", err)
	}
}

// TestAccessKeysTablePrivate: another role of the same server cannot read the
// secrets.
func TestAccessKeysTablePrivate(t *testing.T) {
	ctx := context.Background()
	e := openKeys(t, pgtest.DSN(t))
	role := fmt.Sprintf("s3gate_other_%d", time.Now().UnixNano())
	if _, err := e.pool.Exec(ctx, `CREATE ROLE `+role); err != nil {
		t.Fatalf("create role: %v", err)
	}
	t.Cleanup(func() { _, _ = e.pool.Exec(context.Background(), `DROP ROLE `+role) })
	var can bool
	if err := e.pool.QueryRow(ctx, `SELECT has_table_privilege($1, 'access_keys', 'SELECT')`, role).Scan(&can); err != nil {
		t.Fatal(err)
	}
	if can {
		t.Error("another role can SELECT access_keys")
	}
}

func keyIDs(keys []store.AccessKey) []string {
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.ID)
	}
	return ids
}

// TestRootKeyCreatedOnce: instances starting together on one database, each
// with its own pool and its own candidate pair, all end with the same stored
// root key, and exactly one of them created it.
func TestRootKeyCreatedOnce(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	const n = 8
	engines := make([]*Engine, n)
	for i := range engines {
		engines[i] = openKeys(t, dsn)
	}
	if _, err := engines[0].RootKey(ctx); !errors.Is(err, store.ErrNoSuchAccessKey) {
		t.Fatalf("RootKey before any was created: %v, want ErrNoSuchAccessKey", err)
	}
	type result struct {
		k       store.AccessKey
		created bool
		err     error
	}
	start := make(chan struct{})
	results := make(chan result, n)
	for i, e := range engines {
		go func() {
			<-start
			k, created, err := e.CreateRootKey(ctx, store.AccessKey{ID: fmt.Sprintf("ROOT%d", i), Secret: fmt.Sprintf("secret-%d", i)})
			results <- result{k, created, err}
		}()
	}
	close(start)
	var creators int
	var first store.AccessKey
	for i := range n {
		r := <-results
		if r.err != nil {
			t.Fatalf("CreateRootKey: %v", r.err)
		}
		if r.created {
			creators++
		}
		if i == 0 {
			first = r.k
		}
		if r.k.ID != first.ID || r.k.Secret != first.Secret || r.k.Secret != "secret-"+strings.TrimPrefix(r.k.ID, "ROOT") {
			t.Fatalf("instances got different root keys: %+v and %+v", first, r.k)
		}
	}
	if creators != 1 {
		t.Fatalf("%d instances report creating the root key, want 1", creators)
	}
	got, err := engines[0].RootKey(ctx)
	if err != nil || got.ID != first.ID || got.Created.IsZero() {
		t.Fatalf("RootKey = %+v, %v; want %s with a creation time", got, err, first.ID)
	}
}
