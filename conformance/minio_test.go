package conformance

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/s3gate/s3gate/internal/testgw"
)

// TestMinio drives the gateway with minio-go v7, which sends
// STREAMING-AWS4-HMAC-SHA256-PAYLOAD (or its -TRAILER form) over HTTP and
// unsigned payloads over HTTPS.
func TestMinio(t *testing.T) {
	forEachCombo(t, func(t *testing.T, cb combo, gw *testgw.Gateway) {
		rgw, wire := recordingGateway(gw)
		mc := minioClient(t, rgw)
		t.Cleanup(func() {
			t.Logf("minio-go PUT wire formats over %s: %s", cb.Transport, wire)
			// Prove that minio-go's wire format of this transport was exercised.
			ok := wire.Saw("STREAMING-AWS4-HMAC-SHA256-PAYLOAD") || wire.Saw("STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER")
			want := "STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]"
			if cb.TLS() {
				ok = wire.Saw("UNSIGNED-PAYLOAD") || wire.Saw("STREAMING-UNSIGNED-PAYLOAD-TRAILER")
				want = "UNSIGNED-PAYLOAD or STREAMING-UNSIGNED-PAYLOAD-TRAILER"
			}
			if !ok {
				t.Errorf("minio-go over %s never sent %s; saw: %s", cb.Transport, want, wire)
			}
		})
		sdk := sdkClient(t, gw)
		ctx := testCtx(t, 5*time.Minute)
		bucket := bucketName("mio")
		if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: gw.Region}); err != nil {
			t.Fatalf("MakeBucket: %v", err)
		}
		t.Cleanup(func() { emptyAndDelete(t, sdk, bucket) })
		ok, err := mc.BucketExists(ctx, bucket)
		if err != nil || !ok {
			t.Fatalf("BucketExists = %v, %v", ok, err)
		}

		// readBack fetches an object with GetObject and compares it by SHA-256.
		readBack := func(t *testing.T, key string, want []byte) {
			t.Helper()
			obj, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
			if err != nil {
				t.Fatalf("GetObject %s: %v", key, err)
			}
			defer obj.Close()
			got, n, err := shaReader(obj)
			if err != nil || got != sha(want) {
				t.Fatalf("GetObject %s: %d bytes sha %s (err %v), want %d bytes sha %s", key, n, got, err, len(want), sha(want))
			}
		}

		t.Run("PutObject", func(t *testing.T) {
			for i, tc := range []struct {
				size, partSize int
				parts          int // expected part count in the ETag; 0 = single part
			}{
				{0, 0, 0},
				{1, 0, 0},
				{1 * kib, 0, 0},
				{700 * kib, 0, 0},
				{17 * mib, 5 * mib, 4},
			} {
				t.Run(fmt.Sprintf("size=%d", tc.size), func(t *testing.T) {
					data := genBytes(uint64(200+i), tc.size)
					key := fmt.Sprintf("put/%d", tc.size)
					info, err := mc.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(tc.size), minio.PutObjectOptions{
						ContentType: "application/x-minio", PartSize: uint64(tc.partSize), UserMetadata: map[string]string{"tool": "minio"},
					})
					if err != nil {
						t.Fatalf("PutObject: %v", err)
					}
					if info.Size != int64(tc.size) {
						t.Fatalf("PutObject size %d, want %d", info.Size, tc.size)
					}
					st, err := mc.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
					if err != nil {
						t.Fatalf("StatObject: %v", err)
					}
					if st.Size != int64(tc.size) || st.ContentType != "application/x-minio" || st.UserMetadata["Tool"]+st.UserMetadata["tool"] != "minio" {
						t.Fatalf("StatObject: size %d type %q meta %v", st.Size, st.ContentType, st.UserMetadata)
					}
					if tc.parts == 0 {
						if want := fmt.Sprintf("%x", md5.Sum(data)); st.ETag != want {
							t.Fatalf("ETag %s, want %s", st.ETag, want)
						}
					} else if !strings.HasSuffix(st.ETag, fmt.Sprintf("-%d", tc.parts)) {
						t.Fatalf("ETag %s, want a %d-part ETag", st.ETag, tc.parts)
					}
					readBack(t, key, data)
				})
			}
		})

		t.Run("FPutObject", func(t *testing.T) {
			data := genBytes(210, 6*mib+123)
			path := filepath.Join(t.TempDir(), "upload.bin")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatalf("write: %v", err)
			}
			if _, err := mc.FPutObject(ctx, bucket, "fput/file.bin", path, minio.PutObjectOptions{}); err != nil {
				t.Fatalf("FPutObject: %v", err)
			}
			readBack(t, "fput/file.bin", data)
			out := filepath.Join(t.TempDir(), "download.bin")
			if err := mc.FGetObject(ctx, bucket, "fput/file.bin", out, minio.GetObjectOptions{}); err != nil {
				t.Fatalf("FGetObject: %v", err)
			}
			got, err := os.ReadFile(out)
			if err != nil || sha(got) != sha(data) {
				t.Fatalf("FGetObject: %d bytes (err %v), want %d", len(got), err, len(data))
			}
			// A ranged read through minio's ReadAt.
			obj, err := mc.GetObject(ctx, bucket, "fput/file.bin", minio.GetObjectOptions{})
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			defer obj.Close()
			buf := make([]byte, 1000)
			if _, err := obj.ReadAt(buf, 5*mib); err != nil {
				t.Fatalf("ReadAt: %v", err)
			}
			if !bytes.Equal(buf, data[5*mib:5*mib+1000]) {
				t.Fatalf("ReadAt returned wrong bytes")
			}
		})

		t.Run("ListObjects", func(t *testing.T) {
			for _, k := range []string{"lst/a", "lst/b/c", "lst/b/d", "lst/e f"} {
				if _, err := mc.PutObject(ctx, bucket, k, strings.NewReader(k), int64(len(k)), minio.PutObjectOptions{}); err != nil {
					t.Fatalf("PutObject %s: %v", k, err)
				}
			}
			list := func(recursive bool) []string {
				var keys []string
				for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "lst/", Recursive: recursive}) {
					if o.Err != nil {
						t.Fatalf("ListObjects: %v", o.Err)
					}
					keys = append(keys, o.Key)
				}
				return keys
			}
			if got, want := list(true), []string{"lst/a", "lst/b/c", "lst/b/d", "lst/e f"}; !slices.Equal(got, want) {
				t.Fatalf("recursive: %q, want %q", got, want)
			}
			// Not recursive: the common prefix lst/b/ is listed as a key of its own
			// (minio-go yields a page's keys before its prefixes, so sort).
			nonRec := list(false)
			sort.Strings(nonRec)
			if got, want := nonRec, []string{"lst/a", "lst/b/", "lst/e f"}; !slices.Equal(got, want) {
				t.Fatalf("non-recursive: %q, want %q", got, want)
			}
			// The V1 listing as well.
			var v1 []string
			for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "lst/", Recursive: true, UseV1: true, MaxKeys: 2}) {
				if o.Err != nil {
					t.Fatalf("ListObjects V1: %v", o.Err)
				}
				v1 = append(v1, o.Key)
			}
			if want := []string{"lst/a", "lst/b/c", "lst/b/d", "lst/e f"}; !slices.Equal(v1, want) {
				t.Fatalf("V1 recursive: %q, want %q", v1, want)
			}
		})

		t.Run("Remove", func(t *testing.T) {
			var keys []string
			for i := range 30 {
				k := fmt.Sprintf("rm/%02d", i)
				keys = append(keys, k)
				if _, err := mc.PutObject(ctx, bucket, k, strings.NewReader(k), int64(len(k)), minio.PutObjectOptions{}); err != nil {
					t.Fatalf("PutObject %s: %v", k, err)
				}
			}
			if err := mc.RemoveObject(ctx, bucket, keys[0], minio.RemoveObjectOptions{}); err != nil {
				t.Fatalf("RemoveObject: %v", err)
			}
			if _, err := mc.StatObject(ctx, bucket, keys[0], minio.StatObjectOptions{}); minio.ToErrorResponse(err).StatusCode != http.StatusNotFound {
				t.Fatalf("StatObject after RemoveObject: %v, want 404", err)
			}
			ch := make(chan minio.ObjectInfo, len(keys))
			for _, k := range keys[1:20] {
				ch <- minio.ObjectInfo{Key: k}
			}
			close(ch)
			for e := range mc.RemoveObjects(ctx, bucket, ch, minio.RemoveObjectsOptions{}) {
				t.Fatalf("RemoveObjects: %s: %v", e.ObjectName, e.Err)
			}
			left := listKeys(t, sdk, bucket, "rm/")
			sort.Strings(left)
			if !slices.Equal(left, keys[20:]) {
				t.Fatalf("after RemoveObjects: %q, want %q", left, keys[20:])
			}
		})

		t.Run("Presigned", func(t *testing.T) {
			data := genBytes(220, 300*kib)
			if _, err := mc.PutObject(ctx, bucket, "pre/get me", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			u, err := mc.PresignedGetObject(ctx, bucket, "pre/get me", 10*time.Minute, nil)
			if err != nil {
				t.Fatalf("PresignedGetObject: %v", err)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
			status, _, body := send(t, gw, req)
			if status != http.StatusOK || sha(body) != sha(data) {
				t.Fatalf("presigned GET: HTTP %d, %d bytes, want 200 and %d bytes; body %.300s", status, len(body), len(data), body)
			}

			put := genBytes(221, 900*kib)
			pu, err := mc.PresignedPutObject(ctx, bucket, "pre/put me", 10*time.Minute)
			if err != nil {
				t.Fatalf("PresignedPutObject: %v", err)
			}
			req, _ = http.NewRequestWithContext(ctx, http.MethodPut, pu.String(), bytes.NewReader(put))
			status, _, body = send(t, gw, req)
			if status != http.StatusOK {
				t.Fatalf("presigned PUT: HTTP %d: %.300s", status, body)
			}
			readBack(t, "pre/put me", put)
		})
	})
}
