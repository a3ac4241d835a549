package conformance

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // SigV2 is defined on HMAC-SHA1
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/internal/testreq"
)

// authErrorXML is an S3 error body with the elements auth errors add.
type authErrorXML struct {
	Code             string `xml:"Code"`
	HeadersNotSigned string `xml:"HeadersNotSigned"`
	AWSAccessKeyID   string `xml:"AWSAccessKeyId"`
	StringToSign     string `xml:"StringToSign"`
}

func parseAuthError(t testing.TB, body []byte) authErrorXML {
	t.Helper()
	var e authErrorXML
	if err := xml.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e
}

// TestAuthHardening runs on one gateway (embedded, HTTP): signature checks
// do not depend on the engine or the transport.
func TestAuthHardening(t *testing.T) {
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded})
	c := sdkClient(t, gw)
	t.Run("PresignedPutWithUnsignedCopySource", func(t *testing.T) { ahPresignedCopySource(t, gw, c) })
	t.Run("PresignedQueryHeadersHonoured", func(t *testing.T) { ahPresignedQueryHeaders(t, gw, c) })
	t.Run("UnsignedMetaAfterSigning", func(t *testing.T) { ahUnsignedMeta(t, gw, c) })
	t.Run("UnsignedMetadataDirectiveOnCopy", func(t *testing.T) { ahUnsignedDirective(t, gw, c) })
	t.Run("ClockSkewAtAnyDate", func(t *testing.T) { ahSkew(t, gw, c) })
	t.Run("DuplicateAuthorization", func(t *testing.T) { ahDuplicateAuth(t, gw, c) })
	t.Run("EmptyContentMD5", func(t *testing.T) { ahEmptyContentMD5(t, gw, c) })
	t.Run("InvalidAccessKeyIdNamesTheKey", func(t *testing.T) { ahUnknownKey(t, gw) })
	t.Run("SigV2BucketLevel", func(t *testing.T) { ahSigV2Bucket(t, gw, c) })
	t.Run("SigV2Boto3", func(t *testing.T) { ahSigV2Boto3(t, gw, c) })
}

func putString(t *testing.T, c *s3.Client, bucket, key, body string) {
	t.Helper()
	if _, err := c.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: strings.NewReader(body)}); err != nil {
		t.Fatalf("PutObject %s/%s: %v", bucket, key, err)
	}
}

func getString(t *testing.T, c *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := c.GetObject(testCtx(t, time.Minute), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return string(b)
}

// ahPresignedCopySource: whoever holds an upload URL for bucket1/slot must
// not turn it into a copy of a secret the signer can read.
func ahPresignedCopySource(t *testing.T, gw *testgw.Gateway, c *s3.Client) {
	b1, b2 := mustBucket(t, c, "slot"), mustBucket(t, c, "secret")
	putString(t, c, b2, "secret", "the secret")
	p, err := s3.NewPresignClient(c).PresignPutObject(testCtx(t, time.Minute),
		&s3.PutObjectInput{Bucket: aws.String(b1), Key: aws.String("slot")}, s3.WithPresignExpires(10*time.Minute))
	if err != nil {
		t.Fatalf("presign: %v", err)
	}
	put := func(extra http.Header, body string) (int, []byte) {
		req, err := http.NewRequestWithContext(testCtx(t, time.Minute), p.Method, p.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, vv := range p.SignedHeader {
			if !strings.EqualFold(k, "Host") {
				req.Header[k] = vv
			}
		}
		for k, vv := range extra {
			req.Header[k] = vv
		}
		status, _, b := send(t, gw, req)
		return status, b
	}
	status, body := put(http.Header{"X-Amz-Copy-Source": {"/" + b2 + "/secret"}}, "")
	wantRawError(t, "presigned PUT + unsigned x-amz-copy-source", status, body, http.StatusForbidden, "AccessDenied")
	if e := parseAuthError(t, body); e.HeadersNotSigned != "x-amz-copy-source" ||
		!bytes.Contains(body, []byte("There were headers present in the request which were not signed")) {
		t.Fatalf("error body %s", body)
	}
	objectAbsent(t, c, b1, "slot")
	// The URL itself is good: used as signed it uploads what the holder sends.
	if status, body := put(nil, "mine"); status != http.StatusOK {
		t.Fatalf("presigned PUT as signed: HTTP %d %s", status, body)
	}
	if got := getString(t, c, b1, "slot"); got != "mine" {
		t.Fatalf("slot holds %q", got)
	}
}

// ahPresignedQueryHeaders: x-amz-* headers carried in a presigned URL's
// query (as presigners do with headers they hoist) are signed there and must
// act as headers do, never be accepted and ignored: metadata is stored, a
// wrong expected bucket owner is refused, and a header contradicting its
// signed query parameter is refused and changes nothing.
func ahPresignedQueryHeaders(t *testing.T, gw *testgw.Gateway, c *s3.Client) {
	bucket := mustBucket(t, c, "hoist")
	creds := aws.Credentials{AccessKeyID: gw.AccessKey, SecretAccessKey: gw.SecretKey}
	presign := func(method, pathQuery string) string {
		req, err := http.NewRequest(method, gw.Endpoint+pathQuery, nil)
		if err != nil {
			t.Fatal(err)
		}
		u, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", gw.Region, time.Now())
		if err != nil {
			t.Fatalf("presign: %v", err)
		}
		return u
	}
	do := func(method, u string, h http.Header, body string) (int, []byte) {
		req, err := http.NewRequestWithContext(testCtx(t, time.Minute), method, u, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, vv := range h {
			req.Header[k] = vv
		}
		status, _, b := send(t, gw, req)
		return status, b
	}
	put := presign(http.MethodPut, "/"+bucket+"/m?X-Amz-Expires=600&x-amz-meta-color=blue")
	if status, body := do(http.MethodPut, put, nil, "hoisted"); status != http.StatusOK {
		t.Fatalf("presigned PUT with metadata in the URL: HTTP %d %s", status, body)
	}
	head, err := c.HeadObject(testCtx(t, time.Minute), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("m")})
	if err != nil {
		t.Fatalf("HeadObject: %v", err)
	}
	if got := head.Metadata["color"]; got != "blue" {
		t.Fatalf("metadata in the presigned URL was not stored: %v", head.Metadata)
	}
	// An added header contradicting the signed parameter of the same name
	// (unsigned, so refused either way, and nothing changes).
	status, body := do(http.MethodPut, put, http.Header{"X-Amz-Meta-Color": {"red"}}, "other")
	if status < 400 || status >= 500 {
		t.Fatalf("presigned PUT with a header contradicting its query parameter: HTTP %d %s, want a 4xx", status, body)
	}
	if got := getString(t, c, bucket, "m"); got != "hoisted" {
		t.Fatalf("the refused PUT changed the object: %q", got)
	}
	get := presign(http.MethodGet, "/"+bucket+"/m?X-Amz-Expires=600&x-amz-expected-bucket-owner=999999999999")
	status, body = do(http.MethodGet, get, nil, "")
	wantRawError(t, "presigned GET with a wrong expected bucket owner in the URL", status, body, http.StatusForbidden, "AccessDenied")
}

// ahUnsignedMeta: a header-signed PUT with x-amz-meta-x added after signing.
func ahUnsignedMeta(t *testing.T, gw *testgw.Gateway, c *s3.Client) {
	bucket := mustBucket(t, c, "meta")
	req := newRawRequest(t, testCtx(t, time.Minute), gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/k", Body: []byte("data"),
		Header: http.Header{"X-Amz-Meta-Signed": {"yes"}}})
	req.Header.Set("X-Amz-Meta-X", "injected")
	status, _, body := send(t, gw, req)
	wantRawError(t, "PUT + unsigned x-amz-meta-x", status, body, http.StatusForbidden, "AccessDenied")
	if e := parseAuthError(t, body); e.HeadersNotSigned != "x-amz-meta-x" {
		t.Fatalf("HeadersNotSigned %q", e.HeadersNotSigned)
	}
	objectAbsent(t, c, bucket, "k")
}

// ahUnsignedDirective: a signed copy that keeps the source's metadata must
// not become a REPLACE by an added x-amz-metadata-directive.
func ahUnsignedDirective(t *testing.T, gw *testgw.Gateway, c *s3.Client) {
	bucket := mustBucket(t, c, "directive")
	if _, err := c.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("src"),
		Body: strings.NewReader("x"), Metadata: map[string]string{"origin": "src"}}); err != nil {
		t.Fatal(err)
	}
	req := newRawRequest(t, testCtx(t, time.Minute), gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/dst",
		Header: http.Header{"X-Amz-Copy-Source": {"/" + bucket + "/src"}}})
	req.Header.Set("X-Amz-Metadata-Directive", "REPLACE")
	status, _, body := send(t, gw, req)
	wantRawError(t, "copy + unsigned x-amz-metadata-directive", status, body, http.StatusForbidden, "AccessDenied")
	if e := parseAuthError(t, body); e.HeadersNotSigned != "x-amz-metadata-directive" {
		t.Fatalf("HeadersNotSigned %q", e.HeadersNotSigned)
	}
	objectAbsent(t, c, bucket, "dst")
	// Signed, the same copy is fine.
	status, _, body = doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/dst",
		Header: http.Header{"X-Amz-Copy-Source": {"/" + bucket + "/src"}, "X-Amz-Metadata-Directive": {"COPY"}}})
	if status != http.StatusOK {
		t.Fatalf("signed copy: HTTP %d %s", status, body)
	}
}

// ahSkew: dates at the ends of the calendar are skewed, not accepted by an
// overflowing difference.
func ahSkew(t *testing.T, gw *testgw.Gateway, c *s3.Client) {
	bucket := mustBucket(t, c, "skew")
	for _, at := range []time.Time{
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC), // rawReq takes the zero time as "now"
	} {
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/k", Body: []byte("x"), Time: at})
		wantRawError(t, "PUT dated "+at.Format(time.RFC3339), status, body, http.StatusForbidden, "RequestTimeTooSkewed")
		objectAbsent(t, c, bucket, "k")
	}
	u := presignRaw(t, gw, "/"+bucket+"/k", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), time.Hour)
	req, err := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := send(t, gw, req)
	// S3 answers a presigned URL from the future AccessDenied "Request is
	// not yet valid", not RequestTimeTooSkewed.
	wantRawError(t, "presigned GET dated 9999", status, body, http.StatusForbidden, "AccessDenied")
}

func ahDuplicateAuth(t *testing.T, gw *testgw.Gateway, c *s3.Client) {
	bucket := mustBucket(t, c, "dupauth")
	req := newRawRequest(t, testCtx(t, time.Minute), gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/k", Body: []byte("x")})
	req.Header.Add("Authorization", req.Header.Get("Authorization"))
	status, _, body := send(t, gw, req)
	wantRawError(t, "two Authorization headers", status, body, http.StatusBadRequest, "InvalidArgument")
	objectAbsent(t, c, bucket, "k")

	u := presignRaw(t, gw, "/"+bucket+"/k", time.Now(), time.Hour)
	i := strings.Index(u, "X-Amz-Signature=")
	req, err := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, u+"&"+u[i:], nil)
	if err != nil {
		t.Fatal(err)
	}
	status, _, body = send(t, gw, req)
	wantRawError(t, "repeated X-Amz-Signature", status, body, http.StatusBadRequest, "InvalidArgument")
}

func ahEmptyContentMD5(t *testing.T, gw *testgw.Gateway, c *s3.Client) {
	bucket := mustBucket(t, c, "md5")
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/k", Body: []byte("x"),
		Header: http.Header{"Content-Md5": {""}}})
	wantRawError(t, "PUT with an empty Content-MD5", status, body, http.StatusBadRequest, "InvalidDigest")
	objectAbsent(t, c, bucket, "k")
}

func ahUnknownKey(t *testing.T, gw *testgw.Gateway) {
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/", AK: "AKIDNOSUCHKEY", SK: "whatever"})
	wantRawError(t, "unknown access key", status, body, http.StatusForbidden, "InvalidAccessKeyId")
	if e := parseAuthError(t, body); e.AWSAccessKeyID != "AKIDNOSUCHKEY" {
		t.Fatalf("AWSAccessKeyId %q in %s", e.AWSAccessKeyID, body)
	}
}

// sigV2Request signs a request the way boto3 does with signature_version
// "s3" in path style: the path goes out as given, the canonical resource is
// resource (for a bucket, "/bucket/" while the path is "/bucket").
func sigV2Request(t *testing.T, gw *testgw.Gateway, method, path, resource string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t, time.Minute), method, gw.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(body) == 0 {
		req.Body = http.NoBody
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	req.Header.Set("Date", date)
	m := hmac.New(sha1.New, []byte(gw.SecretKey))
	m.Write([]byte(method + "\n\n\n" + date + "\n" + resource))
	req.Header.Set("Authorization", "AWS "+gw.AccessKey+":"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	return req
}

// ahSigV2Bucket: bucket-level calls signed with SigV2 (hand-built signer).
func ahSigV2Bucket(t *testing.T, gw *testgw.Gateway, c *s3.Client) {
	bucket := bucketName("v2")
	b := "/" + bucket
	steps := []struct {
		name, method, path, resource string
		body                         []byte
		want                         int
	}{
		{"CreateBucket", http.MethodPut, b, b + "/", nil, http.StatusOK},
		{"HeadBucket", http.MethodHead, b, b + "/", nil, http.StatusOK},
		{"PutObject", http.MethodPut, b + "/k", b + "/k", []byte("v2 body"), http.StatusOK},
		{"ListObjects", http.MethodGet, b, b + "/", nil, http.StatusOK},
		{"ListObjects with trailing slash", http.MethodGet, b + "/", b + "/", nil, http.StatusOK},
		{"GetBucketAcl", http.MethodGet, b + "?acl", b + "/?acl", nil, http.StatusOK},
		{"DeleteObject", http.MethodDelete, b + "/k", b + "/k", nil, http.StatusNoContent},
		{"DeleteBucket", http.MethodDelete, b, b + "/", nil, http.StatusNoContent},
	}
	for _, s := range steps {
		status, _, body := send(t, gw, sigV2Request(t, gw, s.method, s.path, s.resource, s.body))
		if status != s.want {
			t.Fatalf("SigV2 %s: HTTP %d, want %d: %s", s.name, status, s.want, body)
		}
		if s.name == "ListObjects" && !bytes.Contains(body, []byte("<Key>k</Key>")) {
			t.Fatalf("SigV2 ListObjects lacks k: %s", body)
		}
	}
	bucketGone(t, c, bucket)
	// A different bucket's resource does not sign this one.
	status, _, body := send(t, gw, sigV2Request(t, gw, http.MethodPut, b, "/other/", nil))
	wantRawError(t, "SigV2 with another bucket's resource", status, body, http.StatusForbidden, "SignatureDoesNotMatch")
	bucketGone(t, c, bucket)
}

// ahSigV2Boto3: boto3 with signature_version "s3" (SigV2), a real client,
// through the bucket-level calls and a presigned V2 GET.
func ahSigV2Boto3(t *testing.T, gw *testgw.Gateway, c *s3.Client) {
	if err := exec.Command("python3", "-c", "import boto3").Run(); err != nil {
		testreq.Missing(t, "boto3 is not importable by python3; the hand-built SigV2 signer above covers the bucket calls (install the Debian package \"python3-boto3\")")
	}
	bucket := bucketName("boto2")
	script := `
import json, os, sys, urllib.request, ssl, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["EP"], region_name=os.environ["RG"],
    aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
    verify=os.environ.get("CA") or None, config=Config(signature_version="s3", s3={"addressing_style": "path"}))
b = os.environ["BK"]
out = {}
s3.create_bucket(Bucket=b)
s3.head_bucket(Bucket=b)
s3.put_object(Bucket=b, Key="k", Body=b"boto v2", Metadata={"m": "v"})
out["keys"] = [o["Key"] for o in s3.list_objects(Bucket=b)["Contents"]]
out["acl"] = [g["Permission"] for g in s3.get_bucket_acl(Bucket=b)["Grants"]]
out["meta"] = s3.head_object(Bucket=b, Key="k")["Metadata"]["m"]
url = s3.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "k"}, ExpiresIn=300)
ctx = ssl.create_default_context(cafile=os.environ["CA"]) if os.environ.get("CA") else None
out["presigned"] = urllib.request.urlopen(url, context=ctx).read().decode()
s3.delete_object(Bucket=b, Key="k")
s3.delete_bucket(Bucket=b)
json.dump(out, sys.stdout)
`
	cmd := exec.CommandContext(testCtx(t, 2*time.Minute), "python3", "-c", script)
	cmd.Env = append(os.Environ(), "EP="+gw.Endpoint, "RG="+gw.Region, "AK="+gw.AccessKey, "SK="+gw.SecretKey, "CA="+gw.CAFile, "BK="+bucket,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	outb, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("boto3 SigV2: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("boto3 SigV2: %v", err)
	}
	got := string(outb)
	for _, want := range []string{`"keys": ["k"]`, `"acl": ["FULL_CONTROL"]`, `"meta": "v"`, `"presigned": "boto v2"`} {
		if !strings.Contains(got, want) {
			t.Fatalf("boto3 SigV2 output lacks %s:\n%s", want, got)
		}
	}
	bucketGone(t, c, bucket)
}
