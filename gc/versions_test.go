package gc

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// TestVersionsKeepBlobs: noncurrent versions (single blobs and the parts of
// a multipart version) and delete markers keep their blobs through sweeps;
// deleting a version for good lets GC reclaim exactly the blob only it
// referenced, and nothing else.
func TestVersionsKeepBlobs(t *testing.T) {
	for _, mode := range engines {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			if err := v.eng.SetBucketVersioning(ctx, v.bucket, store.VersioningEnabled); err != nil {
				t.Fatal(err)
			}
			put := func(key string, data []byte) string {
				t.Helper()
				info, err := v.eng.PutObject(ctx, v.bucket, key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
				if err != nil {
					t.Fatal(err)
				}
				return info.VersionID
			}
			small, large, latest, part, over := content(1), content(4), content(5), content(11), content(7)
			vSmall := put("k", small)
			vLarge := put("k", large)
			put("k", latest)
			put("k", small) // a version of the same content: one blob for two versions
			if _, err := v.eng.DeleteObjectVersion(ctx, v.bucket, "k", store.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			// A multipart version (one part) made noncurrent.
			u, err := v.eng.CreateMultipartUpload(ctx, v.bucket, "m", store.ObjectMeta{}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			pi, err := v.eng.UploadPart(ctx, v.bucket, "m", u.UploadID, 1, bytes.NewReader(part), store.PutOptions{Size: int64(len(part))})
			if err != nil {
				t.Fatal(err)
			}
			mp, err := v.eng.CompleteMultipartUpload(ctx, v.bucket, "m", u.UploadID, []store.CompletePart{{Number: 1, ETag: pi.ETag}}, store.PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			put("m", over)
			blobs := v.count(t, `SELECT count(*) FROM blobs`)
			if blobs != 5 {
				t.Fatalf("%d blobs, want 5", blobs)
			}
			if st := v.settle(t); st.BlobsDeleted != 0 {
				t.Fatalf("GC reclaimed %d blobs that versions reference", st.BlobsDeleted)
			}
			read := func(key, id string, want []byte) {
				t.Helper()
				_, _, rd, err := v.eng.GetObject(ctx, v.bucket, key, store.GetOptions{VersionID: id}, false)
				if err != nil {
					t.Fatalf("GET %s?versionId=%s: %v", key, id, err)
				}
				got, err := io.ReadAll(rd)
				_ = rd.Close()
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("GET %s?versionId=%s: %d bytes, %v", key, id, len(got), err)
				}
			}
			read("k", vSmall, small)
			read("k", vLarge, large)
			read("m", mp.VersionID, part)
			for _, c := range []struct {
				key, id string
				bytes   int
			}{
				{"k", vLarge, len(large)},      // only this version referenced it
				{"m", mp.VersionID, len(part)}, // the part of a multipart version
				{"k", vSmall, 0},               // a later version has the same content
			} {
				if _, err := v.eng.DeleteObjectVersion(ctx, v.bucket, c.key, store.DeleteOptions{VersionID: c.id}); err != nil {
					t.Fatal(err)
				}
				want := int64(0)
				if c.bytes > 0 {
					want = 1
				}
				st := v.settle(t)
				if st.BlobsDeleted != want || st.BytesReclaimed != int64(c.bytes) {
					t.Fatalf("deleting version %s of %s: GC reclaimed %d blobs, %d bytes; want %d, %d",
						c.id, c.key, st.BlobsDeleted, st.BytesReclaimed, want, c.bytes)
				}
				blobs -= int(want)
				if n := v.count(t, `SELECT count(*) FROM blobs`); n != blobs {
					t.Fatalf("%d blobs left, want %d", n, blobs)
				}
			}
			v.assertNoOrphans(t)
			if err := v.check(ctx, "m", over); err != nil {
				t.Fatal(err)
			}
		})
	}
}
