package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/admin"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/internal/testreq"
)

// TestAccessPolicies runs bucket policies, Block Public Access, key policies
// and anonymous requests (curl, unsigned) against every engine: the short
// end-to-end set; the condition table is policy's unit test.
func TestAccessPolicies(t *testing.T) {
	if testgw.External() {
		t.Skip("creates access keys with s3gate admin: in-process gateways only")
	}
	needBinary(t, "curl", "curl")
	forEachEngine(t, func(t *testing.T, c combo, gw *testgw.Gateway) {
		root := sdkClient(t, gw)
		t.Run("BucketPolicy", func(t *testing.T) { testBucketPolicy(t, gw, root) })
		t.Run("BlockPublicAccess", func(t *testing.T) { testBlockPublicAccess(t, gw, root) })
		t.Run("KeyPolicy", func(t *testing.T) { testKeyPolicy(t, gw, root) })
		t.Run("Conditions", func(t *testing.T) { testConditionsEndToEnd(t, c, gw, root) })
		if c.Engine == testgw.Embedded { // the cli's requests do not depend on the engine
			t.Run("AWSCLI", func(t *testing.T) { testPolicyCLI(t, gw, root) })
		}
	})
}

// testPolicyCLI: the aws cli sets a public policy and reads anonymously
// (--no-sign-request).
func testPolicyCLI(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	if _, err := exec.LookPath("aws"); err != nil {
		testreq.Missing(t, "aws cli not on PATH: skipping the aws cli policy test (install the Debian package \"awscli\")")
	}
	cli := newAWSCLI(t, gw)
	b := mustBucket(t, root, "clipol")
	if _, err := root.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("pub/f"), Body: strings.NewReader("public bytes")}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/pub/*"}]}`, b)), 0o600); err != nil {
		t.Fatal(err)
	}
	cli.run(t, "s3api", "delete-public-access-block", "--bucket", b)
	cli.run(t, "s3api", "put-bucket-policy", "--bucket", b, "--policy", "file://"+file)
	if out := cli.run(t, "s3api", "get-bucket-policy-status", "--bucket", b); !strings.Contains(out, `"IsPublic": true`) {
		t.Fatalf("get-bucket-policy-status: %s", out)
	}
	dst := filepath.Join(t.TempDir(), "f")
	cli.run(t, "s3", "cp", "--no-sign-request", "s3://"+b+"/pub/f", dst)
	if got, err := os.ReadFile(dst); err != nil || string(got) != "public bytes" {
		t.Fatalf("anonymous aws s3 cp: %q %v", got, err)
	}
}

// publicBucket creates a bucket without Block Public Access (new buckets
// have all four flags by default, as on AWS) holding public/x and private/x.
func publicBucket(t *testing.T, root *s3.Client) string {
	t.Helper()
	b := mustBucket(t, root, "pol")
	ctx := testCtx(t, time.Minute)
	if _, err := root.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("DeletePublicAccessBlock: %v", err)
	}
	for _, k := range []string{"public/x", "private/x", "public/secret"} {
		if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(k), Body: strings.NewReader("body of " + k)}); err != nil {
			t.Fatalf("PutObject %s: %v", k, err)
		}
	}
	return b
}

func putPolicy(t *testing.T, c *s3.Client, bucket, doc string) error {
	t.Helper()
	_, err := c.PutBucketPolicy(testCtx(t, time.Minute), &s3.PutBucketPolicyInput{Bucket: aws.String(bucket), Policy: aws.String(doc)})
	return err
}

// anonGet reads bucket/key with curl, unsigned.
func anonGet(t *testing.T, gw *testgw.Gateway, path string) (int, []byte) {
	t.Helper()
	return curlGet(t, gw, t.TempDir(), gw.Endpoint+"/"+path)
}

func wantAnon(t *testing.T, gw *testgw.Gateway, path string, wantStatus int, wantCode string) {
	t.Helper()
	status, body := anonGet(t, gw, path)
	if wantCode == "" {
		if status != wantStatus {
			t.Fatalf("anonymous GET %s: HTTP %d (%.300s), want %d", path, status, body, wantStatus)
		}
		return
	}
	wantRawError(t, "anonymous GET "+path, status, body, wantStatus, wantCode)
}

func testBucketPolicy(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	b := publicBucket(t, root)
	ctx := testCtx(t, time.Minute)
	wantAnon(t, gw, b+"/public/x", http.StatusForbidden, "AccessDenied") // no policy yet
	_, err := root.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String(b)})
	wantAPIError(t, err, "NoSuchBucketPolicy")

	doc := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[
		{"Sid":"PublicRead","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%[1]s/public/*"},
		{"Sid":"NoSecret","Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%[1]s/public/secret"}]}`, b)
	if err := putPolicy(t, root, b, doc); err != nil {
		t.Fatalf("PutBucketPolicy: %v", err)
	}
	got, err := root.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String(b)})
	if err != nil || aws.ToString(got.Policy) != doc {
		t.Fatalf("GetBucketPolicy: %v %q", err, aws.ToString(got.Policy))
	}
	st, err := root.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: aws.String(b)})
	if err != nil || !aws.ToBool(st.PolicyStatus.IsPublic) {
		t.Fatalf("GetBucketPolicyStatus: %v %+v", err, st)
	}

	if status, body := anonGet(t, gw, b+"/public/x"); status != http.StatusOK || string(body) != "body of public/x" {
		t.Fatalf("anonymous GET public/x: HTTP %d %q", status, body)
	}
	wantAnon(t, gw, b+"/private/x", http.StatusForbidden, "AccessDenied")
	// Without s3:ListBucket a missing key is AccessDenied, not NoSuchKey (as on S3).
	wantAnon(t, gw, b+"/public/missing", http.StatusForbidden, "AccessDenied")
	wantAnon(t, gw, b+"/public/secret", http.StatusForbidden, "AccessDenied") // the explicit Deny wins
	wantAnon(t, gw, b, http.StatusForbidden, "AccessDenied")                  // listing is not granted
	wantAnon(t, gw, "", http.StatusForbidden, "AccessDenied")                 // nor ListBuckets
	wantAnon(t, gw, bucketName("none")+"/public/x", http.StatusNotFound, "NoSuchBucket")
	// The owner's presigned URL reads what anonymous callers may not.
	if status, body := curlGet(t, gw, t.TempDir(), presignRaw(t, gw, "/"+b+"/private/x", time.Now(), time.Hour)); status != http.StatusOK || string(body) != "body of private/x" {
		t.Fatalf("presigned GET private/x: HTTP %d %q", status, body)
	}
	// An anonymous write is refused and stores nothing.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, gw.Endpoint+"/"+b+"/public/new", strings.NewReader("x"))
	status, _, body := send(t, gw, req)
	wantRawError(t, "anonymous PUT", status, body, http.StatusForbidden, "AccessDenied")
	objectAbsent(t, root, b, "public/new")

	// Malformed documents answer MalformedPolicy with S3's message and
	// change nothing.
	for doc, msg := range map[string]string{
		`not json`: "Policies must be valid JSON and the first byte must be '{'",
		`{"Statement":[{"Effect":"Allow","Principal":{"AWS":"user"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::` + b + `/*"}]}`: "Invalid principal in policy",
		`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}]}`:                "Policy has invalid resource",
	} {
		err := putPolicy(t, root, b, doc)
		wantAPIError(t, err, "MalformedPolicy")
		if !strings.Contains(err.Error(), msg) {
			t.Errorf("PutBucketPolicy %s: %v, want message %q", doc, err, msg)
		}
	}
	err = putPolicy(t, root, b, `{"Statement":[`+strings.Repeat(`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::`+b+`/*"},`, 300)+`]}`)
	wantAPIError(t, err, "MalformedPolicy") // beyond 20 KiB
	if got, err := root.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String(b)}); err != nil || aws.ToString(got.Policy) != doc {
		t.Fatalf("policy changed by refused puts: %v", err)
	}

	// A Deny of everything does not lock the owner out of the policy.
	if err := putPolicy(t, root, b, fmt.Sprintf(`{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::%[1]s","arn:aws:s3:::%[1]s/*"]}]}`, b)); err != nil {
		t.Fatalf("PutBucketPolicy deny-all: %v", err)
	}
	_, err = root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("private/x")})
	wantAPIError(t, err, "AccessDenied")
	if _, err := root.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("DeleteBucketPolicy under deny-all: %v", err)
	}
	if _, err := root.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("DeleteBucketPolicy of none (204 on AWS): %v", err)
	}
	wantAnon(t, gw, b+"/public/x", http.StatusForbidden, "AccessDenied")
}

func testBlockPublicAccess(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := mustBucket(t, root, "bpa")
	// New buckets block public access (the gateway default, as on AWS).
	got, err := root.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String(b)})
	if err != nil {
		t.Fatalf("GetPublicAccessBlock: %v", err)
	}
	if c := got.PublicAccessBlockConfiguration; !aws.ToBool(c.BlockPublicAcls) || !aws.ToBool(c.IgnorePublicAcls) ||
		!aws.ToBool(c.BlockPublicPolicy) || !aws.ToBool(c.RestrictPublicBuckets) {
		t.Fatalf("default public access block %+v, want all set", c)
	}
	public := fmt.Sprintf(`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/public/*"}]}`, b)
	wantAPIError(t, putPolicy(t, root, b, public), "AccessDenied") // BlockPublicPolicy
	_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("public/x"), ACL: types.ObjectCannedACLPublicRead, Body: strings.NewReader("x")})
	wantAPIError(t, err, "AccessDenied") // BlockPublicAcls
	objectAbsent(t, root, b, "public/x")
	if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("public/x"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}

	// Only RestrictPublicBuckets: the public policy is accepted, and grants
	// no anonymous caller anything.
	if _, err := root.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String(b),
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{RestrictPublicBuckets: aws.Bool(true)}}); err != nil {
		t.Fatalf("PutPublicAccessBlock: %v", err)
	}
	if err := putPolicy(t, root, b, public); err != nil {
		t.Fatalf("PutBucketPolicy under RestrictPublicBuckets: %v", err)
	}
	wantAnon(t, gw, b+"/public/x", http.StatusForbidden, "AccessDenied")
	_, err = root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("acl"), ACL: types.ObjectCannedACLPublicRead, Body: strings.NewReader("x")})
	wantAPIError(t, err, "AccessControlListNotSupported") // no BlockPublicAcls, but ACLs are off (BucketOwnerEnforced)

	if _, err := root.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("DeletePublicAccessBlock: %v", err)
	}
	_, err = root.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String(b)})
	wantAPIError(t, err, "NoSuchPublicAccessBlockConfiguration")
	wantAnon(t, gw, b+"/public/x", http.StatusOK, "")
	// A bucket deleted and created again starts over: its configuration
	// went with it.
	emptyAndDelete(t, root, b)
	if _, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
		t.Fatal(err)
	}
	_, err = root.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String(b)})
	wantAPIError(t, err, "NoSuchBucketPolicy")
	if got, err := root.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String(b)}); err != nil ||
		!aws.ToBool(got.PublicAccessBlockConfiguration.BlockPublicPolicy) {
		t.Fatalf("GetPublicAccessBlock of the new bucket: %v", err)
	}
}

// createKey runs `s3gate admin key create` against the gateway's store.
func createKey(t *testing.T, gw *testgw.Gateway, id, policyDoc string) (ak, sk string) {
	t.Helper()
	var out, errOut bytes.Buffer
	sk = "policy-test-secret-0123"
	args := []string{"key", "create", "-access-key", id, "-secret", sk, "-policy", policyDoc,
		"-database-url=" + gw.DatabaseURL, "-data-dir", gw.DataDir,
		"-root-access-key", gw.AccessKey, "-root-secret-key", gw.SecretKey}
	if code := admin.Run(context.Background(), args, &out, &errOut); code != 0 {
		t.Fatalf("admin key create: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "policy:") {
		t.Fatalf("admin key create printed no policy line: %s", out.String())
	}
	return id, sk
}

func testKeyPolicy(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := mustBucket(t, root, "keypol")
	if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("uploads/old"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	ak, sk := createKey(t, gw, "UPLOADER"+strings.ToUpper(b[len(b)-8:]), fmt.Sprintf(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::%s/uploads/*"}]}`, b))
	up := sdkClientWithKeys(t, gw, ak, sk)
	if _, err := up.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("uploads/a"), Body: strings.NewReader("a")}); err != nil {
		t.Fatalf("PutObject uploads/a: %v", err)
	}
	_, err := up.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("other/a"), Body: strings.NewReader("a")})
	wantAPIError(t, err, "AccessDenied")
	objectAbsent(t, root, b, "other/a")
	_, err = up.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("uploads/a")})
	wantAPIError(t, err, "AccessDenied")
	_, err = up.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(b)})
	wantAPIError(t, err, "AccessDenied")
	_, err = up.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String("uploads/old")})
	wantAPIError(t, err, "AccessDenied")
	del, err := up.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(b), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("uploads/old")}}}})
	if err != nil || len(del.Errors) != 1 || aws.ToString(del.Errors[0].Code) != "AccessDenied" {
		t.Fatalf("DeleteObjects: %v %+v", err, del)
	}
	_, err = up.ListBuckets(ctx, &s3.ListBucketsInput{})
	wantAPIError(t, err, "AccessDenied") // s3:ListAllMyBuckets is not in its policy
	copyIn := &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("uploads/copy"), CopySource: aws.String(b + "/uploads/old")}
	_, err = up.CopyObject(ctx, copyIn)
	wantAPIError(t, err, "AccessDenied") // a copy reads its source: s3:GetObject
	objectAbsent(t, root, b, "uploads/copy")
	// A bucket policy may grant the key more (one account).
	if err := putPolicy(t, root, b, fmt.Sprintf(`{"Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:user/%s"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/uploads/*"}]}`, ak, b)); err != nil {
		t.Fatalf("PutBucketPolicy: %v", err)
	}
	o, err := up.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("uploads/a")})
	if err != nil {
		t.Fatalf("GetObject granted by the bucket policy: %v", err)
	}
	data, _ := io.ReadAll(o.Body)
	o.Body.Close()
	if string(data) != "a" {
		t.Fatalf("GetObject: %q", data)
	}
	if _, err := up.CopyObject(ctx, copyIn); err != nil {
		t.Fatalf("CopyObject once the source is readable: %v", err)
	}
}

func testConditionsEndToEnd(t *testing.T, c combo, gw *testgw.Gateway, root *s3.Client) {
	b := publicBucket(t, root)
	cases := []struct {
		name      string
		condition string
		allowed   bool
	}{
		{"SourceIp in range", `{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}`, true},
		{"SourceIp out of range", `{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}`, false},
		{"SecureTransport true", `{"Bool":{"aws:SecureTransport":"true"}}`, c.TLS()},
		{"SecureTransport false", `{"Bool":{"aws:SecureTransport":"false"}}`, !c.TLS()},
	}
	for _, tc := range cases {
		doc := fmt.Sprintf(`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/public/*","Condition":%s}]}`, b, tc.condition)
		if err := putPolicy(t, root, b, doc); err != nil {
			t.Fatalf("%s: PutBucketPolicy: %v", tc.name, err)
		}
		status, body := anonGet(t, gw, b+"/public/x")
		if (status == http.StatusOK) != tc.allowed {
			t.Errorf("%s over %s: anonymous GET HTTP %d %.200s, want allowed=%v", tc.name, c.Transport, status, body, tc.allowed)
		}
	}
	// s3:prefix on ListObjectsV2.
	doc := fmt.Sprintf(`{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::%s","Condition":{"StringEquals":{"s3:prefix":"public/"}}}]}`, b)
	if err := putPolicy(t, root, b, doc); err != nil {
		t.Fatalf("PutBucketPolicy prefix: %v", err)
	}
	status, body := anonGet(t, gw, b+"?list-type=2&prefix=public/")
	if status != http.StatusOK || !bytes.Contains(body, []byte("<Key>public/x</Key>")) || bytes.Contains(body, []byte("private/")) {
		t.Fatalf("anonymous list prefix=public/: HTTP %d %.300s", status, body)
	}
	wantAnon(t, gw, b+"?list-type=2&prefix=private/", http.StatusForbidden, "AccessDenied")
	wantAnon(t, gw, b+"?list-type=2", http.StatusForbidden, "AccessDenied")

	// Anonymous requests are counted on their own.
	resp, err := gw.HTTPClient.Get(gw.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(m, []byte(`s3gate_anonymous_requests_total{operation="ListObjectsV2",status_class="2xx"}`)) ||
		!bytes.Contains(m, []byte(`s3gate_anonymous_requests_total{operation="ListObjectsV2",status_class="4xx"}`)) {
		t.Fatalf("metrics lack the anonymous ListObjectsV2 series:\n%s", grepLines(m, "anonymous"))
	}
}

func grepLines(b []byte, sub string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
