package conformance

import (
	"crypto/md5"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/s3gate/s3gate/internal/testgw"
)

// What s3gate does not do is refused, not accepted and ignored (issue 15,
// item 7); TestExactAPI runs these. Server-side encryption answers
// NotImplemented naming the header on every operation that carries it;
// storage classes other than STANDARD and REDUCED_REDUNDANCY are
// InvalidStorageClass; REDUCED_REDUNDANCY is stored and returned by GET,
// HEAD, the listings and the multipart listings (the listings read it in
// each dialect's SQL, so that one runs on both metadata engines).

// wantRefusal fails unless err is code with a message naming header.
func wantRefusal(t *testing.T, err error, code, header string) {
	t.Helper()
	wantAPIError(t, err, code)
	var ae smithy.APIError
	if !errors.As(err, &ae) || !strings.Contains(ae.ErrorMessage(), header) {
		t.Fatalf("message %q does not name %s", ae.ErrorMessage(), header)
	}
}

func noopEncryption(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	bucket := mustBucket(t, cl, "sse")
	putString(t, cl, bucket, "src", "source")
	key := strings.Repeat("k", 32)
	sum := md5.Sum([]byte(key))
	custKey, custMD5 := base64.StdEncoding.EncodeToString([]byte(key)), base64.StdEncoding.EncodeToString(sum[:])
	put := func(mod func(*s3.PutObjectInput)) error {
		in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("x")}
		mod(in)
		_, err := cl.PutObject(ctx, in)
		return err
	}
	copyTo := func(mod func(*s3.CopyObjectInput)) error {
		in := &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), CopySource: aws.String(bucket + "/src")}
		mod(in)
		_, err := cl.CopyObject(ctx, in)
		return err
	}
	upload := createUpload(t, cl, bucket, "mp")
	for _, tc := range []struct {
		name, header string
		call         func() error
	}{
		{"PutObject AES256", "x-amz-server-side-encryption", func() error {
			return put(func(in *s3.PutObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 })
		}},
		{"PutObject aws:kms", "x-amz-server-side-encryption", func() error {
			return put(func(in *s3.PutObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAwsKms })
		}},
		{"PutObject KMS key id", "x-amz-server-side-encryption-aws-kms-key-id", func() error {
			return put(func(in *s3.PutObjectInput) { in.SSEKMSKeyId = aws.String("alias/backups") })
		}},
		{"PutObject bucket key", "x-amz-server-side-encryption-bucket-key-enabled", func() error {
			return put(func(in *s3.PutObjectInput) { in.BucketKeyEnabled = aws.Bool(true) })
		}},
		{"PutObject SSE-C", "x-amz-server-side-encryption-customer-", func() error {
			return put(func(in *s3.PutObjectInput) {
				in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(custKey), aws.String(custMD5)
			})
		}},
		{"CreateMultipartUpload aws:kms", "x-amz-server-side-encryption", func() error {
			_, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k"),
				ServerSideEncryption: types.ServerSideEncryptionAwsKms, SSEKMSKeyId: aws.String("alias/backups")})
			return err
		}},
		{"CreateMultipartUpload SSE-C", "x-amz-server-side-encryption-customer-", func() error {
			_, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k"),
				SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(custKey), SSECustomerKeyMD5: aws.String(custMD5)})
			return err
		}},
		{"CopyObject AES256", "x-amz-server-side-encryption", func() error {
			return copyTo(func(in *s3.CopyObjectInput) { in.ServerSideEncryption = types.ServerSideEncryptionAes256 })
		}},
		{"CopyObject SSE-C destination", "x-amz-server-side-encryption-customer-", func() error {
			return copyTo(func(in *s3.CopyObjectInput) {
				in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(custKey), aws.String(custMD5)
			})
		}},
		{"CopyObject SSE-C source", "x-amz-copy-source-server-side-encryption-customer-", func() error {
			return copyTo(func(in *s3.CopyObjectInput) {
				in.CopySourceSSECustomerAlgorithm, in.CopySourceSSECustomerKey, in.CopySourceSSECustomerKeyMD5 = aws.String("AES256"), aws.String(custKey), aws.String(custMD5)
			})
		}},
		{"UploadPart SSE-C", "x-amz-server-side-encryption-customer-", func() error {
			_, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: aws.String(upload),
				PartNumber: aws.Int32(1), Body: strings.NewReader("part"),
				SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(custKey), SSECustomerKeyMD5: aws.String(custMD5)})
			return err
		}},
		{"UploadPartCopy SSE-C source", "x-amz-copy-source-server-side-encryption-customer-", func() error {
			_, err := cl.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: aws.String(upload),
				PartNumber: aws.Int32(1), CopySource: aws.String(bucket + "/src"),
				CopySourceSSECustomerAlgorithm: aws.String("AES256"), CopySourceSSECustomerKey: aws.String(custKey), CopySourceSSECustomerKeyMD5: aws.String(custMD5)})
			return err
		}},
		{"GetObject SSE-C", "x-amz-server-side-encryption-customer-", func() error {
			_, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("src"),
				SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(custKey), SSECustomerKeyMD5: aws.String(custMD5)})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			wantRefusal(t, err, "NotImplemented", tc.header)
			if s := httpStatus(err); s != http.StatusNotImplemented {
				t.Fatalf("status %d, want 501", s)
			}
			objectAbsent(t, cl, bucket, "k")
		})
	}
	parts, err := cl.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: aws.String(upload)})
	if err != nil || len(parts.Parts) != 0 {
		t.Fatalf("a refused UploadPart left a part: %+v, %v", parts, err)
	}
	// HEAD carries no error body: the status says it.
	_, err = cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("src"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(custKey), SSECustomerKeyMD5: aws.String(custMD5)})
	wantStatus(t, err, http.StatusNotImplemented)
	// A method AWS does not know either is InvalidArgument, as on AWS.
	wantAPIError(t, put(func(in *s3.PutObjectInput) { in.ServerSideEncryption = "rot13" }), "InvalidArgument")
	objectAbsent(t, cl, bucket, "k")
	// An empty header asks for nothing and is accepted.
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/k", Body: []byte("x"),
		Header: http.Header{"X-Amz-Server-Side-Encryption": {""}}})
	if status != http.StatusOK {
		t.Fatalf("PUT with an empty x-amz-server-side-encryption: HTTP %d %s", status, body)
	}
}

func noopStorageClassRefused(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	bucket := mustBucket(t, cl, "scr")
	putString(t, cl, bucket, "src", "source")
	for _, sc := range []types.StorageClass{types.StorageClassGlacier, types.StorageClassDeepArchive, types.StorageClassStandardIa, "FANCY"} {
		for _, tc := range []struct {
			name string
			call func() error
		}{
			{"PutObject", func() error {
				_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("x"), StorageClass: sc})
				return err
			}},
			{"CreateMultipartUpload", func() error {
				_, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k"), StorageClass: sc})
				return err
			}},
			{"CopyObject", func() error {
				_, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), CopySource: aws.String(bucket + "/src"), StorageClass: sc})
				return err
			}},
			{"CopyObject onto itself", func() error {
				_, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("src"), CopySource: aws.String(bucket + "/src"), StorageClass: sc})
				return err
			}},
		} {
			t.Run(tc.name+" "+string(sc), func(t *testing.T) {
				err := tc.call()
				wantAPIError(t, err, "InvalidStorageClass")
				if sc != "FANCY" {
					wantRefusal(t, err, "InvalidStorageClass", string(sc))
				}
				objectAbsent(t, cl, bucket, "k")
			})
		}
	}
	ups, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil || len(ups.Uploads) != 0 {
		t.Fatalf("a refused CreateMultipartUpload left an upload: %+v, %v", ups.Uploads, err)
	}
	if h, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("src")}); err != nil || h.StorageClass != "" {
		t.Fatalf("a refused copy onto itself changed the source: %q, %v", h.StorageClass, err)
	}
}

func noopStorageClassKept(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	bucket := mustBucket(t, cl, "sck")
	rr := types.StorageClassReducedRedundancy
	for key, sc := range map[string]types.StorageClass{"rr": rr, "std": types.StorageClassStandard, "none": ""} {
		if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(key), StorageClass: sc}); err != nil {
			t.Fatalf("PutObject %s %q: %v", key, sc, err)
		}
	}
	// A copy takes its class from the request, whatever the directive.
	if _, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("copy-std"), CopySource: aws.String(bucket + "/rr")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("copy-rr"), CopySource: aws.String(bucket + "/std"),
		StorageClass: rr, MetadataDirective: types.MetadataDirectiveReplace}); err != nil {
		t.Fatal(err)
	}
	// Onto itself: changing the class is a change; keeping it is not.
	if _, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("none"), CopySource: aws.String(bucket + "/none"), StorageClass: rr}); err != nil {
		t.Fatalf("copy onto itself to REDUCED_REDUNDANCY: %v", err)
	}
	_, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("std"), CopySource: aws.String(bucket + "/std"), StorageClass: types.StorageClassStandard})
	wantAPIError(t, err, "InvalidRequest")
	id := createUploadClass(t, cl, bucket, "mp", rr)
	ups, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil || len(ups.Uploads) != 1 || ups.Uploads[0].StorageClass != rr {
		t.Fatalf("ListMultipartUploads: %+v, %v", ups.Uploads, err)
	}
	parts := []types.CompletedPart{uploadPart(t, cl, bucket, "mp", id, 1, []byte("part"))}
	lp, err := cl.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: aws.String(id)})
	if err != nil || lp.StorageClass != rr {
		t.Fatalf("ListParts storage class %q, %v", lp.StorageClass, err)
	}
	if _, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}

	want := map[string]types.StorageClass{"rr": rr, "std": "", "none": rr, "copy-std": "", "copy-rr": rr, "mp": rr}
	for key, sc := range want {
		h, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil || h.StorageClass != sc {
			t.Errorf("HEAD %s: storage class %q, %v; want %q", key, h.StorageClass, err, sc)
		}
		g, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil || g.StorageClass != types.StorageClass(sc) {
			t.Errorf("GET %s: storage class %q, %v; want %q", key, g.StorageClass, err, sc)
		}
		if err == nil {
			g.Body.Close()
		}
		a, err := cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(bucket), Key: aws.String(key),
			ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesStorageClass}})
		if err != nil || a.StorageClass != listed(sc) {
			t.Errorf("GetObjectAttributes %s: %q, %v; want %q", key, a.StorageClass, err, listed(sc))
		}
	}
	// S3 omits the header for STANDARD.
	status, h, _ := doRaw(t, gw, rawReq{Method: http.MethodHead, Path: "/" + bucket + "/std"})
	if _, ok := h["X-Amz-Storage-Class"]; status != http.StatusOK || ok {
		t.Errorf("HEAD std: %d, x-amz-storage-class %q; want none", status, h.Get("X-Amz-Storage-Class"))
	}
	v2, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	v1, err := cl.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	vers, err := cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(v2.Contents) != len(want) || len(v1.Contents) != len(want) || len(vers.Versions) != len(want) {
		t.Fatalf("listed %d, %d, %d objects; want %d", len(v2.Contents), len(v1.Contents), len(vers.Versions), len(want))
	}
	for i, o := range v2.Contents {
		k := aws.ToString(o.Key)
		if o.StorageClass != types.ObjectStorageClass(listed(want[k])) || v1.Contents[i].StorageClass != o.StorageClass ||
			vers.Versions[i].StorageClass != types.ObjectVersionStorageClass(listed(want[k])) {
			t.Errorf("list %s: V2 %q, V1 %q, versions %q; want %q", k, o.StorageClass, v1.Contents[i].StorageClass, vers.Versions[i].StorageClass, listed(want[k]))
		}
	}
}

// listed is the class listings and attributes show: STANDARD for none.
func listed(sc types.StorageClass) types.StorageClass {
	if sc == "" {
		return types.StorageClassStandard
	}
	return sc
}

func createUploadClass(t *testing.T, cl *s3.Client, bucket, key string, sc types.StorageClass) string {
	t.Helper()
	out, err := cl.CreateMultipartUpload(testCtx(t, time.Minute), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), StorageClass: sc})
	if err != nil {
		t.Fatalf("CreateMultipartUpload %s: %v", key, err)
	}
	return aws.ToString(out.UploadId)
}

// noopOtherHeaders covers the other requests s3gate used to accept and
// ignore: an append (x-amz-write-offset-bytes) and conditional deletes.
func noopOtherHeaders(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	bucket := mustBucket(t, cl, "oth")
	putString(t, cl, bucket, "keep", "kept")
	_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("keep"), Body: strings.NewReader("more"), WriteOffsetBytes: aws.Int64(4)})
	wantRefusal(t, err, "NotImplemented", "x-amz-write-offset-bytes")
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("keep")})
	if err != nil || aws.ToInt64(head.ContentLength) != 4 {
		t.Fatalf("a refused append changed the object: %+v, %v", head, err)
	}
	for _, tc := range []struct {
		name string
		in   *s3.DeleteObjectInput
	}{
		// If-Match is honoured (TestConditionalDelete); the directory
		// buckets' conditions are refused.
		{"last modified", &s3.DeleteObjectInput{IfMatchLastModifiedTime: head.LastModified}},
		{"size", &s3.DeleteObjectInput{IfMatchSize: aws.Int64(4)}},
	} {
		t.Run("DeleteObject "+tc.name, func(t *testing.T) {
			tc.in.Bucket, tc.in.Key = aws.String(bucket), aws.String("keep")
			_, err := cl.DeleteObject(ctx, tc.in)
			wantRefusal(t, err, "NotImplemented", "x-amz-if-match")
			if _, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("keep")}); err != nil {
				t.Fatalf("a refused conditional delete removed the object: %v", err)
			}
		})
	}
	putString(t, cl, bucket, "plain", "x")
	out, err := cl.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("keep"), Size: aws.Int64(4)}, {Key: aws.String("plain")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "keep" || aws.ToString(out.Errors[0].Code) != "NotImplemented" ||
		len(out.Deleted) != 1 || aws.ToString(out.Deleted[0].Key) != "plain" {
		t.Fatalf("DeleteObjects with a Size: deleted %+v, errors %+v", out.Deleted, out.Errors)
	}
	if _, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("keep")}); err != nil {
		t.Fatalf("a refused conditional delete in DeleteObjects removed the object: %v", err)
	}
	objectAbsent(t, cl, bucket, "plain")
}
