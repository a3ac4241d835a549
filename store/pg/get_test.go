package pg

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
)

// The current object's statement leaves the manifest out: a single-blob
// object must resolve exactly as the full statement resolves it (metadata
// decoded or empty), and a multipart one is resolved again with its
// manifest, in autocommit and in a transaction that holds the row.
func TestResolveCurrentMatchesFullStatement(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	ctx := context.Background()
	v.put(t, "plain", randBytes(1, 4096))
	meta := store.ObjectMeta{ContentType: "text/plain", CacheControl: "no-cache", User: map[string]string{"origin": "test"}}
	if _, err := v.e.PutObject(ctx, "b", "meta", bytes.NewReader(randBytes(2, 10)), store.PutOptions{Size: 10, Meta: meta}); err != nil {
		t.Fatalf("put meta: %v", err)
	}
	up, err := v.e.CreateMultipartUpload(ctx, "b", "mp", store.ObjectMeta{ContentType: "a/b"}, "", "")
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	var done []store.CompletePart
	for i, p := range [][]byte{randBytes(3, 5<<20), randBytes(4, 1000)} {
		pi, err := v.e.UploadPart(ctx, "b", "mp", up.UploadID, i+1, bytes.NewReader(p), store.PutOptions{Size: int64(len(p))})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", i+1, err)
		}
		done = append(done, store.CompletePart{Number: i + 1, ETag: pi.ETag})
	}
	if _, err := v.e.CompleteMultipartUpload(ctx, "b", "mp", up.UploadID, done, store.PutOptions{}); err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	mpMeta := store.ObjectMeta{ContentType: "a/b", CompletedUpload: up.UploadID}
	for _, c := range []struct {
		key       string
		parts     int
		meta      store.ObjectMeta
		forShare  bool
		hasInline bool
	}{
		{key: "plain", hasInline: true},
		{key: "meta", meta: meta, hasInline: true},
		{key: "mp", parts: 2, meta: mpMeta},
		{key: "plain", forShare: true, hasInline: true},
		{key: "mp", parts: 2, meta: mpMeta, forShare: true},
	} {
		err := v.e.withTx(ctx, func(tx pgx.Tx) error {
			var q rowQuerier = v.e.pool
			if c.forShare {
				q = tx
			}
			got, err := resolveObject(ctx, q, "b", c.key, nil, true, c.forShare)
			if err != nil {
				t.Fatalf("%s: resolveObject: %v", c.key, err)
			}
			want, err := resolveRow(ctx, q, "b", c.key, nil, true, c.forShare, true)
			if err != nil {
				t.Fatalf("%s: resolveRow: %v", c.key, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s (forShare %v): resolved\n%+v\nthe full statement\n%+v", c.key, c.forShare, got, want)
			}
			if len(got.Parts) != c.parts || len(got.Info.Parts) != c.parts {
				t.Errorf("%s: %d manifest entries, %d part infos, want %d", c.key, len(got.Parts), len(got.Info.Parts), c.parts)
			}
			if !reflect.DeepEqual(got.Info.Meta, c.meta) {
				t.Errorf("%s: meta %+v, want %+v", c.key, got.Info.Meta, c.meta)
			}
			if (got.Blob != nil && got.Blob.Inline != nil) != c.hasInline {
				t.Errorf("%s: inline bytes %v, want %v", c.key, got.Blob != nil && got.Blob.Inline != nil, c.hasInline)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
	}
}
