package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/s3gate/s3gate/admin"
	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
)

const (
	cacheHits          = "s3gate_metadata_cache_hits_total"
	cacheInvalidations = "s3gate_metadata_cache_invalidations_total"
)

// adminRun runs `s3gate admin args...` on gw's database, as an operator
// beside the running gateway would.
func adminRun(t *testing.T, gw *testgw.Gateway, args ...string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "-database-url="+gw.DatabaseURL, "-data-dir", gw.DataDir,
		"-root-access-key", gw.AccessKey, "-root-secret-key", gw.SecretKey)
	if code := admin.Run(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("admin %v: exit %d: %s", args[:3], code, errOut.String())
	}
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// TestAdminKeyDeleteWhileCached: a key the gateway has cached (its reads
// are hits) and that `s3gate admin key delete` removes is refused by the
// next request: the command returns once the gateway has confirmed that it
// applied the delete's notification (its invalidation counter has moved);
// with S3GATE_METADATA_CACHE=false, at once.
func TestAdminKeyDeleteWhileCached(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cached bool
		rounds int
	}{{"cached", true, 3}, {"uncached", false, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			gw := testgw.Start(t, testgw.Options{Engine: config.EnginePGChunks,
				Env: []string{fmt.Sprintf("%sMETADATA_CACHE=%v", config.Prefix, tc.cached)}})
			ctx := context.Background()
			if _, err := sdkClient(gw).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("keys")}); err != nil {
				t.Fatal(err)
			}
			var took []time.Duration
			for i := range tc.rounds {
				id, secret := fmt.Sprintf("CACHEDKEY%d", i), "cached-key-secret-0123"
				adminRun(t, gw, "key", "create", "-access-key", id, "-secret", secret)
				kgw := *gw
				kgw.AccessKey, kgw.SecretKey = id, secret
				c := sdkClient(&kgw)
				hits := scrapeMetrics(t, gw.MetricsURL).v(cacheHits)
				for range 2 {
					if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("keys")}); err != nil {
						t.Fatalf("list with key %s: %v", id, err)
					}
				}
				after := scrapeMetrics(t, gw.MetricsURL)
				if got := after.v(cacheHits) > hits; got != tc.cached {
					t.Fatalf("reads served from the cache: %v, want %v", got, tc.cached)
				}
				invals := after.v(cacheInvalidations)
				start := time.Now()
				adminRun(t, gw, "key", "delete", id)
				took = append(took, time.Since(start))
				// The command waits for the running gateways to confirm.
				if got := scrapeMetrics(t, gw.MetricsURL).v(cacheInvalidations); tc.cached && got <= invals {
					t.Fatalf("admin key delete returned before the gateway dropped the key (invalidations %v, before %v)", got, invals)
				}
				_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("keys")})
				if code := apiCode(err); code != "InvalidAccessKeyId" {
					t.Fatalf("request with key %s after its delete: %v (code %q), want InvalidAccessKeyId", id, err, code)
				}
			}
			slices.Sort(took)
			t.Logf("admin key delete (its confirmation included): min %v max %v", took[0], took[len(took)-1])
		})
	}
}

// TestBucketPolicyReadsOwnWrite: the gateway that stores a bucket policy
// applies it to the next request, without waiting for its notification
// (its own write drops the entry): an anonymous GET allowed, then denied.
func TestBucketPolicyReadsOwnWrite(t *testing.T) {
	gw := testgw.Start(t, testgw.Options{Engine: config.EnginePGChunks, Env: []string{config.Prefix + "BLOCK_PUBLIC_ACCESS=false"}})
	ctx := context.Background()
	root := sdkClient(gw)
	b := "ownwrite"
	if _, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("x"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	public := fmt.Sprintf(`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/*"}]}`, b)
	for i := range 5 {
		if _, err := root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(b), Policy: aws.String(public)}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if code, body := get(t, gw.Endpoint+"/"+b+"/x"); code != 200 {
				t.Fatalf("round %d: anonymous GET after the policy: %d %s", i, code, body)
			}
		}
		if _, err := root.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
		if code, body := get(t, gw.Endpoint+"/"+b+"/x"); code != 403 {
			t.Fatalf("round %d: anonymous GET after the policy's delete: %d %s", i, code, body)
		}
	}
}
