package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/internal/testreq"
)

// TestVersioning: S3 versioning through aws-sdk-go-v2 on every engine (the
// light cut of the matrix: each engine once, both transports covered),
// with the aws cli, minio-go and the exact-XML checks on the embedded
// engine (s3api alone decides those). The paging model (300 versions;
// 2,500 with make test-versions) runs on the two metadata dialects
// (embedded and PostgreSQL, through pgchunks): listing is metadata only,
// the same SQL for pglo and local files.
func TestVersioning(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c combo, gw *testgw.Gateway) {
		cl := sdkClient(t, gw)
		t.Run("PutTwiceDeleteMarker", func(t *testing.T) { verLifecycle(t, cl) })
		t.Run("Suspended", func(t *testing.T) { verSuspended(t, cl) })
		t.Run("CopyAndMultipart", func(t *testing.T) { verCopy(t, cl) })
		t.Run("TaggingAndACLByVersion", func(t *testing.T) { verTagging(t, cl) })
		if c.Engine == testgw.Embedded || c.Engine == config.EnginePGChunks || testgw.External() {
			t.Run("PagingModel", func(t *testing.T) { verPaging(t, cl) })
		}
		if c.Engine == testgw.Embedded || testgw.External() {
			t.Run("ExactXML", func(t *testing.T) { verExactXML(t, gw, cl) })
			t.Run("MinioGo", func(t *testing.T) { verMinio(t, gw, cl) })
			t.Run("AWSCLI", func(t *testing.T) { verCLI(t, gw, cl) })
		}
	})
}

// versionedBucket creates a bucket with versioning on; its cleanup
// removes every version first.
func versionedBucket(t *testing.T, cl *s3.Client, prefix string) string {
	t.Helper()
	b := mustBucket(t, cl, prefix)
	t.Cleanup(func() { deleteAllVersions(t, cl, b) }) // runs before mustBucket's
	setVersioning(t, cl, b, types.BucketVersioningStatusEnabled)
	return b
}

func setVersioning(t *testing.T, cl *s3.Client, b string, st types.BucketVersioningStatus) {
	t.Helper()
	if _, err := cl.PutBucketVersioning(testCtx(t, time.Minute), &s3.PutBucketVersioningInput{Bucket: aws.String(b),
		VersioningConfiguration: &types.VersioningConfiguration{Status: st}}); err != nil {
		t.Fatalf("PutBucketVersioning %s %s: %v", b, st, err)
	}
	out, err := cl.GetBucketVersioning(testCtx(t, time.Minute), &s3.GetBucketVersioningInput{Bucket: aws.String(b)})
	if err != nil || out.Status != st {
		t.Fatalf("GetBucketVersioning %s: %q %v, want %s", b, out.Status, err, st)
	}
}

// deleteAllVersions removes every version and delete marker of b.
func deleteAllVersions(t testing.TB, cl *s3.Client, b string) {
	ctx := testCtx(t, 2*time.Minute)
	for {
		out, err := cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(b)})
		if err != nil {
			t.Logf("cleanup list versions %s: %v", b, err)
			return
		}
		var ids []types.ObjectIdentifier
		for _, v := range out.Versions {
			ids = append(ids, types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range out.DeleteMarkers {
			ids = append(ids, types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		if len(ids) == 0 {
			return
		}
		if _, err := cl.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(b), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
			t.Logf("cleanup delete versions %s: %v", b, err)
			return
		}
	}
}

// verEntry is one version or delete marker as a listing shows it.
type verEntry struct {
	Key, ID, ETag string
	Marker        bool
	Latest        bool
}

func (e verEntry) String() string {
	kind := "v"
	if e.Marker {
		kind = "dm"
	}
	return fmt.Sprintf("%s:%s:%s:latest=%v", kind, e.Key, e.ID, e.Latest)
}

// listAllVersions pages through every version of b (page size maxKeys)
// and returns the versions and markers of each page, in the SDK's split.
func listAllVersions(t *testing.T, cl *s3.Client, in *s3.ListObjectVersionsInput) (versions, markers []verEntry) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("ListObjectVersions does not end")
		}
		out, err := cl.ListObjectVersions(ctx, in)
		if err != nil {
			t.Fatalf("ListObjectVersions: %v", err)
		}
		for _, v := range out.Versions {
			versions = append(versions, verEntry{Key: aws.ToString(v.Key), ID: aws.ToString(v.VersionId), ETag: aws.ToString(v.ETag), Latest: aws.ToBool(v.IsLatest)})
		}
		for _, m := range out.DeleteMarkers {
			markers = append(markers, verEntry{Key: aws.ToString(m.Key), ID: aws.ToString(m.VersionId), Marker: true, Latest: aws.ToBool(m.IsLatest)})
		}
		if !aws.ToBool(out.IsTruncated) {
			return versions, markers
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}

// wantVersions checks the listing of key in b against want (newest
// first), the SDK's split into versions and markers included.
func wantVersions(t *testing.T, cl *s3.Client, b string, want ...verEntry) {
	t.Helper()
	vs, ms := listAllVersions(t, cl, &s3.ListObjectVersionsInput{Bucket: aws.String(b)})
	var wv, wm []verEntry
	for _, e := range want {
		e.ETag = ""
		if e.Marker {
			wm = append(wm, e)
		} else {
			wv = append(wv, e)
		}
	}
	for i := range vs {
		vs[i].ETag = ""
	}
	if fmt.Sprint(vs) != fmt.Sprint(wv) || fmt.Sprint(ms) != fmt.Sprint(wm) {
		t.Fatalf("versions %v markers %v, want %v and %v", vs, ms, wv, wm)
	}
}

// errHeader is a header of the HTTP answer behind an SDK error.
func errHeader(err error, name string) string {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.Header.Get(name)
	}
	return ""
}

func putVersion(t *testing.T, cl *s3.Client, b, k string, body []byte) string {
	t.Helper()
	out, err := cl.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(k), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatalf("PutObject %s: %v", k, err)
	}
	return aws.ToString(out.VersionId)
}

// getVersion reads version id of k ("" the latest) and checks its bytes.
func getVersion(t *testing.T, cl *s3.Client, b, k, id string, want []byte) {
	t.Helper()
	in := &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String(k)}
	if id != "" {
		in.VersionId = aws.String(id)
	}
	out, err := cl.GetObject(testCtx(t, time.Minute), in)
	if err != nil {
		t.Fatalf("GetObject %s version %q: %v", k, id, err)
	}
	defer out.Body.Close()
	got, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("GetObject %s version %q: read: %v", k, id, err)
	}
	if sha(got) != sha(want) {
		t.Fatalf("GetObject %s version %q: %d bytes, not the %d stored", k, id, len(got), len(want))
	}
	if id != "" && aws.ToString(out.VersionId) != id {
		t.Fatalf("GetObject %s version %q answers x-amz-version-id %q", k, id, aws.ToString(out.VersionId))
	}
}

func verLifecycle(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := versionedBucket(t, cl, "ver")
	v1body, v2body := genBytes(1, 600*kib), []byte("second") // the first is streamed, not inline
	v1 := putVersion(t, cl, b, "k", v1body)
	v2 := putVersion(t, cl, b, "k", v2body)
	if len(v1) != 32 || len(v2) != 32 || v1 == v2 {
		t.Fatalf("version ids %q %q: want two distinct 32-character ids", v1, v2)
	}
	wantVersions(t, cl, b, verEntry{Key: "k", ID: v2, Latest: true}, verEntry{Key: "k", ID: v1})
	getVersion(t, cl, b, "k", v1, v1body)
	getVersion(t, cl, b, "k", v2, v2body)
	getVersion(t, cl, b, "k", "", v2body)
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1)})
	if err != nil || aws.ToString(head.VersionId) != v1 || aws.ToInt64(head.ContentLength) != int64(len(v1body)) {
		t.Fatalf("HeadObject by id: %+v %v", head, err)
	}
	attrs, err := cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}})
	if err != nil || aws.ToString(attrs.VersionId) != v1 || aws.ToInt64(attrs.ObjectSize) != int64(len(v1body)) {
		t.Fatalf("GetObjectAttributes by id: %+v %v", attrs, err)
	}

	// DELETE adds a delete marker; the key reads as gone, its versions stay.
	del, err := cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String("k")})
	if err != nil || !aws.ToBool(del.DeleteMarker) || len(aws.ToString(del.VersionId)) != 32 {
		t.Fatalf("DeleteObject: %+v %v, want a delete marker", del, err)
	}
	m := aws.ToString(del.VersionId)
	_, err = cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("k")})
	wantAPIError(t, err, "NoSuchKey")
	if errHeader(err, "x-amz-delete-marker") != "true" || errHeader(err, "x-amz-version-id") != m {
		t.Fatalf("GET of a deleted key: x-amz-delete-marker %q x-amz-version-id %q, want true and %s",
			errHeader(err, "x-amz-delete-marker"), errHeader(err, "x-amz-version-id"), m)
	}
	_, err = cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("k")})
	wantStatus(t, err, http.StatusNotFound)
	if errHeader(err, "x-amz-delete-marker") != "true" {
		t.Fatalf("HEAD of a deleted key: no x-amz-delete-marker")
	}
	getVersion(t, cl, b, "k", v1, v1body)
	_, err = cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(m)})
	wantAPIError(t, err, "MethodNotAllowed")
	if errHeader(err, "x-amz-delete-marker") != "true" || errHeader(err, "x-amz-version-id") != m || errHeader(err, "Last-Modified") == "" {
		t.Fatalf("GET of a delete marker by id: headers %q %q %q", errHeader(err, "x-amz-delete-marker"), errHeader(err, "x-amz-version-id"), errHeader(err, "Last-Modified"))
	}
	_, err = cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(strings.Repeat("A", 32))})
	wantAPIError(t, err, "NoSuchVersion")
	_, err = cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(strings.Repeat("A", 32))})
	wantStatus(t, err, http.StatusNotFound)
	_, err = cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String("not-an-id")})
	wantAPIError(t, err, "InvalidArgument")
	if keys := listKeys(t, cl, b, ""); len(keys) != 0 {
		t.Fatalf("ListObjectsV2 after the delete marker: %q", keys)
	}
	wantVersions(t, cl, b, verEntry{Key: "k", ID: m, Marker: true, Latest: true}, verEntry{Key: "k", ID: v2}, verEntry{Key: "k", ID: v1})
	_, err = cl.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b)})
	wantAPIError(t, err, "BucketNotEmpty")

	// Deleting the marker by id brings v2 back; deleting v2 by id, v1.
	del, err = cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(m)})
	if err != nil || !aws.ToBool(del.DeleteMarker) || aws.ToString(del.VersionId) != m {
		t.Fatalf("DeleteObject of the marker by id: %+v %v", del, err)
	}
	getVersion(t, cl, b, "k", "", v2body)
	del, err = cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v2)})
	if err != nil || aws.ToBool(del.DeleteMarker) || aws.ToString(del.VersionId) != v2 {
		t.Fatalf("DeleteObject of v2 by id: %+v %v", del, err)
	}
	getVersion(t, cl, b, "k", "", v1body)
	wantVersions(t, cl, b, verEntry{Key: "k", ID: v1, Latest: true})
	// A version id that names nothing is a success, as on S3.
	if _, err := cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(strings.Repeat("B", 32))}); err != nil {
		t.Fatalf("DeleteObject of an unknown version: %v", err)
	}
	wantVersions(t, cl, b, verEntry{Key: "k", ID: v1, Latest: true})
}

func verSuspended(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := mustBucket(t, cl, "versus")
	t.Cleanup(func() { deleteAllVersions(t, cl, b) })
	// Before versioning: a null version, and no version header.
	if id := putVersion(t, cl, b, "k", []byte("n0")); id != "" {
		t.Fatalf("PUT in a bucket that never had versioning answers x-amz-version-id %q", id)
	}
	setVersioning(t, cl, b, types.BucketVersioningStatusEnabled)
	v1 := putVersion(t, cl, b, "k", []byte("v1"))
	wantVersions(t, cl, b, verEntry{Key: "k", ID: v1, Latest: true}, verEntry{Key: "k", ID: "null"})
	getVersion(t, cl, b, "k", "null", []byte("n0"))

	// Suspended: PUT writes null and replaces the previous null.
	setVersioning(t, cl, b, types.BucketVersioningStatusSuspended)
	if id := putVersion(t, cl, b, "k", []byte("n1")); id != "null" {
		t.Fatalf("PUT in a suspended bucket: version %q, want null", id)
	}
	wantVersions(t, cl, b, verEntry{Key: "k", ID: "null", Latest: true}, verEntry{Key: "k", ID: v1})
	putVersion(t, cl, b, "k", []byte("n2"))
	wantVersions(t, cl, b, verEntry{Key: "k", ID: "null", Latest: true}, verEntry{Key: "k", ID: v1})
	getVersion(t, cl, b, "k", "null", []byte("n2"))
	getVersion(t, cl, b, "k", v1, []byte("v1"))

	// DELETE replaces the null version with a null delete marker.
	del, err := cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String("k")})
	if err != nil || !aws.ToBool(del.DeleteMarker) || aws.ToString(del.VersionId) != "null" {
		t.Fatalf("DeleteObject in a suspended bucket: %+v %v, want a null delete marker", del, err)
	}
	wantVersions(t, cl, b, verEntry{Key: "k", ID: "null", Marker: true, Latest: true}, verEntry{Key: "k", ID: v1})
	_, err = cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String("null")})
	wantAPIError(t, err, "MethodNotAllowed")
	getVersion(t, cl, b, "k", v1, []byte("v1"))
}

func verCopy(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := versionedBucket(t, cl, "vercp")
	v1body := genBytes(2, 700*kib)
	v1 := putVersion(t, cl, b, "src", v1body)
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("src"), Body: strings.NewReader("newer"),
		Tagging: aws.String("newer=yes"), ContentType: aws.String("text/newer")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}

	cp, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("dst"),
		CopySource: aws.String(b + "/src?versionId=" + v1)})
	if err != nil || aws.ToString(cp.CopySourceVersionId) != v1 || len(aws.ToString(cp.VersionId)) != 32 {
		t.Fatalf("CopyObject from a version: %+v %v", cp, err)
	}
	getVersion(t, cl, b, "dst", aws.ToString(cp.VersionId), v1body)
	wantObjectTags(t, cl, b, "dst") // the copied version's tags (none), not the latest's
	if h, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("dst")}); err != nil || aws.ToString(h.ContentType) == "text/newer" {
		t.Fatalf("copy of a version has the latest's metadata: %+v %v", h, err)
	}
	// Copying a version onto its own key restores it as a new version.
	re, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("src"),
		CopySource: aws.String(b + "/src?versionId=" + v1)})
	if err != nil || aws.ToString(re.CopySourceVersionId) != v1 {
		t.Fatalf("CopyObject restoring a version: %+v %v", re, err)
	}
	getVersion(t, cl, b, "src", "", v1body)
	_, err = cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("x"), CopySource: aws.String(b + "/src?versionId=bad")})
	wantAPIError(t, err, "InvalidArgument")

	// UploadPartCopy from a version; Complete answers the new version.
	up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp")})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	pc, err := cl.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(b), Key: aws.String("mp"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), CopySource: aws.String(b + "/src?versionId=" + v1)})
	if err != nil || aws.ToString(pc.CopySourceVersionId) != v1 {
		t.Fatalf("UploadPartCopy from a version: %+v %v", pc, err)
	}
	// Naming no version, it answers the version it read (the latest), whole
	// (the part references the blob) or a range (the bytes are copied).
	for i, rg := range []*string{nil, aws.String("bytes=0-99")} {
		lc, err := cl.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(b), Key: aws.String("mp"), UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 2)), CopySource: aws.String(b + "/src"), CopySourceRange: rg})
		if err != nil || aws.ToString(lc.CopySourceVersionId) != aws.ToString(re.VersionId) {
			t.Fatalf("UploadPartCopy of the latest (range %v): %+v %v, want source version %s", aws.ToString(rg), lc, err, aws.ToString(re.VersionId))
		}
	}
	done, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: pc.CopyPartResult.ETag}}}})
	if err != nil || len(aws.ToString(done.VersionId)) != 32 {
		t.Fatalf("CompleteMultipartUpload: %+v %v", done, err)
	}
	getVersion(t, cl, b, "mp", aws.ToString(done.VersionId), v1body)
}

func verTagging(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := versionedBucket(t, cl, "vertag")
	v1 := putVersion(t, cl, b, "k", []byte("one"))
	v2 := putVersion(t, cl, b, "k", []byte("two"))
	before, _ := listAllVersions(t, cl, &s3.ListObjectVersionsInput{Bucket: aws.String(b)})
	tags := &types.Tagging{TagSet: []types.Tag{{Key: aws.String("env"), Value: aws.String("old")}}}
	pt, err := cl.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1), Tagging: tags})
	if err != nil || aws.ToString(pt.VersionId) != v1 {
		t.Fatalf("PutObjectTagging by version: %+v %v", pt, err)
	}
	gt, err := cl.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1)})
	if err != nil || aws.ToString(gt.VersionId) != v1 || !slices.Equal(tagsOf(gt.TagSet), []string{"env=old"}) {
		t.Fatalf("GetObjectTagging by version: %+v %v", gt, err)
	}
	wantObjectTags(t, cl, b, "k") // the latest has none
	if _, err := cl.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("k"), Tagging: tags}); err != nil {
		t.Fatalf("PutObjectTagging on the latest: %v", err)
	}
	if _, err := cl.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1), ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatalf("PutObjectAcl by version: %v", err)
	}
	if _, err := cl.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1)}); err != nil {
		t.Fatalf("GetObjectAcl by version: %v", err)
	}
	dt, err := cl.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1)})
	if err != nil || aws.ToString(dt.VersionId) != v1 {
		t.Fatalf("DeleteObjectTagging by version: %+v %v", dt, err)
	}
	// No new version, the same ids and ETags.
	after, _ := listAllVersions(t, cl, &s3.ListObjectVersionsInput{Bucket: aws.String(b)})
	if fmt.Sprint(after) != fmt.Sprint(before) || len(after) != 2 || after[0].ID != v2 {
		t.Fatalf("versions after tagging and ACL calls: %v, want unchanged %v", after, before)
	}
	getVersion(t, cl, b, "k", v1, []byte("one"))
	getVersion(t, cl, b, "k", "", []byte("two"))
	_, err = cl.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(strings.Repeat("C", 32))})
	wantAPIError(t, err, "NoSuchVersion")
}

// verPaging builds S3GATE_VERSION_COUNT versions and delete markers (300
// by default; make test-versions: 2,500) on count/10 keys (count/25 from
// 1,000 on): a PUT of every key and of every fifth again, then
// DeleteObjects of every key, each adding a marker per key, 10 (25) times
// (a PUT costs far more than a marker). It removes some by id with
// DeleteObjects and pages through the listing against a model built from
// the ids the gateway answered.
func verPaging(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 3*time.Minute)
	b := versionedBucket(t, cl, "verpage")
	count := versionCount(t)
	rounds := 10
	if count >= 1000 {
		rounds = 25
	}
	nkeys := count / rounds
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("p/%04d", i)
	}
	model := map[string][]verEntry{} // newest first
	var mu sync.Mutex
	putAll := func(ks []string, round int) {
		var wg sync.WaitGroup
		work := make(chan string)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range work {
					out, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(k), Body: strings.NewReader(fmt.Sprintf("%s-%d", k, round))})
					if err != nil {
						t.Errorf("PutObject %s: %v", k, err)
						continue
					}
					mu.Lock()
					model[k] = append([]verEntry{{Key: k, ID: aws.ToString(out.VersionId), ETag: aws.ToString(out.ETag)}}, model[k]...)
					mu.Unlock()
				}
			}()
		}
		for _, k := range ks {
			work <- k
		}
		close(work)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	deleteAll := func() {
		ids := make([]types.ObjectIdentifier, len(keys))
		for i, k := range keys {
			ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := cl.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(b), Delete: &types.Delete{Objects: ids}})
		if err != nil || len(out.Errors) != 0 || len(out.Deleted) != len(keys) {
			t.Fatalf("DeleteObjects: %d deleted, errors %+v, %v", len(out.Deleted), out.Errors, err)
		}
		for _, d := range out.Deleted {
			id := aws.ToString(d.DeleteMarkerVersionId)
			if !aws.ToBool(d.DeleteMarker) || len(id) != 32 || d.VersionId != nil {
				t.Fatalf("DeleteObjects without a version in a versioned bucket: %+v, want a new marker", d)
			}
			k := aws.ToString(d.Key)
			model[k] = append([]verEntry{{Key: k, ID: id, Marker: true}}, model[k]...)
		}
	}
	putAll(keys, 0)
	deleteAll()
	var fifth []string
	for i := 0; i < nkeys; i += 5 {
		fifth = append(fifth, keys[i])
	}
	putAll(fifth, 1)
	for range rounds - 1 {
		deleteAll()
	}

	// Remove some versions by id: the latest marker of every 7th key, the
	// oldest object (a PUT's) of every 11th; one entry names no version.
	var ids []types.ObjectIdentifier
	want := map[string]verEntry{}
	for i := 0; i < nkeys; i++ {
		k := keys[i]
		if i%7 == 0 {
			e := model[k][0]
			ids, want[k+" "+e.ID] = append(ids, types.ObjectIdentifier{Key: aws.String(k), VersionId: aws.String(e.ID)}), e
			model[k] = model[k][1:]
		}
		if i%11 == 0 {
			n := len(model[k]) - 1
			e := model[k][n]
			ids, want[k+" "+e.ID] = append(ids, types.ObjectIdentifier{Key: aws.String(k), VersionId: aws.String(e.ID)}), e
			model[k] = model[k][:n]
		}
	}
	ids = append(ids, types.ObjectIdentifier{Key: aws.String(keys[1]), VersionId: aws.String(strings.Repeat("Z", 32))})
	out, err := cl.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(b), Delete: &types.Delete{Objects: ids}})
	if err != nil || len(out.Errors) != 0 || len(out.Deleted) != len(ids) {
		t.Fatalf("DeleteObjects by version: %d of %d deleted, errors %+v, %v", len(out.Deleted), len(ids), out.Errors, err)
	}
	for _, d := range out.Deleted {
		k, id := aws.ToString(d.Key), aws.ToString(d.VersionId)
		e, ok := want[k+" "+id]
		if !ok {
			if id != strings.Repeat("Z", 32) || aws.ToBool(d.DeleteMarker) {
				t.Fatalf("DeleteObjects answered %+v, which was not asked", d)
			}
			continue
		}
		if aws.ToBool(d.DeleteMarker) != e.Marker || (e.Marker && aws.ToString(d.DeleteMarkerVersionId) != id) || (!e.Marker && d.DeleteMarkerVersionId != nil) {
			t.Fatalf("DeleteObjects of %v answered DeleteMarker %v DeleteMarkerVersionId %q", e, aws.ToBool(d.DeleteMarker), aws.ToString(d.DeleteMarkerVersionId))
		}
	}

	// The expected listing: keys in order, newest first, the first latest.
	var all []verEntry
	sort.Strings(keys)
	for _, k := range keys {
		for i, e := range model[k] {
			e.Latest = i == 0
			all = append(all, e)
		}
	}
	if len(all) < count {
		t.Fatalf("the model holds %d versions, want at least %d", len(all), count)
	}
	// Pages (of 1,000 at full size) split keys' versions at varied places.
	for _, pageSize := range []int32{int32(min(1000, count/3))} {
		var pos int
		in := &s3.ListObjectVersionsInput{Bucket: aws.String(b), MaxKeys: aws.Int32(pageSize)}
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatal("ListObjectVersions does not end")
			}
			page, err := cl.ListObjectVersions(ctx, in)
			if err != nil {
				t.Fatalf("ListObjectVersions: %v", err)
			}
			n := len(page.Versions) + len(page.DeleteMarkers)
			if pos+n > len(all) {
				t.Fatalf("page at %d lists %d entries, beyond the %d expected", pos, n, len(all))
			}
			var wv, wm, gv, gm []verEntry
			for _, e := range all[pos : pos+n] {
				if e.Marker {
					wm = append(wm, e)
				} else {
					wv = append(wv, e)
				}
			}
			for _, v := range page.Versions {
				gv = append(gv, verEntry{Key: aws.ToString(v.Key), ID: aws.ToString(v.VersionId), ETag: aws.ToString(v.ETag), Latest: aws.ToBool(v.IsLatest)})
			}
			for _, m := range page.DeleteMarkers {
				gm = append(gm, verEntry{Key: aws.ToString(m.Key), ID: aws.ToString(m.VersionId), Marker: true, Latest: aws.ToBool(m.IsLatest)})
			}
			if fmt.Sprint(gv) != fmt.Sprint(wv) || fmt.Sprint(gm) != fmt.Sprint(wm) {
				t.Fatalf("max-keys %d, page at %d differs from the model:\nversions %v\nwant     %v\nmarkers %v\nwant    %v", pageSize, pos, gv, wv, gm, wm)
			}
			pos += n
			if !aws.ToBool(page.IsTruncated) {
				break
			}
			if n != int(pageSize) {
				t.Fatalf("truncated page of %d entries, max-keys %d", n, pageSize)
			}
			last := all[pos-1]
			if aws.ToString(page.NextKeyMarker) != last.Key || aws.ToString(page.NextVersionIdMarker) != last.ID {
				t.Fatalf("next markers %q %q, want %q %q", aws.ToString(page.NextKeyMarker), aws.ToString(page.NextVersionIdMarker), last.Key, last.ID)
			}
			in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
		}
		if pos != len(all) {
			t.Fatalf("max-keys %d listed %d entries, want %d", pageSize, pos, len(all))
		}
	}
	// A key marker alone resumes after every version of that key; the
	// delimiter folds every key into one prefix.
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(b), KeyMarker: aws.String(keys[nkeys-2])}
	vs, ms := listAllVersions(t, cl, in)
	if len(vs)+len(ms) != len(model[keys[nkeys-1]]) {
		t.Fatalf("after key-marker %s: %d entries, want the %d of %s", keys[nkeys-2], len(vs)+len(ms), len(model[keys[nkeys-1]]), keys[nkeys-1])
	}
	d, err := cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(b), Delimiter: aws.String("/")})
	if err != nil || len(d.CommonPrefixes) != 1 || aws.ToString(d.CommonPrefixes[0].Prefix) != "p/" || len(d.Versions)+len(d.DeleteMarkers) != 0 {
		t.Fatalf("delimiter /: %+v %v", d.CommonPrefixes, err)
	}
}

// versionCount is S3GATE_VERSION_COUNT (make test-versions), 300 by
// default: the default run stays within its time under -race.
func versionCount(t *testing.T) int {
	t.Helper()
	v := os.Getenv("S3GATE_VERSION_COUNT")
	if v == "" {
		return 300
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 {
		t.Fatalf("S3GATE_VERSION_COUNT=%q: want an integer of at least 100", v)
	}
	return n
}

// matches reports whether s contains a match of the regular expression re.
func matches(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

func b64MD5(b []byte) string { return base64.StdEncoding.EncodeToString(md5sum(b)) }

// verExactXML checks the bodies and headers of the versioning calls as S3
// sends them.
func verExactXML(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	b := mustBucket(t, cl, "verxml")
	t.Cleanup(func() { deleteAllVersions(t, cl, b) })
	const ns = `xmlns="http://s3.amazonaws.com/doc/2006-03-01/"`
	q := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	putCfg := func(body string) (int, []byte) {
		st, _, out := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + b, Query: q("versioning", ""), Body: []byte(body),
			Header: http.Header{"Content-Md5": {b64MD5([]byte(body))}}})
		return st, out
	}
	st, _, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + b, Query: q("versioning", "")})
	if st != 200 || !strings.Contains(string(body), `<VersioningConfiguration `+ns+`></VersioningConfiguration>`) {
		t.Fatalf("GetBucketVersioning, never versioned: %d %s", st, body)
	}
	// A PUT in a bucket that never had versioning: no version header.
	st, h, _ := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + b + "/plain", Body: []byte("x")})
	if st != 200 || h.Values("x-amz-version-id") != nil {
		t.Fatalf("PUT, never versioned: %d x-amz-version-id %q", st, h.Values("x-amz-version-id"))
	}
	for _, tt := range []struct {
		body   string
		status int
		code   string
	}{
		{`<VersioningConfiguration ` + ns + `><Status>Enabled</Status><MfaDelete>Enabled</MfaDelete></VersioningConfiguration>`, 403, "AccessDenied"},
		{`<VersioningConfiguration ` + ns + `><Status>enabled</Status></VersioningConfiguration>`, 400, "MalformedXML"},
		{`<VersioningConfiguration ` + ns + `><Status>Enabled</Status>`, 400, "MalformedXML"},
	} {
		st, out := putCfg(tt.body)
		wantRawError(t, "PutBucketVersioning "+tt.body, st, out, tt.status, tt.code)
	}
	if st, _, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + b, Query: q("versioning", "")}); !strings.Contains(string(body), `<VersioningConfiguration `+ns+`></VersioningConfiguration>`) {
		t.Fatalf("a refused PutBucketVersioning changed the state: %d %s", st, body)
	}
	if st, out := putCfg(`<VersioningConfiguration ` + ns + `><Status>Enabled</Status></VersioningConfiguration>`); st != 200 || len(out) != 0 {
		t.Fatalf("PutBucketVersioning: %d %s", st, out)
	}
	st, _, body = doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + b, Query: q("versioning", "")})
	if want := `<VersioningConfiguration ` + ns + `><Status>Enabled</Status></VersioningConfiguration>`; st != 200 || !strings.Contains(string(body), want) {
		t.Fatalf("GetBucketVersioning: %d %s, want %s", st, body, want)
	}

	// PUT, DELETE (a marker), PUT again: headers, then the listing's XML
	// with Version and DeleteMarker interleaved in listing order.
	_, h, _ = doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + b + "/a", Body: []byte("1")})
	v1 := h.Get("x-amz-version-id")
	st, h, _ = doRaw(t, gw, rawReq{Method: http.MethodDelete, Path: "/" + b + "/a"})
	m := h.Get("x-amz-version-id")
	if st != 204 || h.Get("x-amz-delete-marker") != "true" || len(m) != 32 || len(v1) != 32 {
		t.Fatalf("DELETE: %d %v (version %q)", st, h, v1)
	}
	_, h, _ = doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + b + "/b", Body: []byte("2")})
	v2 := h.Get("x-amz-version-id")
	st, _, body = doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + b, Query: q("versions", "", "prefix", "a")})
	for _, want := range []string{
		`<ListVersionsResult ` + ns + `><Name>` + b + `</Name><Prefix>a</Prefix><KeyMarker></KeyMarker><VersionIdMarker></VersionIdMarker><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>` +
			`<DeleteMarker><Key>a</Key><VersionId>` + m + `</VersionId><IsLatest>true</IsLatest><LastModified>`,
		`</DeleteMarker><Version><Key>a</Key><VersionId>` + v1 + `</VersionId><IsLatest>false</IsLatest><LastModified>`,
		`<ETag>&#34;c4ca4238a0b923820dcc509a6f75849b&#34;</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass><Owner>`,
	} {
		if st != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("ListObjectVersions: %d %s\nwant %s", st, body, want)
		}
	}
	// GET of the marker by id: 405 with the marker's headers and S3's body.
	st, h, body = doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + b + "/a", Query: q("versionId", m)})
	if st != 405 || h.Get("x-amz-delete-marker") != "true" || h.Get("x-amz-version-id") != m || h.Get("Allow") != "DELETE" || h.Get("Last-Modified") == "" ||
		errorCode(body) != "MethodNotAllowed" || !strings.Contains(string(body), "<Method>GET</Method><ResourceType>DeleteMarker</ResourceType>") {
		t.Fatalf("GET of a marker by id: %d %v %s", st, h, body)
	}
	st, h, body = doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + b + "/a"})
	if st != 404 || errorCode(body) != "NoSuchKey" || h.Get("x-amz-delete-marker") != "true" || h.Get("x-amz-version-id") != m {
		t.Fatalf("GET of a deleted key: %d %v %s", st, h, body)
	}
	st, _, body = doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + b + "/a", Query: q("versionId", "")})
	if st != 400 || !strings.Contains(string(body), "<Message>Version id cannot be the empty string</Message>") {
		t.Fatalf("GET with an empty versionId: %d %s", st, body)
	}
	// DeleteObjects: a marker created, an object version removed.
	del := `<Delete><Object><Key>b</Key></Object><Object><Key>a</Key><VersionId>` + v1 + `</VersionId></Object></Delete>`
	st, _, body = doRaw(t, gw, rawReq{Method: http.MethodPost, Path: "/" + b, Query: q("delete", ""), Body: []byte(del), Header: http.Header{"Content-Md5": {b64MD5([]byte(del))}}})
	re := `<DeleteResult ` + ns + `><Deleted><Key>b</Key><DeleteMarker>true</DeleteMarker><DeleteMarkerVersionId>[A-Za-z0-9_-]{32}</DeleteMarkerVersionId></Deleted>` +
		`<Deleted><Key>a</Key><VersionId>` + v1 + `</VersionId></Deleted></DeleteResult>`
	if st != 200 || !matches(re, string(body)) {
		t.Fatalf("DeleteObjects: %d %s\nwant %s", st, body, re)
	}
	// Tagging by version answers its version id.
	tag := `<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag></TagSet></Tagging>`
	st, h, body = doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + b + "/b", Query: q("tagging", "", "versionId", v2), Body: []byte(tag), Header: http.Header{"Content-Md5": {b64MD5([]byte(tag))}}})
	if st != 200 || h.Get("x-amz-version-id") != v2 {
		t.Fatalf("PutObjectTagging by version: %d %v %s", st, h, body)
	}
}

// verMinio: minio-go's ListObjects with versions sees what the SDK sees,
// in S3's order (it keeps the XML's interleaving of versions and markers).
func verMinio(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	b := versionedBucket(t, cl, "vermc")
	var want []verEntry
	for _, k := range []string{"x", "y"} {
		v1 := putVersion(t, cl, b, k, []byte(k+"1"))
		del, err := cl.DeleteObject(testCtx(t, time.Minute), &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String(k)})
		if err != nil {
			t.Fatalf("DeleteObject: %v", err)
		}
		v2 := putVersion(t, cl, b, k, []byte(k+"2"))
		want = append(want, verEntry{Key: k, ID: v2, Latest: true}, verEntry{Key: k, ID: aws.ToString(del.VersionId), Marker: true}, verEntry{Key: k, ID: v1})
	}
	mc := minioClient(t, gw)
	var got []verEntry
	for o := range mc.ListObjects(testCtx(t, time.Minute), b, minio.ListObjectsOptions{WithVersions: true, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("minio ListObjects WithVersions: %v", o.Err)
		}
		got = append(got, verEntry{Key: o.Key, ID: o.VersionID, Marker: o.IsDeleteMarker, Latest: o.IsLatest})
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("minio-go listing %v, want %v", got, want)
	}
	obj, err := mc.GetObject(testCtx(t, time.Minute), b, "x", minio.GetObjectOptions{VersionID: want[2].ID})
	if err != nil {
		t.Fatalf("minio GetObject by version: %v", err)
	}
	defer obj.Close()
	if data, err := io.ReadAll(obj); err != nil || string(data) != "x1" {
		t.Fatalf("minio GetObject by version: %q %v", data, err)
	}
}

// verCLI: the aws cli's versioning commands (put-bucket-versioning,
// put-object answering version ids, list-object-versions, get-object
// --version-id).
func verCLI(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	if _, err := exec.LookPath("aws"); err != nil {
		testreq.Missing(t, "aws cli not on PATH: skipping the aws cli versioning test (install the Debian package \"awscli\")")
	}
	cli := newAWSCLI(t, gw)
	b := mustBucket(t, cl, "vercli")
	t.Cleanup(func() { deleteAllVersions(t, cl, b) })
	// Each aws call costs a Python start: five calls cover the commands.
	cli.run(t, "s3api", "put-bucket-versioning", "--bucket", b, "--versioning-configuration", "Status=Enabled")
	if v, err := cl.GetBucketVersioning(testCtx(t, time.Minute), &s3.GetBucketVersioningInput{Bucket: aws.String(b)}); err != nil || v.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("after put-bucket-versioning: %q %v", v.Status, err)
	}
	dir := t.TempDir()
	var ids []string
	for i, content := range []string{"first", "second"} {
		f := filepath.Join(dir, fmt.Sprint(i))
		writeFile(t, f, content)
		var put struct{ VersionId string }
		if err := json.Unmarshal([]byte(cli.run(t, "s3api", "put-object", "--bucket", b, "--key", "k", "--body", f)), &put); err != nil || len(put.VersionId) != 32 {
			t.Fatalf("put-object: %+v %v", put, err)
		}
		ids = append(ids, put.VersionId)
	}
	var list struct {
		Versions []struct {
			VersionId string
			IsLatest  bool
		}
	}
	if err := json.Unmarshal([]byte(cli.run(t, "s3api", "list-object-versions", "--bucket", b)), &list); err != nil ||
		len(list.Versions) != 2 || list.Versions[0].VersionId != ids[1] || !list.Versions[0].IsLatest || list.Versions[1].VersionId != ids[0] {
		t.Fatalf("list-object-versions: %+v %v, want %v newest first", list, err, ids)
	}
	out := filepath.Join(dir, "out")
	cli.run(t, "s3api", "get-object", "--bucket", b, "--key", "k", "--version-id", ids[0], out)
	if data, err := os.ReadFile(out); err != nil || string(data) != "first" {
		t.Fatalf("get-object --version-id: %q %v", data, err)
	}
}
