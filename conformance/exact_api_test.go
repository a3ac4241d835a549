package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
)

// TestExactAPI checks API semantics that real clients and S3 test suites
// rely on (issue 9, item 6). What depends on the metadata engine (listing,
// bucket delete, Complete) runs on the embedded engine and on one
// PostgreSQL cell; what s3api alone decides runs on the embedded one only.
func TestExactAPI(t *testing.T) {
	for _, eng := range metaCells() {
		t.Run(eng, func(t *testing.T) {
			t.Parallel()
			gw := testgw.Start(t, testgw.Options{Engine: eng})
			cl := sdkClient(t, gw)
			t.Run("ListObjectVersions", func(t *testing.T) { eaVersions(t, gw, cl) })
			t.Run("DeleteBucketWithUploads", func(t *testing.T) { eaDeleteBucketUploads(t, cl) })
			t.Run("CompleteRepeated", func(t *testing.T) { eaCompleteRepeated(t, cl) })
			t.Run("CompleteRace", func(t *testing.T) { eaCompleteRace(t, cl) })
			t.Run("ListMultipartUploads", func(t *testing.T) { eaListUploads(t, gw, cl) })
			t.Run("StorageClassKept", func(t *testing.T) { noopStorageClassKept(t, gw, cl) })
			if eng != config.EnginePGChunks {
				t.Run("NoSuchBucketFirst", func(t *testing.T) { eaNoSuchBucketFirst(t, cl) })
				t.Run("ObjectLockRefused", func(t *testing.T) { eaObjectLock(t, cl) })
				t.Run("UnhonouredHeadersRefused", func(t *testing.T) { eaUnhonoured(t, gw, cl) })
				t.Run("EncryptionRefused", func(t *testing.T) { noopEncryption(t, gw, cl) })
				t.Run("StorageClassRefused", func(t *testing.T) { noopStorageClassRefused(t, cl) })
				t.Run("OtherHeadersRefused", func(t *testing.T) { noopOtherHeaders(t, cl) })
				t.Run("ExpectedBucketOwner", func(t *testing.T) { eaExpectedOwner(t, cl) })
				t.Run("ListBucketsPaging", func(t *testing.T) { eaListBuckets(t, gw, cl) })
				t.Run("ListingDetails", func(t *testing.T) { eaListingDetails(t, gw, cl) })
				t.Run("UnknownSubresources", func(t *testing.T) { eaUnknownSubresources(t, gw, cl) })
				if !testgw.External() {
					t.Run("ExpectContinueEarlyErrors", func(t *testing.T) { eaExpect(t) })
				}
			}
		})
	}
}

func eaVersions(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	bucket := mustBucket(t, cl, "vers")
	ctx := testCtx(t, 2*time.Minute)
	keys := []string{"a", "b b", "d/1", "d/2", "e"}
	for _, k := range keys {
		putString(t, cl, bucket, k, "v-"+k)
	}
	// Paging two at a time: every object once, version "null", latest.
	var got []string
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), MaxKeys: aws.Int32(2)}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("ListObjectVersions does not end")
		}
		out, err := cl.ListObjectVersions(ctx, in)
		if err != nil {
			t.Fatalf("ListObjectVersions: %v", err)
		}
		if len(out.DeleteMarkers) != 0 {
			t.Fatalf("delete markers %+v on a bucket that never had versioning", out.DeleteMarkers)
		}
		for _, v := range out.Versions {
			if aws.ToString(v.VersionId) != "null" || !aws.ToBool(v.IsLatest) || aws.ToString(v.ETag) == "" {
				t.Fatalf("version %+v: want VersionId null, IsLatest, an ETag", v)
			}
			got = append(got, aws.ToString(v.Key))
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		if aws.ToString(out.NextKeyMarker) != got[len(got)-1] || aws.ToString(out.NextVersionIdMarker) != "null" {
			t.Fatalf("truncated page: NextKeyMarker %q NextVersionIdMarker %q, want %q and null",
				aws.ToString(out.NextKeyMarker), aws.ToString(out.NextVersionIdMarker), got[len(got)-1])
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	if strings.Join(got, ",") != strings.Join(keys, ",") {
		t.Fatalf("versions listed %q, want each object once: %q", got, keys)
	}
	// Prefix and delimiter.
	out, err := cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Delimiter: aws.String("/")})
	if err != nil {
		t.Fatalf("ListObjectVersions delimiter: %v", err)
	}
	if len(out.CommonPrefixes) != 1 || aws.ToString(out.CommonPrefixes[0].Prefix) != "d/" || len(out.Versions) != 3 || aws.ToString(out.Delimiter) != "/" {
		t.Fatalf("delimiter /: prefixes %+v, %d versions; want [d/] and 3", out.CommonPrefixes, len(out.Versions))
	}
	out, err = cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String("d/")})
	if err != nil || len(out.Versions) != 2 || aws.ToString(out.Versions[0].Key) != "d/1" {
		t.Fatalf("prefix d/: %+v, %v", out.Versions, err)
	}
	// encoding-type=url: a space is %20.
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + bucket, Query: url.Values{"versions": {""}, "encoding-type": {"url"}, "prefix": {"b "}}})
	if status != http.StatusOK || !strings.Contains(string(body), "<Key>b%20b</Key>") || !strings.Contains(string(body), "<Prefix>b%20</Prefix>") ||
		!strings.Contains(string(body), "<EncodingType>url</EncodingType>") || !strings.Contains(string(body), "<ListVersionsResult") {
		t.Fatalf("versions encoding-type=url: HTTP %d %s", status, body)
	}
	// A version-id marker needs a key marker, and only "null" exists.
	_, err = cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), VersionIdMarker: aws.String("null")})
	wantAPIError(t, err, "InvalidArgument")
	_, err = cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), KeyMarker: aws.String("a"), VersionIdMarker: aws.String("3HL4kqtJlcpXroDTDmJ")})
	wantAPIError(t, err, "InvalidArgument")
	_, err = cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucketName("gone"))})
	wantAPIError(t, err, "NoSuchBucket")
}

func createUpload(t *testing.T, cl *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := cl.CreateMultipartUpload(testCtx(t, time.Minute), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("CreateMultipartUpload %s: %v", key, err)
	}
	return aws.ToString(out.UploadId)
}

func uploadPart(t *testing.T, cl *s3.Client, bucket, key, id string, n int32, data []byte) types.CompletedPart {
	t.Helper()
	out, err := cl.UploadPart(testCtx(t, time.Minute), &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: aws.String(id), PartNumber: aws.Int32(n), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("UploadPart %s #%d: %v", key, n, err)
	}
	return types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32,
		ChecksumCRC32C: out.ChecksumCRC32C, ChecksumCRC64NVME: out.ChecksumCRC64NVME, ChecksumSHA1: out.ChecksumSHA1, ChecksumSHA256: out.ChecksumSHA256}
}

func eaDeleteBucketUploads(t *testing.T, cl *s3.Client) {
	name := bucketName("upl")
	ctx := testCtx(t, 2*time.Minute)
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emptyAndDelete(t, cl, name) }) // only if the test fails midway
	id := createUpload(t, cl, name, "one")
	uploadPart(t, cl, name, "one", id, 1, genBytes(7, 1000))
	createUpload(t, cl, name, "two")
	// A bucket with an object is still not empty.
	putString(t, cl, name, "obj", "x")
	_, err := cl.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)})
	wantAPIError(t, err, "BucketNotEmpty")
	ups, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(name)})
	if err != nil || len(ups.Uploads) != 2 {
		t.Fatalf("a refused DeleteBucket changed the uploads: %+v, %v", ups.Uploads, err)
	}
	if _, err := cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(name), Key: aws.String("obj")}); err != nil {
		t.Fatal(err)
	}
	// Only in-progress uploads: the bucket goes, and its uploads with it.
	if _, err := cl.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("DeleteBucket of a bucket holding only in-progress uploads: %v", err)
	}
	if _, err := cl.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)}); httpStatus(err) != http.StatusNotFound {
		t.Fatalf("HeadBucket after delete: %v, want 404", err)
	}
	_, err = cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(name), Key: aws.String("one"), UploadId: aws.String(id),
		PartNumber: aws.Int32(2), Body: strings.NewReader("late")})
	wantAPIError(t, err, "NoSuchBucket")
	// The name is free again, and the old uploads are not in the new bucket.
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("recreate: %v", err)
	}
	ups, err = cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(name)})
	if err != nil || len(ups.Uploads) != 0 {
		t.Fatalf("uploads of the deleted bucket reappeared: %+v, %v", ups.Uploads, err)
	}
	_, err = cl.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(name), Key: aws.String("one"), UploadId: aws.String(id)})
	wantAPIError(t, err, "NoSuchUpload")
}

func eaCompleteRepeated(t *testing.T, cl *s3.Client) {
	bucket := mustBucket(t, cl, "mpu")
	ctx := testCtx(t, 2*time.Minute)
	p1, p2 := genBytes(11, 5*mib), genBytes(12, 1234)
	out, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.UploadId)
	parts := []types.CompletedPart{uploadPart(t, cl, bucket, "k", id, 1, p1), uploadPart(t, cl, bucket, "k", id, 2, p2)}
	complete := func(ps []types.CompletedPart) (*s3.CompleteMultipartUploadOutput, error) {
		return cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k"),
			UploadId: aws.String(id), MultipartUpload: &types.CompletedMultipartUpload{Parts: ps}})
	}
	first, err := complete(parts)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	// The SDK's retry after a lost reply: the same answer.
	again, err := complete(parts)
	if err != nil {
		t.Fatalf("repeated Complete: %v", err)
	}
	if aws.ToString(again.ETag) != aws.ToString(first.ETag) || aws.ToString(again.Location) != aws.ToString(first.Location) ||
		aws.ToString(again.ChecksumCRC32) != aws.ToString(first.ChecksumCRC32) || aws.ToString(first.ChecksumCRC32) == "" ||
		aws.ToString(again.Key) != "k" || aws.ToString(again.Bucket) != bucket {
		t.Fatalf("repeated Complete answered %+v, first %+v", again, first)
	}
	// Another part list does not repeat that completion.
	_, err = complete(parts[:1])
	wantAPIError(t, err, "NoSuchUpload")
	readBackSDK(t, cl, bucket, "k", append(append([]byte{}, p1...), p2...))
	// Once the object it wrote is overwritten, the upload is gone for good.
	putString(t, cl, bucket, "k", "new")
	_, err = complete(parts)
	wantAPIError(t, err, "NoSuchUpload")
	readBackSDK(t, cl, bucket, "k", []byte("new"))
}

func eaCompleteRace(t *testing.T, cl *s3.Client) {
	bucket := mustBucket(t, cl, "race")
	ctx := testCtx(t, 3*time.Minute)
	const iterations = 25
	for i := range iterations {
		key := fmt.Sprintf("k%02d", i)
		data := genBytes(uint64(100+i), 3000+i)
		id := createUpload(t, cl, bucket, key)
		parts := []types.CompletedPart{uploadPart(t, cl, bucket, key, id, 1, data)}
		var wg sync.WaitGroup
		outs := make([]*s3.CompleteMultipartUploadOutput, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for g := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				outs[g], errs[g] = cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
					UploadId: aws.String(id), MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
			}()
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("iteration %d: concurrent Completes: %v", i, err)
		}
		if aws.ToString(outs[0].ETag) != aws.ToString(outs[1].ETag) || aws.ToString(outs[0].ETag) == "" ||
			aws.ToString(outs[0].ChecksumCRC32) != aws.ToString(outs[1].ChecksumCRC32) {
			t.Fatalf("iteration %d: concurrent Completes answered %q/%q and %q/%q", i,
				aws.ToString(outs[0].ETag), aws.ToString(outs[0].ChecksumCRC32), aws.ToString(outs[1].ETag), aws.ToString(outs[1].ChecksumCRC32))
		}
		readBackSDK(t, cl, bucket, key, data)
	}
	ups, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil || len(ups.Uploads) != 0 {
		t.Fatalf("uploads left after completion: %+v, %v", ups.Uploads, err)
	}
}

func eaListUploads(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	bucket := mustBucket(t, cl, "lmu")
	ctx := testCtx(t, 2*time.Minute)
	type up struct{ key, id string }
	var all []up
	for _, k := range []string{"a/1", "a/2", "b", "c", "c", "d"} {
		all = append(all, up{k, createUpload(t, cl, bucket, k)})
	}
	// With a delimiter, a/ is one common prefix.
	out, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Delimiter: aws.String("/")})
	if err != nil || len(out.CommonPrefixes) != 1 || aws.ToString(out.CommonPrefixes[0].Prefix) != "a/" || len(out.Uploads) != 4 || aws.ToString(out.Delimiter) != "/" {
		t.Fatalf("delimiter /: prefixes %+v, %d uploads, %v; want [a/] and 4", out.CommonPrefixes, len(out.Uploads), err)
	}
	// Paging two at a time with the Next markers lists each upload once.
	var got []string
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), MaxUploads: aws.Int32(2)}
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("ListMultipartUploads does not end")
		}
		out, err := cl.ListMultipartUploads(ctx, in)
		if err != nil {
			t.Fatalf("ListMultipartUploads: %v", err)
		}
		for _, u := range out.Uploads {
			got = append(got, aws.ToString(u.Key)+" "+aws.ToString(u.UploadId))
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		last := out.Uploads[len(out.Uploads)-1]
		if aws.ToString(out.NextKeyMarker) != aws.ToString(last.Key) || aws.ToString(out.NextUploadIdMarker) != aws.ToString(last.UploadId) {
			t.Fatalf("truncated page: NextKeyMarker %q NextUploadIdMarker %q, want the last upload %q %q",
				aws.ToString(out.NextKeyMarker), aws.ToString(out.NextUploadIdMarker), aws.ToString(last.Key), aws.ToString(last.UploadId))
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
	var want []string
	for _, u := range all {
		want = append(want, u.key+" "+u.id)
	}
	sort.Strings(want)
	sorted := append([]string{}, got...)
	sort.Strings(sorted)
	if strings.Join(sorted, ",") != strings.Join(want, ",") || len(got) != len(want) {
		t.Fatalf("paged uploads %q, want each once: %q", got, want)
	}
	// An upload-id-marker that cannot name an upload is refused (with a
	// key-marker; without one AWS ignores it).
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + bucket, Query: url.Values{"uploads": {""}, "key-marker": {"b"}, "upload-id-marker": {"not-an-upload"}}})
	wantRawError(t, "bad upload-id-marker", status, body, http.StatusBadRequest, "InvalidArgument")
	if _, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), UploadIdMarker: aws.String("ignored")}); err != nil {
		t.Fatalf("upload-id-marker without key-marker: %v", err)
	}
	// An empty delimiter is not echoed.
	status, _, body = doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + bucket, Query: url.Values{"uploads": {""}, "delimiter": {""}}})
	if status != http.StatusOK || strings.Contains(string(body), "<Delimiter>") {
		t.Fatalf("uploads delimiter= : HTTP %d %s", status, body)
	}
}

func eaNoSuchBucketFirst(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	gone := aws.String(bucketName("gone"))
	id := aws.String("0000000000000000000000000000000000000000000")
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"UploadPart", func() error {
			_, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: gone, Key: aws.String("k"), UploadId: id, PartNumber: aws.Int32(1), Body: strings.NewReader("x")})
			return err
		}},
		{"CompleteMultipartUpload", func() error {
			_, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: gone, Key: aws.String("k"), UploadId: id,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(`"x"`)}}}})
			return err
		}},
		{"AbortMultipartUpload", func() error {
			_, err := cl.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: gone, Key: aws.String("k"), UploadId: id})
			return err
		}},
		{"ListParts", func() error {
			_, err := cl.ListParts(ctx, &s3.ListPartsInput{Bucket: gone, Key: aws.String("k"), UploadId: id})
			return err
		}},
		{"PutObject", func() error {
			_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: gone, Key: aws.String("k"), Body: strings.NewReader("x")})
			return err
		}},
		{"PutObject If-None-Match", func() error {
			_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: gone, Key: aws.String("k"), Body: strings.NewReader("x"), IfNoneMatch: aws.String("*")})
			return err
		}},
		{"PutObject If-Match", func() error {
			_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: gone, Key: aws.String("k"), Body: strings.NewReader("x"), IfMatch: aws.String(`"x"`)})
			return err
		}},
		{"PutObject bad Content-MD5", func() error { // the bucket is answered before the body is judged
			_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: gone, Key: aws.String("k"), Body: strings.NewReader("x"),
				ContentMD5: aws.String("1B2M2Y8AsgTpgAmY7PhCfg==")})
			return err
		}},
		{"GetObjectAttributes", func() error {
			_, err := cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: gone, Key: aws.String("k"), ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantAPIError(t, tc.call(), "NoSuchBucket") })
	}
}

// eaObjectLock: on a bucket without Object Lock every Object Lock header and
// call is refused as AWS refuses them (TestObjectLock covers the buckets
// with it).
func eaObjectLock(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	bucket := mustBucket(t, cl, "lock")
	_, err := cl.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String(bucket)})
	wantAPIError(t, err, "ObjectLockConfigurationNotFoundError")
	until := aws.Time(time.Now().Add(24 * time.Hour))
	putString(t, cl, bucket, "src", "source")
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"PutObject retention", func() error {
			_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("x"),
				ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: until})
			return err
		}},
		{"PutObject legal hold", func() error {
			_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("x"),
				ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
			return err
		}},
		{"CopyObject", func() error {
			_, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), CopySource: aws.String(bucket + "/src"),
				ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: until})
			return err
		}},
		{"CreateMultipartUpload", func() error {
			_, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k"),
				ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantAPIError(t, tc.call(), "InvalidRequest")
			objectAbsent(t, cl, bucket, "k")
		})
	}
	ups, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil || len(ups.Uploads) != 0 {
		t.Fatalf("a refused CreateMultipartUpload left an upload: %+v, %v", ups.Uploads, err)
	}
	_, err = cl.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(bucket), Key: aws.String("src")})
	wantAPIError(t, err, "InvalidRequest")
}

func eaUnhonoured(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	bucket := mustBucket(t, cl, "unh")
	putString(t, cl, bucket, "src", "source")
	put := func(mod func(*s3.PutObjectInput)) error {
		in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("x")}
		mod(in)
		_, err := cl.PutObject(ctx, in)
		return err
	}
	bigMeta := map[string]string{"big": strings.Repeat("m", 2100)}
	for _, tc := range []struct {
		name, code string
		call       func() error
	}{
		{"PutObject tagging aws:", "InvalidTag", func() error { return put(func(in *s3.PutObjectInput) { in.Tagging = aws.String("aws:a=b") }) }},
		{"PutObject website redirect", "NotImplemented", func() error {
			return put(func(in *s3.PutObjectInput) { in.WebsiteRedirectLocation = aws.String("/elsewhere") })
		}},
		{"PutObject storage class GLACIER", "InvalidStorageClass", func() error { return put(func(in *s3.PutObjectInput) { in.StorageClass = types.StorageClassGlacier }) }},
		{"PutObject invalid storage class", "InvalidStorageClass", func() error {
			return put(func(in *s3.PutObjectInput) { in.StorageClass = types.StorageClass("FANCY") })
		}},
		{"PutObject If-None-Match etag", "NotImplemented", func() error {
			return put(func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String(`"0123456789abcdef0123456789abcdef"`) })
		}},
		{"CreateMultipartUpload tagging duplicate", "InvalidArgument", func() error {
			_, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k"), Tagging: aws.String("a=b&a=c")})
			return err
		}},
		{"CreateMultipartUpload storage class", "InvalidStorageClass", func() error {
			_, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k"), StorageClass: types.StorageClassStandardIa})
			return err
		}},
		{"CopyObject tagging REPLACE bad key", "InvalidTag", func() error {
			_, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), CopySource: aws.String(bucket + "/src"),
				TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("a%2A=b")})
			return err
		}},
		{"CopyObject REPLACE metadata over 2 KB", "MetadataTooLarge", func() error {
			_, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), CopySource: aws.String(bucket + "/src"),
				MetadataDirective: types.MetadataDirectiveReplace, Metadata: bigMeta})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantAPIError(t, tc.call(), tc.code)
			objectAbsent(t, cl, bucket, "k")
		})
	}
	// What matches what s3gate does is accepted: STANDARD, a copy's tagging COPY.
	if err := put(func(in *s3.PutObjectInput) { in.StorageClass = types.StorageClassStandard }); err != nil {
		t.Fatalf("PutObject STANDARD: %v", err)
	}
	if _, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("k2"), CopySource: aws.String(bucket + "/src"),
		TaggingDirective: types.TaggingDirectiveCopy}); err != nil {
		t.Fatalf("CopyObject tagging COPY: %v", err)
	}
	// If-None-Match with an ETag on Complete is NotImplemented; the upload stays.
	id := createUpload(t, cl, bucket, "mp")
	parts := []types.CompletedPart{uploadPart(t, cl, bucket, "mp", id, 1, []byte("part"))}
	_, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: aws.String(id),
		IfNoneMatch: aws.String(`"abc"`), MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	wantAPIError(t, err, "NotImplemented")
	objectAbsent(t, cl, bucket, "mp")
	if _, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: aws.String(id),
		IfNoneMatch: aws.String("*"), MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatalf("Complete with If-None-Match: * after the refusal: %v", err)
	}
	// Raw: an empty x-amz-tagging asks for no tags and is accepted.
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/k3", Body: []byte("x"), Header: http.Header{"X-Amz-Tagging": {""}}})
	if status != http.StatusOK {
		t.Fatalf("PUT with empty x-amz-tagging: HTTP %d %s", status, body)
	}
}

func eaExpectedOwner(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	bucket := mustBucket(t, cl, "own")
	// The owner id is the one ListBuckets reports.
	lb, err := cl.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || lb.Owner == nil || aws.ToString(lb.Owner.ID) == "" {
		t.Fatalf("ListBuckets owner: %+v, %v", lb, err)
	}
	owner := aws.ToString(lb.Owner.ID)
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("x"), ExpectedBucketOwner: aws.String(owner)}); err != nil {
		t.Fatalf("PutObject with the right expected owner: %v", err)
	}
	_, err = cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("other"), Body: strings.NewReader("x"), ExpectedBucketOwner: aws.String("123456789012")})
	wantAPIError(t, err, "AccessDenied")
	objectAbsent(t, cl, bucket, "other")
	_, err = cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), ExpectedBucketOwner: aws.String("123456789012")})
	wantAPIError(t, err, "AccessDenied")
	_, err = cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("copy"), CopySource: aws.String(bucket + "/k"),
		ExpectedSourceBucketOwner: aws.String("123456789012")})
	wantAPIError(t, err, "AccessDenied")
	objectAbsent(t, cl, bucket, "copy")
	if _, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("copy"), CopySource: aws.String(bucket + "/k"),
		ExpectedSourceBucketOwner: aws.String(owner), ExpectedBucketOwner: aws.String(owner)}); err != nil {
		t.Fatalf("CopyObject with the right owners: %v", err)
	}
}

func eaListBuckets(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	prefix := bucketName("lb") + "-"
	var names []string
	for i := range 3 {
		n := prefix + strconv.Itoa(i)
		if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(n)}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { emptyAndDelete(t, cl, n) })
		names = append(names, n)
	}
	var got []string
	in := &s3.ListBucketsInput{Prefix: aws.String(prefix), MaxBuckets: aws.Int32(2)}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("ListBuckets does not end")
		}
		out, err := cl.ListBuckets(ctx, in)
		if err != nil {
			t.Fatalf("ListBuckets: %v", err)
		}
		if aws.ToString(out.Prefix) != prefix {
			t.Fatalf("ListBuckets Prefix %q, want %q", aws.ToString(out.Prefix), prefix)
		}
		for _, b := range out.Buckets {
			got = append(got, aws.ToString(b.Name))
		}
		if pages == 0 && (len(out.Buckets) != 2 || aws.ToString(out.ContinuationToken) == "") {
			t.Fatalf("first page: %d buckets, token %q; want 2 and a token", len(out.Buckets), aws.ToString(out.ContinuationToken))
		}
		if aws.ToString(out.ContinuationToken) == "" {
			break
		}
		in.ContinuationToken = out.ContinuationToken
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("paged buckets %q, want %q", got, names)
	}
	for _, bad := range []url.Values{{"max-buckets": {"0"}}, {"max-buckets": {"x"}}, {"continuation-token": {"%%%"}}} {
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/", Query: bad})
		wantRawError(t, fmt.Sprintf("ListBuckets %v", bad), status, body, http.StatusBadRequest, "InvalidArgument")
	}
}

func eaListingDetails(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	bucket := mustBucket(t, cl, "det")
	for _, k := range []string{"a b/c", "x+y"} {
		putString(t, cl, bucket, k, k)
	}
	// V2: an empty delimiter is not echoed; an empty continuation token lists
	// from the start and is echoed empty.
	l, raw := rawList(t, gw, bucket, url.Values{"list-type": {"2"}, "delimiter": {""}, "continuation-token": {""}})
	if l.Delimiter != nil || !strings.Contains(raw, "<ContinuationToken></ContinuationToken>") || len(l.Contents) != 2 {
		t.Fatalf("V2 delimiter= continuation-token= : %s", raw)
	}
	// encoding-type=url: a space is %20, a plus %2B.
	l, raw = rawList(t, gw, bucket, url.Values{"list-type": {"2"}, "encoding-type": {"url"}, "delimiter": {"/"}})
	if len(l.CommonPrefixes) != 1 || l.CommonPrefixes[0].Prefix != "a%20b/" || len(l.Contents) != 1 || l.Contents[0].Key != "x%2By" {
		t.Fatalf("V2 encoding-type=url: want prefix a%%20b/ and key x%%2By: %s", raw)
	}
	// The SDK reads the empty token as a fresh listing too.
	out, err := cl.ListObjectsV2(testCtx(t, time.Minute), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), ContinuationToken: aws.String("")})
	if err != nil || aws.ToInt32(out.KeyCount) != 2 {
		t.Fatalf("SDK ListObjectsV2 with an empty token: %+v, %v", out, err)
	}
}

// sendHeadersOnly writes only the request line and headers of req (which
// declares a body it never sends) and returns the gateway's first response,
// and a function waiting (at most wait) for the server to close the
// connection once the answer's body was read: nil when it did, else what the
// read returned. The reads have deadlines well over any answer's time: they
// bound the wait of a broken gateway and are condition waits, not speed
// assertions.
func sendHeadersOnly(t *testing.T, gw *testgw.Gateway, req *http.Request) (*http.Response, func(wait time.Duration) error) {
	t.Helper()
	u, err := url.Parse(gw.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	var b strings.Builder
	b.WriteString(req.Method + " " + req.URL.RequestURI() + " HTTP/1.1\r\nHost: " + req.URL.Host + "\r\n")
	b.WriteString("Content-Length: " + strconv.FormatInt(req.ContentLength, 10) + "\r\n")
	if err := req.Header.Write(&b); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatalf("write headers: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(4 * time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("%s %s, body not sent: no answer before the body: %v", req.Method, req.URL.Path, err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	closed := func(wait time.Duration) error {
		_ = conn.SetReadDeadline(time.Now().Add(wait))
		if n, err := br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			return fmt.Errorf("read after the answer: %d bytes, %v", n, err)
		}
		return nil
	}
	return resp, closed
}

func eaExpect(t *testing.T) {
	// Its own gateway: a short read idle timeout bounds how long an unsent
	// body may hold the connection after the early answer.
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded, Env: []string{"S3GATE_READ_IDLE_TIMEOUT=1s"}})
	cl := sdkClient(t, gw)
	bucket := mustBucket(t, cl, "expect")
	ctx := context.Background()
	for _, tc := range []struct {
		name, path, payload string
		ak, sk              string
		status              int
		code                string
	}{
		{"missing bucket", "/" + bucketName("gone") + "/k", "UNSIGNED-PAYLOAD", "", "", http.StatusNotFound, "NoSuchBucket"},
		{"bad signature", "/" + bucket + "/k", "UNSIGNED-PAYLOAD", gw.AccessKey, "wrong-secret", http.StatusForbidden, "SignatureDoesNotMatch"},
		{"bad signature, signed payload", "/" + bucket + "/k", sha([]byte("never sent")), gw.AccessKey, "wrong-secret", http.StatusForbidden, "SignatureDoesNotMatch"},
		{"unknown key", "/" + bucket + "/k", "UNSIGNED-PAYLOAD", "AKIDUNKNOWN", "secret", http.StatusForbidden, "InvalidAccessKeyId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, expect := range []bool{true, false} {
				for _, size := range []int64{100 << 10, 8 << 20} { // below and above net/http's drain limit
					hdr := http.Header{}
					if expect {
						hdr.Set("Expect", "100-continue")
					}
					req := newRawRequest(t, ctx, gw, rawReq{Method: http.MethodPut, Path: tc.path, Payload: tc.payload, AK: tc.ak, SK: tc.sk,
						Header: hdr, Stream: strings.NewReader(""), Length: size})
					resp, closed := sendHeadersOnly(t, gw, req)
					if resp.StatusCode == http.StatusContinue {
						t.Fatalf("size %d: got 100 Continue, want the early %d", size, tc.status)
					}
					body, _ := io.ReadAll(resp.Body)
					what := fmt.Sprintf("expect %v, size %d", expect, size)
					wantRawError(t, what, resp.StatusCode, body, tc.status, tc.code)
					// The body never comes: the server must still let the
					// connection go (after the read idle timeout at most),
					// or any client could hold every connection slot.
					if err := closed(time.Minute); err != nil {
						t.Fatalf("%s: the connection stays open after the early answer: %v", what, err)
					}
				}
			}
		})
	}
	objectAbsent(t, cl, bucket, "k")
}

// eaUnknownSubresources checks that a request selecting an API s3gate does
// not have (a newer AWS subresource, or a known one on the wrong resource or
// method) is refused and changes nothing, instead of falling through to the
// method's plain operation: DELETE ?metadataTable was a DeleteBucket, PUT
// key?renameObject an empty PutObject, PUT key?encryption a PutObject of the
// request's XML.
func eaUnknownSubresources(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	bucket := mustBucket(t, cl, "subres")
	empty := mustBucket(t, cl, "subrese")
	putString(t, cl, bucket, "doc", "precious")
	putString(t, cl, bucket, "new", "other")
	intact := func(t *testing.T) {
		t.Helper()
		if got := getString(t, cl, bucket, "doc"); got != "precious" {
			t.Fatalf("object changed to %q", got)
		}
		if got := getString(t, cl, bucket, "new"); got != "other" {
			t.Fatalf("object changed to %q", got)
		}
		if _, err := cl.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(empty)}); err != nil {
			t.Fatalf("empty bucket gone: %v", err)
		}
	}
	sdkCalls := []struct {
		name string
		call func() error
	}{
		{"DeleteBucketMetadataTableConfiguration", func() error {
			_, err := cl.DeleteBucketMetadataTableConfiguration(ctx, &s3.DeleteBucketMetadataTableConfigurationInput{Bucket: aws.String(empty)})
			return err
		}},
		{"DeleteBucketMetadataConfiguration", func() error {
			_, err := cl.DeleteBucketMetadataConfiguration(ctx, &s3.DeleteBucketMetadataConfigurationInput{Bucket: aws.String(empty)})
			return err
		}},
		{"GetBucketAbac", func() error {
			_, err := cl.GetBucketAbac(ctx, &s3.GetBucketAbacInput{Bucket: aws.String(bucket)})
			return err
		}},
		{"UpdateObjectEncryption", func() error {
			_, err := cl.UpdateObjectEncryption(ctx, &s3.UpdateObjectEncryptionInput{Bucket: aws.String(bucket), Key: aws.String("doc"),
				ObjectEncryption: &types.ObjectEncryptionMemberSSEKMS{Value: types.SSEKMSEncryption{KMSKeyArn: aws.String("arn:aws:kms:us-east-1:111122223333:key/k")}}})
			return err
		}},
		{"RenameObject", func() error {
			_, err := cl.RenameObject(ctx, &s3.RenameObjectInput{Bucket: aws.String(bucket), Key: aws.String("doc"), RenameSource: aws.String("new")})
			return err
		}},
	}
	for _, tc := range sdkCalls {
		t.Run(tc.name, func(t *testing.T) {
			wantAPIError(t, tc.call(), "NotImplemented")
			intact(t)
		})
	}
	raw := []struct {
		method, path, query string
		body                string
		status              int
		code                string
	}{
		{"DELETE", "/" + empty, "versions", "", http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{"DELETE", "/" + empty, "uploads", "", http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{"DELETE", "/" + empty, "retention", "", http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{"PUT", "/" + empty, "delete", "", http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{"PUT", "/" + bucket + "/doc", "policy", `{"Version":"2012-10-17"}`, http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{"PUT", "/" + bucket + "/doc", "uploads", "x", http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{"DELETE", "/" + bucket + "/doc", "lifecycle", "", http.StatusMethodNotAllowed, "MethodNotAllowed"},
		{"PUT", "/" + bucket + "/doc", "someFutureApi", "x", http.StatusNotImplemented, "NotImplemented"},
		{"DELETE", "/" + bucket + "/new", "someFutureApi=", "", http.StatusNotImplemented, "NotImplemented"},
		{"DELETE", "/" + empty, "someFutureApi", "", http.StatusNotImplemented, "NotImplemented"},
		{"POST", "/" + empty, "metadataTable", "<x/>", http.StatusNotImplemented, "NotImplemented"},
	}
	for _, tc := range raw {
		t.Run(tc.method+" "+tc.path+"?"+tc.query, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			status, _, body := doRaw(t, gw, rawReq{Method: tc.method, Path: tc.path, Query: q, Body: []byte(tc.body)})
			wantRawError(t, tc.method+" ?"+tc.query, status, body, tc.status, tc.code)
			intact(t)
		})
	}
	// A parameter with a value that names no API is ignored, as AWS ignores
	// it (SDKs add x-id=PutObject; proxies add cache busters).
	status, _, body := doRaw(t, gw, rawReq{Method: "PUT", Path: "/" + bucket + "/third", Query: url.Values{"someParam": {"v"}}, Body: []byte("third")})
	if status != http.StatusOK {
		t.Fatalf("PUT with a valued unknown parameter: HTTP %d %s", status, body)
	}
	if got := getString(t, cl, bucket, "third"); got != "third" {
		t.Fatalf("got %q", got)
	}
}
