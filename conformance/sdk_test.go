package conformance

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	tm "github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/crc64nvme"

	"github.com/s3gate/s3gate/internal/testgw"
)

// TestAWSSDK drives the gateway with aws-sdk-go-v2 in its default settings: over
// HTTP it signs payloads and adds x-amz-checksum-crc32, over HTTPS it streams
// STREAMING-UNSIGNED-PAYLOAD-TRAILER with a CRC32 trailer.
func TestAWSSDK(t *testing.T) {
	forEachCombo(t, func(t *testing.T, cb combo, gw *testgw.Gateway) {
		rgw, wire := recordingGateway(gw)
		c := sdkClient(t, rgw)
		t.Cleanup(func() {
			t.Logf("aws-sdk-go-v2 PUT wire formats over %s: %s", cb.Transport, wire)
			// Prove that the default wire format of this transport was exercised.
			want := "SIGNED-HEX+x-amz-checksum-crc32"
			if cb.TLS() {
				want = "STREAMING-UNSIGNED-PAYLOAD-TRAILER+trailer:x-amz-checksum-crc32"
			}
			if !wire.Saw(want) {
				t.Errorf("aws-sdk-go-v2 over %s never sent %s; saw: %s", cb.Transport, want, wire)
			}
		})
		t.Run("Buckets", func(t *testing.T) { sdkBuckets(t, c) })
		t.Run("Objects", func(t *testing.T) { sdkObjects(t, c) })
		t.Run("Ranges", func(t *testing.T) { sdkRanges(t, c) })
		t.Run("Conditional", func(t *testing.T) { sdkConditional(t, c) })
		t.Run("ResponseOverrides", func(t *testing.T) { sdkResponseOverrides(t, c) })
		t.Run("DeleteObjects", func(t *testing.T) { sdkDeleteObjects(t, c) })
		t.Run("List", func(t *testing.T) { sdkList(t, c) })
		t.Run("Copy", func(t *testing.T) { sdkCopy(t, c) })
		t.Run("Multipart", func(t *testing.T) { sdkMultipart(t, c) })
		t.Run("MultipartErrors", func(t *testing.T) { sdkMultipartErrors(t, c) })
		t.Run("UploadPartCopy", func(t *testing.T) { sdkUploadPartCopy(t, c) })
		t.Run("Checksums", func(t *testing.T) { sdkChecksums(t, c) })
		t.Run("TransferManager", func(t *testing.T) { sdkTransferManager(t, c) })
	})
}

func sdkBuckets(t *testing.T, c *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	name := bucketName("bkt")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			emptyAndDelete(t, c, name)
		}
	})
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("HeadBucket: %v", err)
	}
	lb, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatalf("ListBuckets: %v", err)
	}
	if !slices.ContainsFunc(lb.Buckets, func(b types.Bucket) bool { return aws.ToString(b.Name) == name }) {
		t.Fatalf("ListBuckets does not contain %s", name)
	}
	loc, err := c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: aws.String(name)})
	if err != nil {
		t.Fatalf("GetBucketLocation: %v", err)
	}
	// S3 answers an empty LocationConstraint for us-east-1.
	if lc := string(loc.LocationConstraint); lc != "" && lc != c.Options().Region {
		t.Fatalf("LocationConstraint = %q, want empty or %q", lc, c.Options().Region)
	}

	// Creating a bucket one already owns: BucketAlreadyOwnedByYou, except that
	// us-east-1 answers 200 (AWS's legacy behaviour). Either way nothing changes.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("before"), Body: strings.NewReader("b")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	if !(err == nil && c.Options().Region == "us-east-1") {
		wantAPIError(t, err, "BucketAlreadyOwnedByYou")
	}
	if keys := listKeys(t, c, name, ""); !slices.Equal(keys, []string{"before"}) {
		t.Fatalf("after CreateBucket of an owned bucket: keys %q, want [before]", keys)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: aws.String("before")}); err != nil {
		t.Fatalf("DeleteObject: %v", err)
	}

	for _, bad := range []string{"Invalid_Name", "ab", "bad..dots", "-leading-dash", "192.168.5.4"} {
		_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bad)})
		if apiCode(err) != "InvalidBucketName" {
			t.Errorf("CreateBucket(%q): got %v, want InvalidBucketName", bad, err)
		}
	}

	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("x"), Body: strings.NewReader("x")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	wantAPIError(t, err, "BucketNotEmpty")
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: aws.String("x")}); err != nil {
		t.Fatalf("DeleteObject: %v", err)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("DeleteBucket: %v", err)
	}
	deleted = true
	_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)})
	wantStatus(t, err, http.StatusNotFound)
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(name)})
	wantAPIError(t, err, "NoSuchBucket")
}

func sdkObjects(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "obj")
	expires := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, size := range []int{0, 1, 1 * mib, 3 * mib} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			ctx := testCtx(t, 2*time.Minute)
			data := genBytes(uint64(100+i), size)
			key := fmt.Sprintf("dir/obj-%d", size)
			put, err := c.PutObject(ctx, &s3.PutObjectInput{
				Bucket:             aws.String(bucket),
				Key:                aws.String(key),
				Body:               bytes.NewReader(data),
				ContentType:        aws.String("application/x-test"),
				ContentEncoding:    aws.String("identity"),
				ContentDisposition: aws.String(`attachment; filename="a b.bin"`),
				ContentLanguage:    aws.String("de-CH"),
				CacheControl:       aws.String("max-age=60"),
				Expires:            aws.Time(expires),
				Metadata:           map[string]string{"color": "blue", "long-name": "Ünïcode value"},
			})
			if err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			wantETag := `"` + sumHex(md5.New(), data) + `"`
			if aws.ToString(put.ETag) != wantETag {
				t.Fatalf("PutObject ETag = %s, want %s", aws.ToString(put.ETag), wantETag)
			}

			head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("HeadObject: %v", err)
			}
			checkHeaders := func(what string, length *int64, etag, ctype, cenc, cdisp, clang, cc *string, expStr *string, meta map[string]string) {
				exp := parseHTTPTime(expStr)
				t.Helper()
				if aws.ToInt64(length) != int64(size) {
					t.Errorf("%s ContentLength = %d, want %d", what, aws.ToInt64(length), size)
				}
				if aws.ToString(etag) != wantETag {
					t.Errorf("%s ETag = %s, want %s", what, aws.ToString(etag), wantETag)
				}
				for _, f := range []struct{ name, got, want string }{
					{"Content-Type", aws.ToString(ctype), "application/x-test"},
					{"Content-Encoding", aws.ToString(cenc), "identity"},
					{"Content-Disposition", aws.ToString(cdisp), `attachment; filename="a b.bin"`},
					{"Content-Language", aws.ToString(clang), "de-CH"},
					{"Cache-Control", aws.ToString(cc), "max-age=60"},
					{"x-amz-meta-color", meta["color"], "blue"},
					// AWS returns non-ASCII metadata values RFC 2047-encoded.
					{"x-amz-meta-long-name", decodeRFC2047(t, meta["long-name"]), "Ünïcode value"},
				} {
					if f.got != f.want {
						t.Errorf("%s %s = %q, want %q", what, f.name, f.got, f.want)
					}
				}
				if exp == nil || !exp.Equal(expires) {
					t.Errorf("%s Expires = %v, want %v", what, exp, expires)
				}
			}
			checkHeaders("HEAD", head.ContentLength, head.ETag, head.ContentType, head.ContentEncoding, head.ContentDisposition, head.ContentLanguage, head.CacheControl, head.ExpiresString, head.Metadata)

			get, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			got, err := io.ReadAll(get.Body)
			get.Body.Close()
			if err != nil {
				t.Fatalf("GetObject body: %v", err)
			}
			if sha(got) != sha(data) {
				t.Fatalf("GetObject: sha256 %s (%d bytes), want %s (%d bytes)", sha(got), len(got), sha(data), len(data))
			}
			checkHeaders("GET", get.ContentLength, get.ETag, get.ContentType, get.ContentEncoding, get.ContentDisposition, get.ContentLanguage, get.CacheControl, get.ExpiresString, get.Metadata)

			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
				t.Fatalf("DeleteObject: %v", err)
			}
			objectAbsent(t, c, bucket, key)
			_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			wantAPIError(t, err, "NoSuchKey")
			// Deleting a missing key succeeds in S3.
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
				t.Fatalf("DeleteObject of a missing key: %v", err)
			}
		})
	}
}

// getRange fetches a range and returns body and Content-Range.
func getRange(t *testing.T, c *s3.Client, bucket, key, rng string) ([]byte, string, error) {
	t.Helper()
	out, err := c.GetObject(testCtx(t, time.Minute), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Range: aws.String(rng)})
	if err != nil {
		return nil, "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("range %s: read: %v", rng, err)
	}
	return b, aws.ToString(out.ContentRange), nil
}

func sdkRanges(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "rng")
	// One object above the knee (streamed content) and one inline.
	for _, size := range []int{3 * mib, 4000} {
		data := genBytes(7, size)
		key := fmt.Sprintf("r-%d", size)
		if _, err := c.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		n := len(data)
		for _, tc := range []struct {
			rng        string
			start, end int // inclusive
		}{
			{"bytes=100-199", 100, 199},
			{"bytes=0-0", 0, 0},
			{"bytes=-500", n - 500, n - 1},
			{fmt.Sprintf("bytes=%d-", n-100), n - 100, n - 1},
			{fmt.Sprintf("bytes=%d-%d", n-10, n+1000), n - 10, n - 1}, // end clamped to the size
			{fmt.Sprintf("bytes=-%d", n+10), 0, n - 1},                // suffix longer than the object
		} {
			t.Run(fmt.Sprintf("%d/%s", size, tc.rng), func(t *testing.T) {
				got, cr, err := getRange(t, c, bucket, key, tc.rng)
				if err != nil {
					t.Fatalf("GetObject: %v", err)
				}
				want := data[tc.start : tc.end+1]
				if sha(got) != sha(want) {
					t.Fatalf("body: %d bytes sha %s, want %d bytes sha %s", len(got), sha(got), len(want), sha(want))
				}
				if wantCR := fmt.Sprintf("bytes %d-%d/%d", tc.start, tc.end, n); cr != wantCR {
					t.Fatalf("Content-Range = %q, want %q", cr, wantCR)
				}
			})
		}
		t.Run(fmt.Sprintf("%d/unsatisfiable", size), func(t *testing.T) {
			_, _, err := getRange(t, c, bucket, key, fmt.Sprintf("bytes=%d-", n))
			wantAPIError(t, err, "InvalidRange")
			wantStatus(t, err, http.StatusRequestedRangeNotSatisfiable)
		})
	}
}

func sdkConditional(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "cond")
	ctx := testCtx(t, 2*time.Minute)
	data := genBytes(11, 600*kib)
	put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	etag := aws.ToString(put.ETag)
	past := time.Now().Add(-24 * time.Hour)
	future := time.Now().Add(24 * time.Hour)
	for _, tc := range []struct {
		name   string
		in     s3.GetObjectInput
		status int // 0: success
	}{
		{"IfMatch ok", s3.GetObjectInput{IfMatch: aws.String(etag)}, 0},
		{"IfMatch wrong", s3.GetObjectInput{IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)}, http.StatusPreconditionFailed},
		{"IfNoneMatch same", s3.GetObjectInput{IfNoneMatch: aws.String(etag)}, http.StatusNotModified},
		{"IfNoneMatch other", s3.GetObjectInput{IfNoneMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)}, 0},
		{"IfModifiedSince future", s3.GetObjectInput{IfModifiedSince: aws.Time(future)}, http.StatusNotModified},
		{"IfModifiedSince past", s3.GetObjectInput{IfModifiedSince: aws.Time(past)}, 0},
		{"IfUnmodifiedSince past", s3.GetObjectInput{IfUnmodifiedSince: aws.Time(past)}, http.StatusPreconditionFailed},
		{"IfUnmodifiedSince future", s3.GetObjectInput{IfUnmodifiedSince: aws.Time(future)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Bucket, in.Key = aws.String(bucket), aws.String("k")
			out, err := c.GetObject(testCtx(t, time.Minute), &in)
			if tc.status != 0 {
				wantStatus(t, err, tc.status)
				if tc.status == http.StatusPreconditionFailed {
					wantAPIError(t, err, "PreconditionFailed")
				}
				return
			}
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			got, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil || sha(got) != sha(data) {
				t.Fatalf("body mismatch (err %v): %d bytes", err, len(got))
			}
		})
	}
	// HEAD follows the same rules.
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), IfNoneMatch: aws.String(etag)})
	wantStatus(t, err, http.StatusNotModified)
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), IfMatch: aws.String(`"nope"`)})
	wantStatus(t, err, http.StatusPreconditionFailed)
}

func sdkResponseOverrides(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "ovr")
	ctx := testCtx(t, time.Minute)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("hello"), ContentType: aws.String("text/plain")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	exp := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	out, err := c.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("k"),
		ResponseContentType:        aws.String("application/json"),
		ResponseContentDisposition: aws.String(`inline; filename="x.json"`),
		ResponseContentLanguage:    aws.String("fr"),
		ResponseContentEncoding:    aws.String("identity"),
		ResponseCacheControl:       aws.String("no-store"),
		ResponseExpires:            aws.Time(exp),
	})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if string(body) != "hello" {
		t.Fatalf("body = %q", body)
	}
	for _, f := range []struct{ name, got, want string }{
		{"Content-Type", aws.ToString(out.ContentType), "application/json"},
		{"Content-Disposition", aws.ToString(out.ContentDisposition), `inline; filename="x.json"`},
		{"Content-Language", aws.ToString(out.ContentLanguage), "fr"},
		{"Content-Encoding", aws.ToString(out.ContentEncoding), "identity"},
		{"Cache-Control", aws.ToString(out.CacheControl), "no-store"},
	} {
		if f.got != f.want {
			t.Errorf("%s = %q, want %q", f.name, f.got, f.want)
		}
	}
	if got := parseHTTPTime(out.ExpiresString); got == nil || !got.Equal(exp) {
		t.Errorf("Expires = %v, want %v", aws.ToString(out.ExpiresString), exp)
	}
}

func sdkDeleteObjects(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "del")
	ctx := testCtx(t, 2*time.Minute)
	keys := []string{"a", "b", "c/d", "e f", "g+h"}
	for _, k := range keys {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatalf("PutObject %s: %v", k, err)
		}
	}
	// The SDK sends its default CRC checksum header instead of Content-MD5.
	out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("a")}, {Key: aws.String("c/d")}, {Key: aws.String("e f")}, {Key: aws.String("missing")}},
	}})
	if err != nil {
		t.Fatalf("DeleteObjects: %v", err)
	}
	if len(out.Errors) != 0 {
		t.Fatalf("DeleteObjects errors: %+v", out.Errors)
	}
	var deleted []string
	for _, d := range out.Deleted {
		deleted = append(deleted, aws.ToString(d.Key))
	}
	sort.Strings(deleted)
	if want := []string{"a", "c/d", "e f", "missing"}; !slices.Equal(deleted, want) {
		t.Fatalf("Deleted = %q, want %q", deleted, want)
	}
	if got, want := listKeys(t, c, bucket, ""), []string{"b", "g+h"}; !slices.Equal(got, want) {
		t.Fatalf("after DeleteObjects: keys %q, want %q", got, want)
	}
	// Quiet mode reports nothing on success.
	out, err = c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{
		Quiet:   aws.Bool(true),
		Objects: []types.ObjectIdentifier{{Key: aws.String("b")}, {Key: aws.String("g+h")}},
	}})
	if err != nil {
		t.Fatalf("DeleteObjects quiet: %v", err)
	}
	if len(out.Deleted) != 0 || len(out.Errors) != 0 {
		t.Fatalf("quiet DeleteObjects: Deleted %d, Errors %d, want 0/0", len(out.Deleted), len(out.Errors))
	}
	if got := listKeys(t, c, bucket, ""); len(got) != 0 {
		t.Fatalf("after quiet DeleteObjects: keys %q, want none", got)
	}
}

// listKeySet is the fixture of the listing tests: keys with delimiters,
// spaces, plus signs and non-ASCII characters.
var listKeySet = []string{"a/1", "a/2", "a/b/3", "b/4", "c d", "c+e", "top", "ü/ñ", "z%20literal"}

func sdkList(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "lst")
	ctx := testCtx(t, 3*time.Minute)
	for _, k := range listKeySet {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatalf("PutObject %q: %v", k, err)
		}
	}
	sorted := slices.Clone(listKeySet)
	sort.Strings(sorted) // S3 lists in UTF-8 byte order, which sort.Strings is

	keysOf := func(objs []types.Object) []string {
		var out []string
		for _, o := range objs {
			out = append(out, aws.ToString(o.Key))
		}
		return out
	}
	prefixesOf := func(cps []types.CommonPrefix) []string {
		var out []string
		for _, p := range cps {
			out = append(out, aws.ToString(p.Prefix))
		}
		return out
	}

	t.Run("V2", func(t *testing.T) {
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatalf("ListObjectsV2: %v", err)
		}
		if got := keysOf(out.Contents); !slices.Equal(got, sorted) {
			t.Fatalf("keys %q, want %q", got, sorted)
		}
		if aws.ToInt32(out.KeyCount) != int32(len(sorted)) {
			t.Fatalf("KeyCount %d, want %d", aws.ToInt32(out.KeyCount), len(sorted))
		}
		for _, o := range out.Contents {
			if aws.ToInt64(o.Size) != int64(len(aws.ToString(o.Key))) {
				t.Fatalf("size of %q = %d", aws.ToString(o.Key), aws.ToInt64(o.Size))
			}
		}

		out, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("a/")})
		if err != nil {
			t.Fatalf("ListObjectsV2 prefix: %v", err)
		}
		if got, want := keysOf(out.Contents), []string{"a/1", "a/2", "a/b/3"}; !slices.Equal(got, want) {
			t.Fatalf("prefix a/: %q, want %q", got, want)
		}

		out, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Delimiter: aws.String("/")})
		if err != nil {
			t.Fatalf("ListObjectsV2 delimiter: %v", err)
		}
		if got, want := keysOf(out.Contents), []string{"c d", "c+e", "top", "z%20literal"}; !slices.Equal(got, want) {
			t.Fatalf("delimiter contents %q, want %q", got, want)
		}
		if got, want := prefixesOf(out.CommonPrefixes), []string{"a/", "b/", "ü/"}; !slices.Equal(got, want) {
			t.Fatalf("delimiter prefixes %q, want %q", got, want)
		}

		out, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("a/"), Delimiter: aws.String("/")})
		if err != nil {
			t.Fatalf("ListObjectsV2 prefix+delimiter: %v", err)
		}
		if got, want := keysOf(out.Contents), []string{"a/1", "a/2"}; !slices.Equal(got, want) {
			t.Fatalf("a/ + / contents %q, want %q", got, want)
		}
		if got, want := prefixesOf(out.CommonPrefixes), []string{"a/b/"}; !slices.Equal(got, want) {
			t.Fatalf("a/ + / prefixes %q, want %q", got, want)
		}

		// Pagination: two keys a page, following continuation tokens.
		var all []string
		var token *string
		for pages := 0; ; pages++ {
			if pages > len(sorted) {
				t.Fatalf("pagination does not end")
			}
			out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), MaxKeys: aws.Int32(2), ContinuationToken: token})
			if err != nil {
				t.Fatalf("ListObjectsV2 page: %v", err)
			}
			if len(out.Contents) > 2 {
				t.Fatalf("page of %d keys with max-keys 2", len(out.Contents))
			}
			all = append(all, keysOf(out.Contents)...)
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			if out.NextContinuationToken == nil {
				t.Fatalf("truncated page without NextContinuationToken")
			}
			token = out.NextContinuationToken
		}
		if !slices.Equal(all, sorted) {
			t.Fatalf("paginated keys %q, want %q", all, sorted)
		}

		out, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), StartAfter: aws.String("b/4")})
		if err != nil {
			t.Fatalf("ListObjectsV2 start-after: %v", err)
		}
		if got, want := keysOf(out.Contents), sorted[slices.Index(sorted, "b/4")+1:]; !slices.Equal(got, want) {
			t.Fatalf("start-after b/4: %q, want %q", got, want)
		}

		// Paginator with fetch-owner, as real tools use it.
		p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), MaxKeys: aws.Int32(3), FetchOwner: aws.Bool(true)})
		var viaPaginator []string
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("paginator: %v", err)
			}
			for _, o := range page.Contents {
				if o.Owner == nil || aws.ToString(o.Owner.ID) == "" {
					t.Fatalf("fetch-owner: key %q without owner", aws.ToString(o.Key))
				}
			}
			viaPaginator = append(viaPaginator, keysOf(page.Contents)...)
		}
		if !slices.Equal(viaPaginator, sorted) {
			t.Fatalf("paginator keys %q, want %q", viaPaginator, sorted)
		}
	})

	t.Run("V2EncodingURL", func(t *testing.T) {
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), EncodingType: types.EncodingTypeUrl, Delimiter: aws.String("/")})
		if err != nil {
			t.Fatalf("ListObjectsV2: %v", err)
		}
		if out.EncodingType != types.EncodingTypeUrl {
			t.Fatalf("EncodingType = %q, want url", out.EncodingType)
		}
		decode := func(raw []string) []string {
			var dec []string
			for _, k := range raw {
				if strings.ContainsAny(k, " ") || strings.ContainsFunc(k, func(r rune) bool { return r > 127 }) {
					t.Fatalf("key %q is not URL-encoded", k)
				}
				d, err := url.QueryUnescape(k)
				if err != nil {
					t.Fatalf("key %q: %v", k, err)
				}
				dec = append(dec, d)
			}
			return dec
		}
		if got, want := decode(keysOf(out.Contents)), []string{"c d", "c+e", "top", "z%20literal"}; !slices.Equal(got, want) {
			t.Fatalf("decoded keys %q, want %q (raw %q)", got, want, keysOf(out.Contents))
		}
		if got, want := decode(prefixesOf(out.CommonPrefixes)), []string{"a/", "b/", "ü/"}; !slices.Equal(got, want) {
			t.Fatalf("decoded prefixes %q, want %q", got, want)
		}
	})

	t.Run("V1", func(t *testing.T) {
		var all []string
		var marker *string
		for pages := 0; ; pages++ {
			if pages > len(sorted) {
				t.Fatalf("pagination does not end")
			}
			out, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(bucket), MaxKeys: aws.Int32(3), Marker: marker})
			if err != nil {
				t.Fatalf("ListObjects: %v", err)
			}
			keys := keysOf(out.Contents)
			all = append(all, keys...)
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			marker = aws.String(keys[len(keys)-1])
		}
		if !slices.Equal(all, sorted) {
			t.Fatalf("V1 paginated keys %q, want %q", all, sorted)
		}

		out, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(bucket), Delimiter: aws.String("/"), MaxKeys: aws.Int32(2)})
		if err != nil {
			t.Fatalf("ListObjects delimiter: %v", err)
		}
		// With a delimiter the first page holds a/ and b/, and NextMarker says where to go on.
		if got, want := prefixesOf(out.CommonPrefixes), []string{"a/", "b/"}; !slices.Equal(got, want) || len(out.Contents) != 0 {
			t.Fatalf("V1 delimiter page 1: prefixes %q contents %q, want %q and none", got, keysOf(out.Contents), want)
		}
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextMarker) == "" {
			t.Fatalf("V1 delimiter page 1: truncated %v NextMarker %q", aws.ToBool(out.IsTruncated), aws.ToString(out.NextMarker))
		}
		out, err = c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(bucket), Delimiter: aws.String("/"), Marker: out.NextMarker})
		if err != nil {
			t.Fatalf("ListObjects delimiter page 2: %v", err)
		}
		if got, want := keysOf(out.Contents), []string{"c d", "c+e", "top", "z%20literal"}; !slices.Equal(got, want) {
			t.Fatalf("V1 delimiter page 2 contents %q, want %q", got, want)
		}
		if got, want := prefixesOf(out.CommonPrefixes), []string{"ü/"}; !slices.Equal(got, want) {
			t.Fatalf("V1 delimiter page 2 prefixes %q, want %q", got, want)
		}

		out, err = c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(bucket), Prefix: aws.String("c"), EncodingType: types.EncodingTypeUrl})
		if err != nil {
			t.Fatalf("ListObjects encoding-type=url: %v", err)
		}
		var dec []string
		for _, k := range keysOf(out.Contents) {
			if strings.Contains(k, " ") {
				t.Fatalf("V1 key %q is not URL-encoded", k)
			}
			d, err := url.QueryUnescape(k)
			if err != nil {
				t.Fatalf("V1 key %q: %v", k, err)
			}
			dec = append(dec, d)
		}
		if want := []string{"c d", "c+e"}; !slices.Equal(dec, want) {
			t.Fatalf("V1 decoded keys %q, want %q", dec, want)
		}
	})
}

func sdkCopy(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "cpy")
	ctx := testCtx(t, 2*time.Minute)
	for _, size := range []int{3000, 2 * mib} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			data := genBytes(uint64(size), size)
			src := fmt.Sprintf("src-%d", size)
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(src), Body: bytes.NewReader(data),
				ContentType: aws.String("text/x-src"), Metadata: map[string]string{"origin": "src"}}); err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			copySource := bucket + "/" + src
			wantETag := `"` + sumHex(md5.New(), data) + `"`

			check := func(key, ctype string, meta map[string]string) {
				t.Helper()
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
				if err != nil {
					t.Fatalf("GetObject %s: %v", key, err)
				}
				got, err := io.ReadAll(out.Body)
				out.Body.Close()
				if err != nil || sha(got) != sha(data) {
					t.Fatalf("%s: body mismatch (err %v, %d bytes)", key, err, len(got))
				}
				if aws.ToString(out.ContentType) != ctype {
					t.Errorf("%s Content-Type %q, want %q", key, aws.ToString(out.ContentType), ctype)
				}
				if !mapsEqual(out.Metadata, meta) {
					t.Errorf("%s metadata %v, want %v", key, out.Metadata, meta)
				}
				if aws.ToString(out.ETag) != wantETag {
					t.Errorf("%s ETag %s, want %s", key, aws.ToString(out.ETag), wantETag)
				}
			}

			cp, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(src + "-copy"), CopySource: aws.String(copySource)})
			if err != nil {
				t.Fatalf("CopyObject COPY: %v", err)
			}
			if cp.CopyObjectResult == nil || aws.ToString(cp.CopyObjectResult.ETag) != wantETag {
				t.Fatalf("CopyObject result %+v, want ETag %s", cp.CopyObjectResult, wantETag)
			}
			check(src+"-copy", "text/x-src", map[string]string{"origin": "src"})

			_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(src + "-repl"), CopySource: aws.String(copySource),
				MetadataDirective: types.MetadataDirectiveReplace, ContentType: aws.String("text/x-new"), Metadata: map[string]string{"origin": "replaced"}})
			if err != nil {
				t.Fatalf("CopyObject REPLACE: %v", err)
			}
			check(src+"-repl", "text/x-new", map[string]string{"origin": "replaced"})

			// Copy onto itself without changing anything is refused by S3.
			_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(src), CopySource: aws.String(copySource)})
			wantAPIError(t, err, "InvalidRequest")

			// Copy onto itself with REPLACE changes the metadata, not the bytes.
			_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(src), CopySource: aws.String(copySource),
				MetadataDirective: types.MetadataDirectiveReplace, ContentType: aws.String("text/x-self"), Metadata: map[string]string{"origin": "self"}})
			if err != nil {
				t.Fatalf("CopyObject onto itself: %v", err)
			}
			check(src, "text/x-self", map[string]string{"origin": "self"})

			// The copy survives the deletion of its source.
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(src)}); err != nil {
				t.Fatalf("DeleteObject: %v", err)
			}
			check(src+"-copy", "text/x-src", map[string]string{"origin": "src"})

			_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("x"), CopySource: aws.String(bucket + "/missing")})
			wantAPIError(t, err, "NoSuchKey")
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// multipartETag is S3's ETag of a multipart object: MD5 of the parts' binary
// MD5s, a dash, and the part count.
func multipartETag(parts [][]byte) string {
	h := md5.New()
	for _, p := range parts {
		s := md5.Sum(p)
		h.Write(s[:])
	}
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(h.Sum(nil)), len(parts))
}

func sdkMultipart(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "mpu")
	ctx := testCtx(t, 5*time.Minute)
	key := "big/object.bin"
	parts := [][]byte{genBytes(21, 5*mib), genBytes(22, 5*mib), genBytes(23, 5*mib), genBytes(24, 123*kib)}
	whole := bytes.Join(parts, nil)

	cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		ContentType: aws.String("application/x-mpu"), Metadata: map[string]string{"kind": "mpu"}})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	uploadID := cr.UploadId
	if aws.ToString(uploadID) == "" {
		t.Fatalf("empty UploadId")
	}

	lu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	if len(lu.Uploads) != 1 || aws.ToString(lu.Uploads[0].Key) != key || aws.ToString(lu.Uploads[0].UploadId) != aws.ToString(uploadID) {
		t.Fatalf("ListMultipartUploads = %+v, want our upload", lu.Uploads)
	}

	var completed []types.CompletedPart
	for i, p := range parts {
		up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: uploadID,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", i+1, err)
		}
		if want := `"` + sumHex(md5.New(), p) + `"`; aws.ToString(up.ETag) != want {
			t.Fatalf("UploadPart %d ETag %s, want %s", i+1, aws.ToString(up.ETag), want)
		}
		completed = append(completed, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag})
	}
	// Re-uploading a part replaces it.
	up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: uploadID,
		PartNumber: aws.Int32(4), Body: bytes.NewReader(parts[3])})
	if err != nil {
		t.Fatalf("UploadPart 4 again: %v", err)
	}
	completed[3].ETag = up.ETag

	lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: uploadID})
	if err != nil {
		t.Fatalf("ListParts: %v", err)
	}
	if len(lp.Parts) != len(parts) {
		t.Fatalf("ListParts: %d parts, want %d", len(lp.Parts), len(parts))
	}
	for i, p := range lp.Parts {
		if aws.ToInt32(p.PartNumber) != int32(i+1) || aws.ToInt64(p.Size) != int64(len(parts[i])) || aws.ToString(p.ETag) != aws.ToString(completed[i].ETag) {
			t.Fatalf("ListParts[%d] = number %d size %d etag %s", i, aws.ToInt32(p.PartNumber), aws.ToInt64(p.Size), aws.ToString(p.ETag))
		}
	}
	lp2, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: uploadID, MaxParts: aws.Int32(2)})
	if err != nil {
		t.Fatalf("ListParts max-parts: %v", err)
	}
	if len(lp2.Parts) != 2 || !aws.ToBool(lp2.IsTruncated) || aws.ToString(lp2.NextPartNumberMarker) != "2" {
		t.Fatalf("ListParts max-parts 2: %d parts truncated %v next %q", len(lp2.Parts), aws.ToBool(lp2.IsTruncated), aws.ToString(lp2.NextPartNumberMarker))
	}

	done, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}})
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	wantETag := multipartETag(parts)
	if aws.ToString(done.ETag) != wantETag {
		t.Fatalf("Complete ETag %s, want %s", aws.ToString(done.ETag), wantETag)
	}

	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	got, n, err := shaReader(out.Body)
	out.Body.Close()
	if err != nil || got != sha(whole) {
		t.Fatalf("GetObject: %d bytes sha %s (err %v), want %d bytes sha %s", n, got, err, len(whole), sha(whole))
	}
	if aws.ToString(out.ETag) != wantETag || aws.ToString(out.ContentType) != "application/x-mpu" || out.Metadata["kind"] != "mpu" {
		t.Fatalf("GetObject headers: ETag %s type %q meta %v", aws.ToString(out.ETag), aws.ToString(out.ContentType), out.Metadata)
	}

	// A range across the boundary of parts 1 and 2.
	b, cr2, err := getRange(t, c, bucket, key, fmt.Sprintf("bytes=%d-%d", 5*mib-10, 5*mib+9))
	if err != nil {
		t.Fatalf("range across parts: %v", err)
	}
	if !bytes.Equal(b, whole[5*mib-10:5*mib+10]) {
		t.Fatalf("range across parts: wrong bytes (Content-Range %s)", cr2)
	}

	for _, pn := range []int32{1, 4} {
		po, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), PartNumber: aws.Int32(pn)})
		if err != nil {
			t.Fatalf("GetObject partNumber %d: %v", pn, err)
		}
		body, err := io.ReadAll(po.Body)
		po.Body.Close()
		if err != nil || sha(body) != sha(parts[pn-1]) {
			t.Fatalf("GetObject partNumber %d: %d bytes, want part of %d bytes (err %v)", pn, len(body), len(parts[pn-1]), err)
		}
		if aws.ToInt32(po.PartsCount) != int32(len(parts)) {
			t.Fatalf("GetObject partNumber %d: PartsCount %d, want %d", pn, aws.ToInt32(po.PartsCount), len(parts))
		}
	}
	ho, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), PartNumber: aws.Int32(2)})
	if err != nil {
		t.Fatalf("HeadObject partNumber 2: %v", err)
	}
	if aws.ToInt64(ho.ContentLength) != int64(len(parts[1])) {
		t.Fatalf("HeadObject partNumber 2: length %d, want %d", aws.ToInt64(ho.ContentLength), len(parts[1]))
	}

	lu, err = c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	if len(lu.Uploads) != 0 {
		t.Fatalf("completed upload still listed: %+v", lu.Uploads)
	}
}

func sdkMultipartErrors(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "mpe")
	ctx := testCtx(t, 5*time.Minute)
	start := func(key string) *string {
		t.Helper()
		cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("CreateMultipartUpload: %v", err)
		}
		return cr.UploadId
	}
	part := func(key string, id *string, n int32, data []byte) types.CompletedPart {
		t.Helper()
		up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: id, PartNumber: aws.Int32(n), Body: bytes.NewReader(data)})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", n, err)
		}
		return types.CompletedPart{PartNumber: aws.Int32(n), ETag: up.ETag}
	}
	complete := func(key string, id *string, parts ...types.CompletedPart) error {
		_, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: id,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		return err
	}

	t.Run("Abort", func(t *testing.T) {
		id := start("abort")
		part("abort", id, 1, genBytes(31, 100*kib))
		if _, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("abort"), UploadId: id}); err != nil {
			t.Fatalf("AbortMultipartUpload: %v", err)
		}
		lu, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String("abort")})
		if err != nil {
			t.Fatalf("ListMultipartUploads: %v", err)
		}
		if len(lu.Uploads) != 0 {
			t.Fatalf("aborted upload still listed")
		}
		_, err = c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("abort"), UploadId: id, PartNumber: aws.Int32(2), Body: strings.NewReader("x")})
		wantAPIError(t, err, "NoSuchUpload")
		_, err = c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("abort"), UploadId: id})
		wantAPIError(t, err, "NoSuchUpload")
		objectAbsent(t, c, bucket, "abort")
	})

	t.Run("EntityTooSmall", func(t *testing.T) {
		id := start("small")
		p1 := part("small", id, 1, genBytes(32, 1*mib))
		p2 := part("small", id, 2, genBytes(33, 1*mib))
		wantAPIError(t, complete("small", id, p1, p2), "EntityTooSmall")
		objectAbsent(t, c, bucket, "small")
	})

	t.Run("InvalidPart", func(t *testing.T) {
		id := start("badpart")
		p1 := part("badpart", id, 1, genBytes(34, 100*kib))
		p1.ETag = aws.String(`"00000000000000000000000000000000"`)
		wantAPIError(t, complete("badpart", id, p1), "InvalidPart")
		// A part that was never uploaded is invalid too.
		wantAPIError(t, complete("badpart", id, types.CompletedPart{PartNumber: aws.Int32(7), ETag: aws.String(`"00000000000000000000000000000000"`)}), "InvalidPart")
		objectAbsent(t, c, bucket, "badpart")
	})

	t.Run("InvalidPartOrder", func(t *testing.T) {
		id := start("order")
		p1 := part("order", id, 1, genBytes(35, 5*mib))
		p2 := part("order", id, 2, genBytes(36, 10))
		wantAPIError(t, complete("order", id, p2, p1), "InvalidPartOrder")
		objectAbsent(t, c, bucket, "order")
		// The upload is still usable after the refusals.
		if err := complete("order", id, p1, p2); err != nil {
			t.Fatalf("Complete after InvalidPartOrder: %v", err)
		}
	})

	t.Run("NoSuchUpload", func(t *testing.T) {
		wantAPIError(t, complete("nothing", aws.String("no-such-upload-id"), types.CompletedPart{PartNumber: aws.Int32(1), ETag: aws.String(`"x"`)}), "NoSuchUpload")
	})
}

func sdkUploadPartCopy(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "upc")
	ctx := testCtx(t, 5*time.Minute)
	src := genBytes(41, 6*mib)
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("src"), Body: bytes.NewReader(src)}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	cr, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("dst")})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	var parts []types.CompletedPart
	var want [][]byte
	for i, r := range [][2]int{{0, 5*mib - 1}, {1000, 1999}} {
		out, err := c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(bucket), Key: aws.String("dst"), UploadId: cr.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), CopySource: aws.String(bucket + "/src"), CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", r[0], r[1]))})
		if err != nil {
			t.Fatalf("UploadPartCopy %d: %v", i+1, err)
		}
		chunk := src[r[0] : r[1]+1]
		if wantETag := `"` + sumHex(md5.New(), chunk) + `"`; out.CopyPartResult == nil || aws.ToString(out.CopyPartResult.ETag) != wantETag {
			t.Fatalf("UploadPartCopy %d result %+v, want ETag %s", i+1, out.CopyPartResult, wantETag)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.CopyPartResult.ETag})
		want = append(want, chunk)
	}
	done, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("dst"), UploadId: cr.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	if aws.ToString(done.ETag) != multipartETag(want) {
		t.Fatalf("ETag %s, want %s", aws.ToString(done.ETag), multipartETag(want))
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("dst")})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	got, n, err := shaReader(out.Body)
	out.Body.Close()
	if wantAll := bytes.Join(want, nil); err != nil || got != sha(wantAll) {
		t.Fatalf("GetObject: %d bytes sha %s (err %v), want %d bytes", n, got, err, len(wantAll))
	}
}

// checksumOf computes the base64 value that S3 shows for an algorithm.
func checksumOf(algo types.ChecksumAlgorithm, data []byte) string {
	var h hash.Hash
	switch algo {
	case types.ChecksumAlgorithmCrc32:
		h = crc32.NewIEEE()
	case types.ChecksumAlgorithmCrc32c:
		h = crc32.New(crc32.MakeTable(crc32.Castagnoli))
	case types.ChecksumAlgorithmCrc64nvme:
		h = crc64nvme.New()
	case types.ChecksumAlgorithmSha1:
		h = sha1.New()
	case types.ChecksumAlgorithmSha256:
		h = sha256.New()
	default:
		panic("unknown algorithm " + string(algo))
	}
	h.Write(data)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func sdkChecksums(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "sum")
	algos := []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmCrc64nvme,
		types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256}
	for i, algo := range algos {
		for _, size := range []int{10 * kib, 700 * kib} { // inline and streamed
			t.Run(fmt.Sprintf("%s/%d", algo, size), func(t *testing.T) {
				ctx := testCtx(t, 2*time.Minute)
				data := genBytes(uint64(50+i), size)
				key := fmt.Sprintf("sum-%s-%d", algo, size)
				want := checksumOf(algo, data)
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data), ChecksumAlgorithm: algo}); err != nil {
					t.Fatalf("PutObject: %v", err)
				}
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
				if err != nil {
					t.Fatalf("GetObject: %v", err)
				}
				body, err := io.ReadAll(out.Body) // the SDK validates the checksum at EOF
				out.Body.Close()
				if err != nil || sha(body) != sha(data) {
					t.Fatalf("GetObject body: %d bytes (err %v)", len(body), err)
				}
				got := map[types.ChecksumAlgorithm]*string{
					types.ChecksumAlgorithmCrc32: out.ChecksumCRC32, types.ChecksumAlgorithmCrc32c: out.ChecksumCRC32C,
					types.ChecksumAlgorithmCrc64nvme: out.ChecksumCRC64NVME, types.ChecksumAlgorithmSha1: out.ChecksumSHA1,
					types.ChecksumAlgorithmSha256: out.ChecksumSHA256,
				}[algo]
				if aws.ToString(got) != want {
					t.Fatalf("GetObject x-amz-checksum-%s = %q, want %q", strings.ToLower(string(algo)), aws.ToString(got), want)
				}
				head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
				if err != nil {
					t.Fatalf("HeadObject: %v", err)
				}
				gotHead := map[types.ChecksumAlgorithm]*string{
					types.ChecksumAlgorithmCrc32: head.ChecksumCRC32, types.ChecksumAlgorithmCrc32c: head.ChecksumCRC32C,
					types.ChecksumAlgorithmCrc64nvme: head.ChecksumCRC64NVME, types.ChecksumAlgorithmSha1: head.ChecksumSHA1,
					types.ChecksumAlgorithmSha256: head.ChecksumSHA256,
				}[algo]
				if aws.ToString(gotHead) != want {
					t.Fatalf("HeadObject x-amz-checksum-%s = %q, want %q", strings.ToLower(string(algo)), aws.ToString(gotHead), want)
				}
			})
		}
	}
}

func sdkTransferManager(t *testing.T, c *s3.Client) {
	bucket := mustBucket(t, c, "tm")
	ctx := testCtx(t, 5*time.Minute)
	const size = 40 * mib
	want := sha(genBytes(61, size))
	client := tm.New(c, func(o *tm.Options) { o.PartSizeBytes = 8 * mib; o.Concurrency = 4 })
	if _, err := client.UploadObject(ctx, &tm.UploadObjectInput{Bucket: aws.String(bucket), Key: aws.String("tm/40MiB"), Body: genReader(61, size)}); err != nil {
		t.Fatalf("UploadObject: %v", err)
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("tm/40MiB")})
	if err != nil {
		t.Fatalf("HeadObject: %v", err)
	}
	if aws.ToInt64(head.ContentLength) != size || !strings.HasSuffix(aws.ToString(head.ETag), `-5"`) {
		t.Fatalf("HeadObject: length %d ETag %s, want %d and a 5-part ETag", aws.ToInt64(head.ContentLength), aws.ToString(head.ETag), size)
	}

	path := filepath.Join(t.TempDir(), "download")
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer f.Close()
	if _, err := client.DownloadObject(ctx, &tm.DownloadObjectInput{Bucket: aws.String(bucket), Key: aws.String("tm/40MiB"), WriterAt: f}); err != nil {
		t.Fatalf("DownloadObject: %v", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatalf("seek: %v", err)
	}
	got, n, err := shaReader(f)
	if err != nil || got != want || n != size {
		t.Fatalf("downloaded %d bytes sha %s (err %v), want %d bytes sha %s", n, got, err, size, want)
	}

	// The concurrent GetObject reader of the transfer manager, too.
	gout, err := client.GetObject(ctx, &tm.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("tm/40MiB")})
	if err != nil {
		t.Fatalf("transfer manager GetObject: %v", err)
	}
	got, n, err = shaReader(gout.Body)
	if err != nil || got != want || n != size {
		t.Fatalf("transfer manager GetObject: %d bytes sha %s (err %v), want %d bytes sha %s", n, got, err, size, want)
	}
}

// decodeRFC2047 decodes a header value that may be an RFC 2047 encoded-word.
func decodeRFC2047(t *testing.T, v string) string {
	t.Helper()
	d, err := new(mime.WordDecoder).DecodeHeader(v)
	if err != nil {
		t.Errorf("decode %q: %v", v, err)
		return v
	}
	return d
}

// parseHTTPTime parses an HTTP date header value (nil when absent or bad).
func parseHTTPTime(v *string) *time.Time {
	if v == nil {
		return nil
	}
	t, err := http.ParseTime(*v)
	if err != nil {
		return nil
	}
	return &t
}
