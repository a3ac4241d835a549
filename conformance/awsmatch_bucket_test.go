package conformance

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/internal/testgw"
)

// TestAWSMatchBucket holds bucket-level answers where s3gate once differed
// from Amazon S3, on a gateway of its own.
func TestAWSMatchBucket(t *testing.T) {
	cells := []string{testgw.Embedded}
	if testgw.External() {
		cells = []string{"external"}
	}
	for _, eng := range cells {
		t.Run(eng, func(t *testing.T) {
			t.Parallel()
			gw := testgw.Start(t, testgw.Options{Engine: eng})
			cl := sdkClient(t, gw)
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
