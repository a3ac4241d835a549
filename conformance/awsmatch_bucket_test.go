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
	cells := []combo{{Engine: testgw.Embedded, Transport: "http"}, {Engine: config.EnginePGChunks, Transport: "http"}}
	if testgw.External() {
		cells = combos()
	}
	runCells(t, cells, func(t *testing.T, c combo, gw *testgw.Gateway) {
		cl := sdkClient(t, gw)
		t.Run("ZeroMaxParts", func(t *testing.T) { amZeroMaxParts(t, cl) })
		t.Run("ZeroMaxUploads", func(t *testing.T) { amZeroMaxUploads(t, cl) })
		if c.Engine == config.EnginePGChunks {
			return
		}
		t.Run("LocationConstraintUSEast1", func(t *testing.T) { amLocationUSEast1(t, gw, cl) })
		t.Run("ReservedBucketNames", func(t *testing.T) { amReservedNames(t, gw) })
		t.Run("UnconfiguredSubresources", func(t *testing.T) { amUnconfigured(t, gw, cl) })
		if !testgw.External() {
			t.Run("UnconfiguredAuthorization", func(t *testing.T) { amUnconfiguredAuthz(t, gw, cl) })
		}
	})
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

// amUnconfigured: the configurations s3gate does not keep read as AWS's
// answers for a bucket where none was set, through the SDK's own parsers;
// a missing bucket is NoSuchBucket; their PUTs stay NotImplemented and
// GetBucketEncryption stays 404 (nothing is encrypted at rest).
func amUnconfigured(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := mustBucket(t, cl, "unconf")
	in := aws.String(b)

	lg, err := cl.GetBucketLogging(ctx, &s3.GetBucketLoggingInput{Bucket: in})
	if err != nil || lg.LoggingEnabled != nil {
		t.Fatalf("GetBucketLogging: %v %+v", err, lg)
	}
	ac, err := cl.GetBucketAccelerateConfiguration(ctx, &s3.GetBucketAccelerateConfigurationInput{Bucket: in})
	if err != nil || ac.Status != "" {
		t.Fatalf("GetBucketAccelerateConfiguration: %v status %q", err, ac.Status)
	}
	rp, err := cl.GetBucketRequestPayment(ctx, &s3.GetBucketRequestPaymentInput{Bucket: in})
	if err != nil || rp.Payer != types.PayerBucketOwner {
		t.Fatalf("GetBucketRequestPayment: %v payer %q", err, rp.Payer)
	}
	nc, err := cl.GetBucketNotificationConfiguration(ctx, &s3.GetBucketNotificationConfigurationInput{Bucket: in})
	if err != nil || len(nc.TopicConfigurations)+len(nc.QueueConfigurations)+len(nc.LambdaFunctionConfigurations) != 0 || nc.EventBridgeConfiguration != nil {
		t.Fatalf("GetBucketNotificationConfiguration: %v %+v", err, nc)
	}
	// The four lists of configurations by id: empty, not truncated.
	if o, err := cl.ListBucketAnalyticsConfigurations(ctx, &s3.ListBucketAnalyticsConfigurationsInput{Bucket: in}); err != nil || len(o.AnalyticsConfigurationList) != 0 || aws.ToBool(o.IsTruncated) {
		t.Fatalf("ListBucketAnalyticsConfigurations: %v", err)
	}
	if o, err := cl.ListBucketMetricsConfigurations(ctx, &s3.ListBucketMetricsConfigurationsInput{Bucket: in}); err != nil || len(o.MetricsConfigurationList) != 0 || aws.ToBool(o.IsTruncated) {
		t.Fatalf("ListBucketMetricsConfigurations: %v", err)
	}
	if o, err := cl.ListBucketInventoryConfigurations(ctx, &s3.ListBucketInventoryConfigurationsInput{Bucket: in}); err != nil || len(o.InventoryConfigurationList) != 0 || aws.ToBool(o.IsTruncated) {
		t.Fatalf("ListBucketInventoryConfigurations: %v", err)
	}
	if o, err := cl.ListBucketIntelligentTieringConfigurations(ctx, &s3.ListBucketIntelligentTieringConfigurationsInput{Bucket: in}); err != nil || len(o.IntelligentTieringConfigurationList) != 0 || aws.ToBool(o.IsTruncated) {
		t.Fatalf("ListBucketIntelligentTieringConfigurations: %v", err)
	}
	_, err = cl.GetBucketAnalyticsConfiguration(ctx, &s3.GetBucketAnalyticsConfigurationInput{Bucket: in, Id: aws.String("a")})
	wantAPIError(t, err, "NoSuchConfiguration")
	_, err = cl.GetBucketMetricsConfiguration(ctx, &s3.GetBucketMetricsConfigurationInput{Bucket: in, Id: aws.String("a")})
	wantAPIError(t, err, "NoSuchConfiguration")
	_, err = cl.GetBucketInventoryConfiguration(ctx, &s3.GetBucketInventoryConfigurationInput{Bucket: in, Id: aws.String("a")})
	wantAPIError(t, err, "NoSuchConfiguration")
	_, err = cl.GetBucketIntelligentTieringConfiguration(ctx, &s3.GetBucketIntelligentTieringConfigurationInput{Bucket: in, Id: aws.String("a")})
	wantAPIError(t, err, "NoSuchConfiguration")
	if _, err := cl.DeleteBucketWebsite(ctx, &s3.DeleteBucketWebsiteInput{Bucket: in}); err != nil {
		t.Fatalf("DeleteBucketWebsite: %v", err)
	}
	if _, err := cl.DeleteBucketReplication(ctx, &s3.DeleteBucketReplicationInput{Bucket: in}); err != nil {
		t.Fatalf("DeleteBucketReplication: %v", err)
	}
	if _, err := cl.DeleteBucketEncryption(ctx, &s3.DeleteBucketEncryptionInput{Bucket: in}); err != nil {
		t.Fatalf("DeleteBucketEncryption: %v", err)
	}
	// The raw answers: status and the documents' exact roots.
	for _, tc := range []struct{ query, status, body string }{
		{"logging", "200", `<BucketLoggingStatus xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></BucketLoggingStatus>`},
		{"accelerate", "200", `<AccelerateConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></AccelerateConfiguration>`},
		{"requestPayment", "200", `<Payer>BucketOwner</Payer>`},
		{"notification", "200", `<NotificationConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></NotificationConfiguration>`},
		{"analytics", "200", `<ListBucketAnalyticsConfigurationResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>false</IsTruncated>`},
		{"metrics", "200", `<ListMetricsConfigurationsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>false</IsTruncated>`},
		{"inventory", "200", `<ListInventoryConfigurationsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>false</IsTruncated>`},
		{"intelligent-tiering", "200", `<ListBucketIntelligentTieringConfigurationsOutput xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>false</IsTruncated>`},
	} {
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + b, Query: map[string][]string{tc.query: {""}}})
		if fmt.Sprint(status) != tc.status || !strings.Contains(string(body), tc.body) {
			t.Fatalf("GET ?%s: HTTP %d %.300s, want %s with %s", tc.query, status, body, tc.status, tc.body)
		}
	}

	// Nothing configured is accepted and ignored.
	_, err = cl.PutBucketLogging(ctx, &s3.PutBucketLoggingInput{Bucket: in, BucketLoggingStatus: &types.BucketLoggingStatus{}})
	wantAPIError(t, err, "NotImplemented")
	_, err = cl.PutBucketAccelerateConfiguration(ctx, &s3.PutBucketAccelerateConfigurationInput{Bucket: in,
		AccelerateConfiguration: &types.AccelerateConfiguration{Status: types.BucketAccelerateStatusEnabled}})
	wantAPIError(t, err, "NotImplemented")
	_, err = cl.PutBucketRequestPayment(ctx, &s3.PutBucketRequestPaymentInput{Bucket: in,
		RequestPaymentConfiguration: &types.RequestPaymentConfiguration{Payer: types.PayerRequester}})
	wantAPIError(t, err, "NotImplemented")
	_, err = cl.PutBucketNotificationConfiguration(ctx, &s3.PutBucketNotificationConfigurationInput{Bucket: in,
		NotificationConfiguration: &types.NotificationConfiguration{}})
	wantAPIError(t, err, "NotImplemented")
	_, err = cl.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: in})
	wantAPIError(t, err, "ServerSideEncryptionConfigurationNotFoundError")

	// A missing bucket is NoSuchBucket, on reads and deletes alike.
	gone := aws.String(bucketName("gone"))
	_, err = cl.GetBucketLogging(ctx, &s3.GetBucketLoggingInput{Bucket: gone})
	wantAPIError(t, err, "NoSuchBucket")
	_, err = cl.ListBucketMetricsConfigurations(ctx, &s3.ListBucketMetricsConfigurationsInput{Bucket: gone})
	wantAPIError(t, err, "NoSuchBucket")
	_, err = cl.GetBucketInventoryConfiguration(ctx, &s3.GetBucketInventoryConfigurationInput{Bucket: gone, Id: aws.String("a")})
	wantAPIError(t, err, "NoSuchBucket")
	_, err = cl.DeleteBucketReplication(ctx, &s3.DeleteBucketReplicationInput{Bucket: gone})
	wantAPIError(t, err, "NoSuchBucket")
}

// amUnconfiguredAuthz: the new answers are decided like every other
// operation, under AWS's action names: a key allowed s3:GetBucketLogging
// alone reads the logging status and nothing else here.
func amUnconfiguredAuthz(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := mustBucket(t, root, "unconfauthz")
	ak, sk := createKey(t, gw, "LOGREADER"+strings.ToUpper(b[len(b)-8:]), fmt.Sprintf(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:GetBucketLogging","Resource":"arn:aws:s3:::%s"}]}`, b))
	cl := sdkClientWithKeys(t, gw, ak, sk)
	in := aws.String(b)
	if _, err := cl.GetBucketLogging(ctx, &s3.GetBucketLoggingInput{Bucket: in}); err != nil {
		t.Fatalf("GetBucketLogging with s3:GetBucketLogging: %v", err)
	}
	_, err := cl.GetBucketRequestPayment(ctx, &s3.GetBucketRequestPaymentInput{Bucket: in})
	wantAPIError(t, err, "AccessDenied")
	_, err = cl.ListBucketAnalyticsConfigurations(ctx, &s3.ListBucketAnalyticsConfigurationsInput{Bucket: in})
	wantAPIError(t, err, "AccessDenied")
	_, err = cl.DeleteBucketWebsite(ctx, &s3.DeleteBucketWebsiteInput{Bucket: in})
	wantAPIError(t, err, "AccessDenied")
	// A bucket policy grants the list under s3:GetAnalyticsConfiguration.
	if err := putPolicy(t, root, b, fmt.Sprintf(`{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:user/%s"},"Action":"s3:GetAnalyticsConfiguration","Resource":"arn:aws:s3:::%s"}]}`, ak, b)); err != nil {
		t.Fatalf("PutBucketPolicy: %v", err)
	}
	if _, err := cl.ListBucketAnalyticsConfigurations(ctx, &s3.ListBucketAnalyticsConfigurationsInput{Bucket: in}); err != nil {
		t.Fatalf("ListBucketAnalyticsConfigurations granted by the bucket policy: %v", err)
	}
}
