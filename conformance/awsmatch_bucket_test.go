package conformance

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
)

// TestAWSMatchBucket holds bucket-level answers where s3gate once differed
// from Amazon S3, on a gateway of its own.
// Answers that touch the store also run on a PostgreSQL cell.
func TestAWSMatchBucket(t *testing.T) {
	cells := []string{testgw.Embedded, config.EnginePGChunks}
	if testgw.External() {
		cells = []string{"external"}
	}
	for _, eng := range cells {
		t.Run(eng, func(t *testing.T) {
			t.Parallel()
			gw := testgw.Start(t, testgw.Options{Engine: eng})
			cl := sdkClient(t, gw)
			t.Run("ZeroMaxParts", func(t *testing.T) { amZeroMaxParts(t, cl) })
			t.Run("ZeroMaxUploads", func(t *testing.T) { amZeroMaxUploads(t, cl) })
			if eng == config.EnginePGChunks {
				return
			}
			t.Run("LocationConstraintUSEast1", func(t *testing.T) { amLocationUSEast1(t, gw, cl) })
			t.Run("ReservedBucketNames", func(t *testing.T) { amReservedNames(t, gw) })
		})
	}
}

// amLocationUSEast1: AWS refuses an explicit us-east-1 constraint, also in
// us-east-1 (where a bucket takes no constraint at all).
func amLocationUSEast1(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	name := bucketName("loc")
	_, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name),
		CreateBucketConfiguration: &types.CreateBucketConfiguration{LocationConstraint: "us-east-1"}})
	wantAPIError(t, err, "InvalidLocationConstraint")
	wantStatus(t, headBucket(ctx, cl, name), http.StatusNotFound)
	if gw.Region != "us-east-1" {
		return
	}
	// Without a constraint, or with an empty one, us-east-1 creates it.
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name),
		CreateBucketConfiguration: &types.CreateBucketConfiguration{}}); err != nil {
		t.Fatalf("CreateBucket with an empty configuration: %v", err)
	}
	t.Cleanup(func() { emptyAndDelete(t, cl, name) })
}

func headBucket(ctx context.Context, cl *s3.Client, name string) error {
	_, err := cl.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)})
	return err
}

// amReservedNames: the general purpose bucket naming rules reserve the
// amzn-s3-demo- prefix and the --table-s3 suffix. Raw requests, so that no
// SDK rule about the name stands in the way.
func amReservedNames(t *testing.T, gw *testgw.Gateway) {
	suffix := strings.TrimPrefix(bucketName("x"), "s3gate-x-")
	for _, name := range []string{"amzn-s3-demo-" + suffix, "s3gate-" + suffix + "--table-s3"} {
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + name})
		wantRawError(t, "CreateBucket "+name, status, body, http.StatusBadRequest, "InvalidBucketName")
	}
}

// amZeroMaxParts: max-parts=0 is an empty, untruncated page that still names
// the upload, as max-keys=0 is for ListObjectsV2; a missing upload is still
// NoSuchUpload.
func amZeroMaxParts(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	bucket := mustBucket(t, cl, "zparts")
	key := "mp"
	up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	for n := int32(1); n <= 2; n++ {
		if _, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key),
			UploadId: up.UploadId, PartNumber: aws.Int32(n), Body: strings.NewReader(fmt.Sprint("part ", n))}); err != nil {
			t.Fatalf("UploadPart %d: %v", n, err)
		}
	}
	lp, err := cl.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: up.UploadId, MaxParts: aws.Int32(0)})
	if err != nil {
		t.Fatalf("ListParts max-parts=0: %v", err)
	}
	if len(lp.Parts) != 0 || aws.ToBool(lp.IsTruncated) || aws.ToInt32(lp.MaxParts) != 0 ||
		aws.ToString(lp.NextPartNumberMarker) != "" && aws.ToString(lp.NextPartNumberMarker) != "0" ||
		aws.ToString(lp.UploadId) != aws.ToString(up.UploadId) {
		t.Fatalf("ListParts max-parts=0: %d parts, truncated %v, max %d, next %q, upload %q",
			len(lp.Parts), aws.ToBool(lp.IsTruncated), aws.ToInt32(lp.MaxParts), aws.ToString(lp.NextPartNumberMarker), aws.ToString(lp.UploadId))
	}
	// The default page still has both.
	if all, err := cl.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId}); err != nil || len(all.Parts) != 2 {
		t.Fatalf("ListParts: %v", err)
	}
	if _, err := cl.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId}); err != nil {
		t.Fatalf("AbortMultipartUpload: %v", err)
	}
	_, err = cl.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: up.UploadId, MaxParts: aws.Int32(0)})
	wantAPIError(t, err, "NoSuchUpload")
}

// amZeroMaxUploads: max-uploads=0 is an empty, untruncated page without next
// markers; a missing bucket is still NoSuchBucket.
func amZeroMaxUploads(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	bucket := mustBucket(t, cl, "zuploads")
	for _, k := range []string{"a", "b"} {
		if _, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(k)}); err != nil {
			t.Fatalf("CreateMultipartUpload %s: %v", k, err)
		}
	}
	lu, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), MaxUploads: aws.Int32(0)})
	if err != nil {
		t.Fatalf("ListMultipartUploads max-uploads=0: %v", err)
	}
	if len(lu.Uploads) != 0 || aws.ToBool(lu.IsTruncated) || aws.ToInt32(lu.MaxUploads) != 0 ||
		aws.ToString(lu.NextKeyMarker) != "" || aws.ToString(lu.NextUploadIdMarker) != "" {
		t.Fatalf("ListMultipartUploads max-uploads=0: %d uploads, truncated %v, max %d, next %q/%q",
			len(lu.Uploads), aws.ToBool(lu.IsTruncated), aws.ToInt32(lu.MaxUploads), aws.ToString(lu.NextKeyMarker), aws.ToString(lu.NextUploadIdMarker))
	}
	if all, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)}); err != nil || len(all.Uploads) != 2 {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	_, err = cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucketName("gone")), MaxUploads: aws.Int32(0)})
	wantAPIError(t, err, "NoSuchBucket")
}
