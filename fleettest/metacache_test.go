package fleettest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/s3gate/s3gate/admin"
	"github.com/s3gate/s3gate/internal/gwproc"
)

// cacheCounter scrapes one of an instance's metadata cache counters.
func cacheCounter(t *testing.T, in *instance, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + in.maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	mf := mfs["s3gate_metadata_cache_"+name+"_total"]
	if mf == nil || len(mf.GetMetric()) != 1 {
		t.Fatalf("instance %s exports no metadata cache %s counter", in.name, name)
	}
	return mf.GetMetric()[0].GetCounter().GetValue()
}

// waitInvalidations polls in's invalidation counter until it reaches n: the
// instance has applied the notifications of the commits the test made.
func waitInvalidations(t *testing.T, in *instance, n float64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); cacheCounter(t, in, "invalidations") < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("instance %s: invalidations stayed below %v", in.name, n)
		}
	}
}

func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// metadataAcross: B has a key and a bucket's configuration cached; a
// bucket policy stored through A, the bucket deleted and created again
// through A, and the key deleted by `s3gate admin key delete`, each apply
// on B as soon as B has heard the commit.
func metadataAcross(t *testing.T, f *fleet) {
	ctx := context.Background()
	a, b := f.insts[0], f.insts[1]
	const bucket, id, secret = "meta", "FLEETCACHEKEY", "fleet-cache-key-secret"
	var out, errOut bytes.Buffer
	runAdmin := func(args ...string) {
		t.Helper()
		args = append(args, "-database-url="+f.dsn, "-data-dir", t.TempDir(), "-root-access-key", accessKey, "-root-secret-key", secretKey)
		if code := admin.Run(ctx, args, &out, &errOut); code != 0 {
			t.Fatalf("admin %v: exit %d: %s", args[:2], code, errOut.String())
		}
	}
	runAdmin("key", "create", "-access-key", id, "-secret", secret)
	createBucket(t, a.client(), bucket)
	put(t, a.client(), bucket, "x", []byte("x"))
	keyOnB := gwproc.Client(b.addr, id, secret, aws.NopRetryer{})
	getOnB := func() error {
		_, err := readAll(ctx, keyOnB, bucket, "x")
		return err
	}
	hits := cacheCounter(t, b, "hits")
	for range 2 {
		if err := getOnB(); err != nil {
			t.Fatalf("GET with the key on B: %v", err)
		}
	}
	if cacheCounter(t, b, "hits") <= hits {
		t.Fatal("B served nothing from its cache")
	}

	inv := cacheCounter(t, b, "invalidations")
	deny := fmt.Sprintf(`{"Statement":[{"Effect":"Deny","Principal":{"AWS":"arn:aws:iam::000000000000:user/%s"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/*"}]}`, id, bucket)
	if _, err := a.client().PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(bucket), Policy: aws.String(deny)}); err != nil {
		t.Fatal(err)
	}
	waitInvalidations(t, b, inv+1)
	if err := getOnB(); errCode(err) != "AccessDenied" {
		t.Fatalf("GET on B after a Deny policy stored through A: %v, want AccessDenied", err)
	}

	// Deleted and created again: the new bucket has no policy on B either.
	inv = cacheCounter(t, b, "invalidations")
	if _, err := a.client().DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.client().DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	createBucket(t, a.client(), bucket)
	put(t, a.client(), bucket, "x", []byte("x"))
	waitInvalidations(t, b, inv+2) // the delete's commit, the create's
	if err := getOnB(); err != nil {
		t.Fatalf("GET on B in the bucket created again through A: %v", err)
	}

	inv = cacheCounter(t, b, "invalidations")
	runAdmin("key", "delete", id)
	waitInvalidations(t, b, inv+1)
	if err := getOnB(); errCode(err) != "InvalidAccessKeyId" {
		t.Fatalf("GET on B after admin key delete: %v, want InvalidAccessKeyId", err)
	}
}
