package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/store"
)

// TestBucketInfoCommand: `admin bucket info` reports a bucket's versioning,
// Object Lock and lifecycle state and its counts, as text and JSON, on both
// metadata engines, beside the running gateway that made them; a missing
// bucket is one line and exit 1.
func TestBucketInfoCommand(t *testing.T) {
	for _, engine := range []string{testgw.Embedded, "pgchunks"} {
		t.Run(engine, func(t *testing.T) {
			gw := testgw.Start(t, testgw.Options{Engine: engine})
			env := []string{"S3GATE_DATABASE_URL=" + gw.DatabaseURL, "S3GATE_DATA_DIR=" + gw.DataDir}
			ctx := context.Background()
			c := s3.NewFromConfig(aws.Config{Region: gw.Region, HTTPClient: gw.HTTPClient,
				Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, "")},
				func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(gw.Endpoint), true })
			must := func(_ any, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("vault"), ObjectLockEnabledForBucket: aws.Bool(true)}))
			must(c.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String("vault"),
				ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
					Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(3)}}}}))
			must(c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String("vault"),
				LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{ID: aws.String("old"),
					Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
					NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(30)}}}}}))
			for _, body := range []string{"first", "second!"} {
				must(c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("vault"), Key: aws.String("k"), Body: strings.NewReader(body)}))
			}
			must(c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("vault"), Key: aws.String("gone"), Body: strings.NewReader("abc")}))
			must(c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("vault"), Key: aws.String("gone")}))
			must(c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("vault"), Key: aws.String("up")}))

			code, out, errOut := runAdmin(t, env, "bucket", "info", "vault", "-json")
			if code != 0 {
				t.Fatalf("bucket info -json: %d %s", code, errOut)
			}
			var got BucketInfo
			if err := json.NewDecoder(bytes.NewReader([]byte(out))).Decode(&got); err != nil {
				t.Fatalf("%v in %s", err, out)
			}
			wantUsage := store.BucketUsage{Bucket: "vault", Objects: 1, ObjectBytes: 7, NoncurrentVersions: 2, NoncurrentBytes: 8, DeleteMarkers: 1, Uploads: 1}
			if got.Name != "vault" || got.Versioning != store.VersioningEnabled || got.ObjectLock == nil || !got.ObjectLock.Enabled ||
				got.ObjectLock.Default == nil || got.ObjectLock.Default.Mode != "GOVERNANCE" || got.ObjectLock.Default.Days != 3 ||
				len(got.Lifecycle) != 1 || got.Lifecycle[0] != (LifecycleRule{ID: "old", Status: "Enabled"}) || got.Usage != wantUsage {
				t.Fatalf("bucket info %+v (lock %+v)", got, got.ObjectLock)
			}
			code, out, errOut = runAdmin(t, env, "bucket", "info", "vault")
			if code != 0 {
				t.Fatalf("bucket info: %d %s", code, errOut)
			}
			for _, line := range []string{"versioning           Enabled", "object lock          enabled, default retention GOVERNANCE 3 days",
				"lifecycle            1 rules: old (Enabled)", "objects              1 (7 bytes)", "noncurrent versions  2 (8 bytes)",
				"delete markers       1", "uploads in progress  1"} {
				if !strings.Contains(out, line+"\n") {
					t.Errorf("text output lacks %q:\n%s", line, out)
				}
			}
			code, _, errOut = runAdmin(t, env, "bucket", "info", "nope")
			if code != exitFail || !strings.Contains(errOut, "nope") || strings.Count(errOut, "\n") != 1 {
				t.Fatalf("bucket info of a missing bucket: %d %q", code, errOut)
			}
		})
	}
}
