package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // SigV2 is defined on HMAC-SHA1
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// detail returns the value of the named Detail of an *Error, and whether it
// is there.
func detail(err error, name string) (string, bool) {
	var ae *Error
	if !errors.As(err, &ae) {
		return "", false
	}
	for _, d := range ae.Details {
		if d.Name == name {
			return d.Value, true
		}
	}
	return "", false
}

// TestUnsignedAmzHeadersHeaderAuth: an x-amz-* header added after signing
// is refused with S3's AccessDenied naming it, whatever the signature says.
func TestUnsignedAmzHeadersHeaderAuth(t *testing.T) {
	base := headerCase{method: "PUT", key: "obj", body: []byte("payload"),
		headers: map[string]string{"X-Amz-Meta-Signed": "yes"}}
	tests := []struct {
		name   string
		add    map[string]string
		want   string
		listed string // HeadersNotSigned
	}{
		{name: "all signed", want: ""},
		{name: "meta added", add: map[string]string{"X-Amz-Meta-X": "1"}, want: CodeAccessDenied, listed: "x-amz-meta-x"},
		{name: "copy source added", add: map[string]string{"X-Amz-Copy-Source": "/bucket2/secret"}, want: CodeAccessDenied, listed: "x-amz-copy-source"},
		{name: "two added, sorted", add: map[string]string{"X-Amz-Metadata-Directive": "REPLACE", "X-Amz-Acl": "private"},
			want: CodeAccessDenied, listed: "x-amz-acl, x-amz-metadata-directive"},
		{name: "non-amz header added is not signature business", add: map[string]string{"X-Custom": "1"}, want: ""},
		{name: "x-amzn-trace-id is not x-amz-", add: map[string]string{"X-Amzn-Trace-Id": "Root=1"}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := overTheWire(t, signHeader(t, base, testSK, t0))
			for k, v := range tc.add {
				req.Header.Set(k, v)
			}
			_, err := newVerifier(t0).Verify(req)
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
			if tc.listed != "" {
				if got, _ := detail(err, "HeadersNotSigned"); got != tc.listed {
					t.Fatalf("HeadersNotSigned = %q, want %q", got, tc.listed)
				}
				if !strings.Contains(err.Error(), "There were headers present in the request which were not signed") {
					t.Fatalf("message: %v", err)
				}
			}
		})
	}
}

// TestUnsignedAmzHeadersPresigned: a presigned URL grants exactly what was
// signed. Headers the SDK keeps as signed headers must be sent as signed;
// parameters it hoists into the query are signed there; anything added is
// refused.
func TestUnsignedAmzHeadersPresigned(t *testing.T) {
	ctx := context.Background()
	pc := presignClient()
	put := func(t *testing.T, in *s3.PutObjectInput) (*http.Request, time.Time) {
		in.Bucket, in.Key = aws.String("bucket1"), aws.String("slot")
		p, err := pc.PresignPutObject(ctx, in, s3.WithPresignExpires(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return presignedRequest(t, p, "body")
	}
	tests := []struct {
		name   string
		in     s3.PutObjectInput
		add    map[string]string
		want   string
		listed string
	}{
		{name: "plain", want: ""},
		{name: "signed metadata header", in: s3.PutObjectInput{Metadata: map[string]string{"m": "v"}}, want: ""},
		{name: "hoisted parameter", in: s3.PutObjectInput{ExpectedBucketOwner: aws.String("123456789012")}, want: ""},
		{name: "copy source added", add: map[string]string{"X-Amz-Copy-Source": "/bucket2/secret"}, want: CodeAccessDenied, listed: "x-amz-copy-source"},
		{name: "meta added", add: map[string]string{"X-Amz-Meta-X": "1"}, want: CodeAccessDenied, listed: "x-amz-meta-x"},
		{name: "hoisted parameter repeated as a header", in: s3.PutObjectInput{ExpectedBucketOwner: aws.String("123456789012")},
			add: map[string]string{"X-Amz-Expected-Bucket-Owner": "999999999999"}, want: CodeAccessDenied, listed: "x-amz-expected-bucket-owner"},
		{name: "x-amz-date header added", add: map[string]string{"X-Amz-Date": "20260102T030405Z"}, want: CodeAccessDenied, listed: "x-amz-date"},
		// Its value is the canonical request's payload line: it cannot be
		// changed without breaking the signature, so it may go unsigned.
		{name: "unsigned payload header", add: map[string]string{"X-Amz-Content-Sha256": unsignedPayload}, want: ""},
		{name: "other payload header", add: map[string]string{"X-Amz-Content-Sha256": sha256Hex256([]byte("body"))}, want: CodeSignatureDoesNotMatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			req, at := put(t, &in)
			for k, v := range tc.add {
				req.Header.Set(k, v)
			}
			_, err := newVerifier(at).Verify(req)
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
			if tc.listed != "" {
				if got, _ := detail(err, "HeadersNotSigned"); got != tc.listed {
					t.Fatalf("HeadersNotSigned = %q, want %q", got, tc.listed)
				}
			}
		})
	}
}

// TestDuplicateAuthElements: which of two signatures counts would be a
// guess, so any repeat is 400 InvalidArgument.
func TestDuplicateAuthElements(t *testing.T) {
	ctx := context.Background()
	p, err := presignClient().PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k")},
		s3.WithPresignExpires(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	v2 := v2Presign(t, "GET", "/bucket/k", t0.Add(time.Hour).Unix(), nil)
	tests := []struct {
		name string
		req  func(t *testing.T) *http.Request
		want string
	}{
		{name: "two Authorization headers", req: func(t *testing.T) *http.Request {
			r := overTheWire(t, signHeader(t, headerCases[0], testSK, t0))
			r.Header.Add("Authorization", r.Header.Get("Authorization"))
			return r
		}, want: CodeInvalidArgument},
		{name: "one Authorization header", req: func(t *testing.T) *http.Request {
			return overTheWire(t, signHeader(t, headerCases[0], testSK, t0))
		}, want: ""},
	}
	for _, param := range []string{"X-Amz-Signature", "X-Amz-Credential", "X-Amz-Algorithm", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders"} {
		tests = append(tests, struct {
			name string
			req  func(t *testing.T) *http.Request
			want string
		}{name: "repeated " + param, req: func(t *testing.T) *http.Request {
			r, _ := presignedRequest(t, p, "")
			q := r.URL.Query()
			r.URL.RawQuery += "&" + url.QueryEscape(param) + "=" + url.QueryEscape(q.Get(param))
			return r
		}, want: CodeInvalidArgument})
	}
	for _, param := range []string{"Signature", "AWSAccessKeyId", "Expires"} {
		tests = append(tests, struct {
			name string
			req  func(t *testing.T) *http.Request
			want string
		}{name: "repeated SigV2 " + param, req: func(t *testing.T) *http.Request {
			r := overTheWire(t, mustRequest(t, "GET", v2, ""))
			r.URL.RawQuery += "&" + param + "=" + url.QueryEscape(r.URL.Query().Get(param))
			return r
		}, want: CodeInvalidArgument})
	}
	tests = append(tests, struct {
		name string
		req  func(t *testing.T) *http.Request
		want string
	}{name: "SigV2 presigned once", req: func(t *testing.T) *http.Request {
		return overTheWire(t, mustRequest(t, "GET", v2, ""))
	}, want: ""})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newVerifier(t0).Verify(tc.req(t))
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
			if tc.want != "" && (&Error{Code: errCode(err)}).HTTPStatus() != http.StatusBadRequest {
				t.Fatal("not a 400")
			}
		})
	}
}

// TestSkewAtAnyDate: dates far from now must not wrap the skew arithmetic
// around (Time.Sub saturates, and -minDuration overflows).
func TestSkewAtAnyDate(t *testing.T) {
	y9999 := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	y1 := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		signed, now time.Time
		want        string
	}{
		{"year 9999", y9999, t0, CodeRequestTimeTooSkewed},
		{"year 1", y1, t0, CodeRequestTimeTooSkewed},
		{"clock in year 9999, request in year 1", y1, y9999, CodeRequestTimeTooSkewed},
		{"clock in year 1, request in year 9999", y9999, y1, CodeRequestTimeTooSkewed},
		{"both in year 9999", y9999, y9999.Add(-time.Minute), ""},
		{"15 minutes exactly", t0, t0.Add(DefaultMaxSkew), ""},
		{"a second beyond", t0, t0.Add(DefaultMaxSkew + time.Second), CodeRequestTimeTooSkewed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := overTheWire(t, signHeader(t, headerCases[0], testSK, tc.signed))
			_, err := newVerifier(tc.now).Verify(req)
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
		})
	}
	// Presigned: a date in the future beyond the skew is not yet valid
	// (AccessDenied, as S3 answers); one in the distant past has expired.
	for _, tc := range []struct {
		name   string
		signed time.Time
		want   string
	}{
		{"presigned year 9999", y9999, CodeAccessDenied},
		{"presigned year 1", y1, CodeAccessDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := presignClient().PresignGetObject(context.Background(),
				&s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k")},
				s3.WithPresignExpires(7*24*time.Hour), func(o *s3.PresignOptions) {
					o.Presigner = fixedTimePresigner{o.Presigner, tc.signed}
				})
			if err != nil {
				t.Fatal(err)
			}
			req, at := presignedRequest(t, p, "")
			if !at.Equal(tc.signed) {
				t.Fatalf("signed at %v, want %v", at, tc.signed)
			}
			_, err = newVerifier(t0).Verify(req)
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
		})
	}
}

// fixedTimePresigner presigns at a chosen instant.
type fixedTimePresigner struct {
	s3.HTTPPresignerV4
	at time.Time
}

func (f fixedTimePresigner) PresignHTTP(ctx context.Context, creds aws.Credentials, r *http.Request, payloadHash, service, region string,
	_ time.Time, optFns ...func(*v4.SignerOptions)) (string, http.Header, error) {
	return f.HTTPPresignerV4.PresignHTTP(ctx, creds, r, payloadHash, service, region, f.at, optFns...)
}

// v2Sign is an independent SigV2 signer written from AWS's description:
// it signs resource (the canonical resource the client chose) and
// amzHeaders, which must already be canonical ("name:value\n" each).
func v2Sign(method, contentMD5, contentType, date, amzHeaders, resource string) string {
	sts := method + "\n" + contentMD5 + "\n" + contentType + "\n" + date + "\n" + amzHeaders + resource
	m := hmac.New(sha1.New, []byte(testSK))
	m.Write([]byte(sts))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// v2Presign builds a SigV2 presigned URL for path (signed as sent) that
// expires at exp.
func v2Presign(t *testing.T, method, path string, exp int64, amz map[string]string) string {
	t.Helper()
	var hdrs string
	for k, v := range amz {
		hdrs += strings.ToLower(k) + ":" + v + "\n"
	}
	sig := v2Sign(method, "", "", strconv.FormatInt(exp, 10), hdrs, path)
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return "http://" + testHost + path + sep + "AWSAccessKeyId=" + testAK + "&Expires=" + strconv.FormatInt(exp, 10) +
		"&Signature=" + url.QueryEscape(sig)
}

// TestSigV2BucketResource: boto3 (signature_version "s3", path style) sends
// GET /bucket but signs the canonical resource /bucket/, as S3 defines it;
// minio-go and s3cmd send and sign /bucket/.
func TestSigV2BucketResource(t *testing.T) {
	date := t0.Format(http.TimeFormat)
	for _, tc := range []struct {
		name, method, sent, signed string
		want                       string
	}{
		{"HeadBucket as boto3", "HEAD", "/bucket", "/bucket/", ""},
		{"ListObjects as boto3", "GET", "/bucket?encoding-type=url", "/bucket/", ""},
		{"GetBucketAcl as boto3", "GET", "/bucket?acl", "/bucket/?acl", ""},
		{"CreateBucket as boto3", "PUT", "/bucket", "/bucket/", ""},
		{"DeleteBucket as boto3", "DELETE", "/bucket", "/bucket/", ""},
		{"bucket with slash as minio-go", "GET", "/bucket/", "/bucket/", ""},
		{"bucket signed as sent", "GET", "/bucket", "/bucket", ""},
		{"ListBuckets", "GET", "/", "/", ""},
		{"object key is not a bucket", "GET", "/bucket/key", "/bucket/key/", CodeSignatureDoesNotMatch},
		{"other bucket", "GET", "/bucket", "/other/", CodeSignatureDoesNotMatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRequest(t, tc.method, "http://"+testHost+tc.sent, "")
			r.Header.Set("Date", date)
			r.Header.Set("Authorization", "AWS "+testAK+":"+v2Sign(tc.method, "", "", date, "", tc.signed))
			_, err := newVerifier(t0).Verify(overTheWire(t, r))
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
			if tc.want == CodeSignatureDoesNotMatch {
				sts, _ := detail(err, "StringToSign")
				if want := "\n" + date + "\n" + v2BucketResource(strings.SplitN(tc.sent, "?", 2)[0]); !strings.HasSuffix(sts, want) {
					t.Fatalf("StringToSign %q, want suffix %q", sts, want)
				}
			}
		})
	}
}

// TestSigV2Hardening: empty x-amz-date, the 7-day limit on presigned
// expiry, and x-amz-* headers being covered by a presigned V2 signature.
func TestSigV2Hardening(t *testing.T) {
	date := t0.Format(http.TimeFormat)
	week := int64(maxPresignExpiry)
	tests := []struct {
		name string
		req  func(t *testing.T) *http.Request
		want string
	}{
		{name: "empty x-amz-date with a valid Date", req: func(t *testing.T) *http.Request {
			r := mustRequest(t, "GET", "http://"+testHost+"/bucket/k", "")
			r.Header.Set("Date", date)
			r.Header.Set("X-Amz-Date", "")
			r.Header.Set("Authorization", "AWS "+testAK+":"+v2Sign("GET", "", "", date, "x-amz-date:\n", "/bucket/k"))
			return r
		}, want: CodeAccessDenied},
		{name: "x-amz-date signed", req: func(t *testing.T) *http.Request {
			r := mustRequest(t, "GET", "http://"+testHost+"/bucket/k", "")
			r.Header.Set("X-Amz-Date", date)
			r.Header.Set("Authorization", "AWS "+testAK+":"+v2Sign("GET", "", "", "", "x-amz-date:"+date+"\n", "/bucket/k"))
			return r
		}, want: ""},
		{name: "presigned expires in a week", req: func(t *testing.T) *http.Request {
			return mustRequest(t, "GET", v2Presign(t, "GET", "/bucket/k", t0.Unix()+week, nil), "")
		}, want: ""},
		{name: "presigned expires beyond a week", req: func(t *testing.T) *http.Request {
			return mustRequest(t, "GET", v2Presign(t, "GET", "/bucket/k", t0.Unix()+week+1, nil), "")
		}, want: CodeAccessDenied},
		{name: "presigned expires at the end of time", req: func(t *testing.T) *http.Request {
			return mustRequest(t, "GET", v2Presign(t, "GET", "/bucket/k", 1<<63-1, nil), "")
		}, want: CodeAccessDenied},
		{name: "presigned with a signed x-amz header", req: func(t *testing.T) *http.Request {
			r := mustRequest(t, "PUT", v2Presign(t, "PUT", "/bucket1/slot", t0.Unix()+60, map[string]string{"x-amz-meta-a": "1"}), "")
			r.Header.Set("X-Amz-Meta-A", "1")
			return r
		}, want: ""},
		{name: "presigned with an added x-amz-copy-source", req: func(t *testing.T) *http.Request {
			r := mustRequest(t, "PUT", v2Presign(t, "PUT", "/bucket1/slot", t0.Unix()+60, nil), "")
			r.Header.Set("X-Amz-Copy-Source", "/bucket2/secret")
			return r
		}, want: CodeSignatureDoesNotMatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newVerifier(t0).Verify(overTheWire(t, tc.req(t)))
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
		})
	}
}

// TestErrorDetails: the elements S3 adds to InvalidAccessKeyId and
// SignatureDoesNotMatch, so a client can see which key and what was signed.
func TestErrorDetails(t *testing.T) {
	c := headerCase{method: "PUT", key: "obj", body: []byte("x")}
	t.Run("InvalidAccessKeyId", func(t *testing.T) {
		r := overTheWire(t, signHeader(t, c, testSK, t0))
		r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), testAK, "AKIDUNKNOWN", 1))
		_, err := newVerifier(t0).Verify(r)
		if got, ok := detail(err, "AWSAccessKeyId"); !ok || got != "AKIDUNKNOWN" {
			t.Fatalf("AWSAccessKeyId = %q, %v (err %v)", got, ok, err)
		}
	})
	t.Run("SignatureDoesNotMatch", func(t *testing.T) {
		r := overTheWire(t, signHeader(t, c, "wrong secret", t0))
		_, err := newVerifier(t0).Verify(r)
		if errCode(err) != CodeSignatureDoesNotMatch {
			t.Fatalf("err %v", err)
		}
		ak, _ := detail(err, "AWSAccessKeyId")
		sts, _ := detail(err, "StringToSign")
		creq, _ := detail(err, "CanonicalRequest")
		provided, _ := detail(err, "SignatureProvided")
		if ak != testAK || !strings.HasPrefix(sts, sigV4Algorithm+"\n"+t0.Format(iso8601Format)+"\n") ||
			!strings.HasSuffix(sts, sha256Hex256([]byte(creq))) || !strings.HasPrefix(creq, "PUT\n/bucket/obj\n") ||
			!strings.Contains(r.Header.Get("Authorization"), "Signature="+provided) {
			t.Fatalf("details: ak %q sts %q creq %q provided %q", ak, sts, creq, provided)
		}
		if strings.Contains(err.Error(), testSK) || strings.Contains(sts+creq, testSK) {
			t.Fatal("secret in the error")
		}
	})
}
