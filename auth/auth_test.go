package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

const (
	testAK     = "AKIDEXAMPLE"
	testSK     = "wJalr/XUtnFEMI+K7MDENG=bPxRfiCYEXAMPLEKEY"
	testRegion = "us-east-1"
	testHost   = "127.0.0.1:9000"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newVerifier(now time.Time) *Verifier {
	return &Verifier{
		Region: testRegion,
		Creds:  StaticCredentials{testAK: testSK},
		Now:    func() time.Time { return now },
	}
}

// overTheWire serializes a client request and parses it back the way the
// server's net/http does: RequestURI, Host, Content-Length and
// Transfer-Encoding end up exactly where a handler would find them.
func overTheWire(t testing.TB, req *http.Request) *http.Request {
	t.Helper()
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil {
		t.Fatalf("write request: %v", err)
	}
	sr, err := http.ReadRequest(bufio.NewReader(&buf))
	if err != nil {
		t.Fatalf("read request: %v", err)
	}
	return sr
}

func sha256Hex256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// errCode returns the *Error code of err, or "" (and the error text) if err
// is not an *Error.
func errCode(err error) string {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	if err != nil {
		return "non-auth error: " + err.Error()
	}
	return ""
}

// readBody reads a verified body fully and returns its bytes and the error
// code that stopped it ("" for a clean EOF).
func readBody(t testing.TB, res *Result) ([]byte, string) {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	return b, errCode(err)
}

// s3Path escapes an object key the way S3 clients put it on the wire.
func s3Path(bucket, key string) string {
	return "/" + bucket + "/" + uriEncode(key, false)
}

type headerCase struct {
	name     string
	method   string
	key      string
	rawQuery string
	headers  map[string]string
	body     []byte
	payload  string // x-amz-content-sha256; "" means the body's SHA-256
}

var headerCases = []headerCase{
	{name: "simple GET", method: "GET", key: "simple.txt"},
	{name: "key with spaces", method: "PUT", key: "with  space s.txt", body: []byte("hello")},
	{name: "plus and equals", method: "PUT", key: "a+b=c&d;e,f:g@h$i!j'k(l)m*n.txt", body: []byte("x")},
	{name: "unicode", method: "PUT", key: "ünïcødé/ключ/日本語.txt", body: []byte("ü")},
	{name: "double slash and dots", method: "GET", key: "a//b/../c/./d"},
	{name: "key with ? and #", method: "GET", key: "q?x=1#frag%2F"},
	{name: "query string", method: "GET", key: "", rawQuery: "prefix=a%20b&delimiter=%2F&list-type=2&continuation-token=x%2By%3D&max-keys=10"},
	{name: "query keys without value", method: "POST", key: "big.bin", rawQuery: "uploads"},
	{name: "query repeated and unsorted", method: "GET", key: "k", rawQuery: "z=2&a=b&a=a&partNumber=1&uploadId=abc%2Fdef%2Bg"},
	{name: "unsigned payload", method: "PUT", key: "u.bin", body: []byte("unsigned body"), payload: unsignedPayload},
	{name: "signed headers with inner spaces", method: "PUT", key: "m.txt", body: []byte("meta"),
		headers: map[string]string{"X-Amz-Meta-Note": "  lots   of    spaces  ", "Content-Type": "text/plain;  charset=utf-8", "Cache-Control": "no-cache"}},
	{name: "empty body PUT", method: "PUT", key: "empty", body: []byte{}},
}

// signHeader signs c with the aws-sdk-go-v2 v4 signer the way the S3 client
// does (no path re-escaping), then restores the query string exactly as it
// was written, so the server sees a non-canonical wire query.
func signHeader(t testing.TB, c headerCase, secret string, when time.Time) *http.Request {
	t.Helper()
	u := "http://" + testHost + s3Path("bucket", c.key)
	if c.rawQuery != "" {
		u += "?" + c.rawQuery
	}
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, u, body)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	payload := c.payload
	if payload == "" {
		payload = sha256Hex256(c.body)
	}
	req.Header.Set("X-Amz-Content-Sha256", payload)
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: testAK, SecretAccessKey: secret}
	if err := signer.SignHTTP(context.Background(), creds, req, payload, "s3", testRegion, when); err != nil {
		t.Fatalf("sign: %v", err)
	}
	req.URL.RawQuery = c.rawQuery
	return req
}

func TestHeaderAuthAcceptsSDKSignatures(t *testing.T) {
	for _, c := range headerCases {
		t.Run(c.name, func(t *testing.T) {
			req := overTheWire(t, signHeader(t, c, testSK, t0))
			res, err := newVerifier(t0.Add(3 * time.Minute)).Verify(req)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if res.AccessKey != testAK || res.Anonymous {
				t.Fatalf("result = %+v", res)
			}
			got, code := readBody(t, res)
			if code != "" {
				t.Fatalf("body read error %s", code)
			}
			if !bytes.Equal(got, c.body) && !(len(got) == 0 && len(c.body) == 0) {
				t.Fatalf("body = %q, want %q", got, c.body)
			}
			if want := int64(len(c.body)); res.DecodedLength != want {
				t.Fatalf("DecodedLength = %d, want %d", res.DecodedLength, want)
			}
		})
	}
}

func TestHeaderAuthRejects(t *testing.T) {
	base := headerCase{method: "PUT", key: "obj", body: []byte("payload")}
	tests := []struct {
		name   string
		secret string
		signed time.Time
		now    time.Time
		mutate func(r *http.Request)
		want   string // Verify error code
	}{
		{name: "wrong secret", secret: "wrong", want: CodeSignatureDoesNotMatch},
		{name: "unknown key", mutate: func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), testAK, "AKIDUNKNOWN", 1))
		}, want: CodeInvalidAccessKeyID},
		{name: "stale date", signed: t0.Add(-16 * time.Minute), want: CodeRequestTimeTooSkewed},
		{name: "future date", signed: t0.Add(16 * time.Minute), want: CodeRequestTimeTooSkewed},
		{name: "skew just inside", signed: t0.Add(-14 * time.Minute), want: ""},
		{name: "clock skewed via Now", now: t0.Add(time.Hour), want: CodeRequestTimeTooSkewed},
		{name: "tampered signed header", mutate: func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", sha256Hex256([]byte("other"))) }, want: CodeSignatureDoesNotMatch},
		{name: "tampered path", mutate: func(r *http.Request) { r.RequestURI = "/bucket/obj2" }, want: CodeSignatureDoesNotMatch},
		{name: "tampered query", mutate: func(r *http.Request) { r.URL.RawQuery = "acl" }, want: CodeSignatureDoesNotMatch},
		{name: "tampered host port", mutate: func(r *http.Request) { r.Host = "127.0.0.1" }, want: CodeSignatureDoesNotMatch},
		{name: "tampered signature", mutate: func(r *http.Request) {
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", a[:len(a)-4]+"0000")
		}, want: CodeSignatureDoesNotMatch},
		{name: "missing content sha256", mutate: func(r *http.Request) { r.Header.Del("X-Amz-Content-Sha256") }, want: CodeInvalidRequest},
		{name: "invalid content sha256", mutate: func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "nothex") }, want: CodeInvalidArgument},
		{name: "missing date", mutate: func(r *http.Request) { r.Header.Del("X-Amz-Date") }, want: CodeAccessDenied},
		{name: "credential date differs", mutate: func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), t0.Format("/20060102/"), "/20251231/", 1))
		}, want: CodeAuthorizationHeaderMalformed},
		{name: "wrong region", mutate: func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/us-east-1/", "/eu-west-1/", 1))
		}, want: CodeAuthorizationHeaderMalformed},
		{name: "malformed header", mutate: func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x") }, want: CodeAuthorizationHeaderMalformed},
		{name: "unsupported scheme", mutate: func(r *http.Request) { r.Header.Set("Authorization", "Bearer abc") }, want: CodeAuthorizationHeaderMalformed},
		{name: "header and query auth", mutate: func(r *http.Request) { r.URL.RawQuery = "X-Amz-Signature=abc" }, want: CodeInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			secret, signed, now := testSK, t0, t0
			if tc.secret != "" {
				secret = tc.secret
			}
			if !tc.signed.IsZero() {
				signed = tc.signed
			}
			if !tc.now.IsZero() {
				now = tc.now
			}
			req := overTheWire(t, signHeader(t, base, secret, signed))
			if tc.mutate != nil {
				tc.mutate(req)
			}
			_, err := newVerifier(now).Verify(req)
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
		})
	}
}

func TestPayloadHashMismatch(t *testing.T) {
	c := headerCase{method: "PUT", key: "obj", body: []byte("the real body"), payload: sha256Hex256([]byte("another body"))}
	res, err := newVerifier(t0).Verify(overTheWire(t, signHeader(t, c, testSK, t0)))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if _, code := readBody(t, res); code != CodeXAmzContentSHA256Mismatch {
		t.Fatalf("read code = %q, want %s", code, CodeXAmzContentSHA256Mismatch)
	}
	// The error is sticky: a second read must not turn into io.EOF.
	if _, err := res.Body.Read(make([]byte, 10)); errCode(err) != CodeXAmzContentSHA256Mismatch {
		t.Fatalf("second read: %v", err)
	}
}

// TestTakeSignedSHA256 checks the hand-over of a signed payload check: only a
// body not yet read, of a request that signed its payload's SHA-256, hands
// it over; it then passes every byte through unchecked (the caller checks),
// while a body that hands nothing over keeps its own check.
func TestTakeSignedSHA256(t *testing.T) {
	real, other := []byte("the real body"), []byte("another body")
	for _, tc := range []struct {
		name     string
		payload  string
		readOne  bool   // read a byte before the hand-over
		want     []byte // the content whose SHA-256 is handed over; nil: none
		readCode string // the error code of reading the rest
	}{
		{name: "signed, right hash", payload: sha256Hex256(real), want: real},
		{name: "signed, wrong hash: the caller checks", payload: sha256Hex256(other), want: other},
		{name: "signed, already read: auth checks", payload: sha256Hex256(other), readOne: true, readCode: CodeXAmzContentSHA256Mismatch},
		{name: "unsigned", payload: unsignedPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := headerCase{method: "PUT", key: "obj", body: real, payload: tc.payload}
			res, err := newVerifier(t0).Verify(overTheWire(t, signHeader(t, c, testSK, t0)))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			var head []byte
			if tc.readOne {
				head = make([]byte, 1)
				if _, err := io.ReadFull(res.Body, head); err != nil {
					t.Fatalf("first byte: %v", err)
				}
			}
			got := TakeSignedSHA256(res.Body)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("handed over %x, want nothing", *got)
			case tc.want != nil && (got == nil || *got != sha256.Sum256(tc.want)):
				t.Fatalf("handed over %v, want the SHA-256 of %q", got, tc.want)
			}
			if again := TakeSignedSHA256(res.Body); again != nil {
				t.Fatalf("handed over twice")
			}
			b, code := readBody(t, res)
			if code != tc.readCode {
				t.Fatalf("read code = %q, want %q", code, tc.readCode)
			}
			if code == "" && string(append(head, b...)) != string(real) {
				t.Fatalf("body = %q", append(head, b...))
			}
		})
	}
}

func TestAnonymous(t *testing.T) {
	req := overTheWire(t, mustRequest(t, "PUT", "http://"+testHost+"/bucket/key", "abc"))
	res, err := newVerifier(t0).Verify(req)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !res.Anonymous || res.AccessKey != "" || res.DecodedLength != 3 {
		t.Fatalf("result = %+v", res)
	}
	if b, code := readBody(t, res); string(b) != "abc" || code != "" {
		t.Fatalf("body %q code %q", b, code)
	}
}

func mustRequest(t testing.TB, method, u, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func presignClient() *s3.PresignClient {
	return s3.NewPresignClient(s3.New(s3.Options{
		Region:       testRegion,
		Credentials:  credentials.NewStaticCredentialsProvider(testAK, testSK, ""),
		BaseEndpoint: aws.String("http://" + testHost),
		UsePathStyle: true,
	}))
}

// presignedRequest turns a presigned URL into the request a client sends.
func presignedRequest(t testing.TB, p *v4.PresignedHTTPRequest, body string) (*http.Request, time.Time) {
	t.Helper()
	req := mustRequest(t, p.Method, p.URL, body)
	for k, vv := range p.SignedHeader {
		if strings.EqualFold(k, "Host") {
			continue
		}
		for _, v := range vv {
			req.Header.Add(k, v)
		}
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	signedAt, err := time.Parse(iso8601Format, u.Query().Get("X-Amz-Date"))
	if err != nil {
		t.Fatalf("X-Amz-Date: %v", err)
	}
	return overTheWire(t, req), signedAt
}

func TestPresignedSDK(t *testing.T) {
	ctx := context.Background()
	pc := presignClient()
	keys := []string{"simple", "with space", "plus+equals=", "ünï/ключ", "a//b/../c", "q?x&y=z"}
	for _, key := range keys {
		t.Run("GET "+key, func(t *testing.T) {
			p, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key),
				ResponseContentType: aws.String("text/plain; charset=utf-8")}, s3.WithPresignExpires(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			req, at := presignedRequest(t, p, "")
			res, err := newVerifier(at.Add(59 * time.Minute)).Verify(req)
			if err != nil {
				t.Fatalf("Verify %s: %v", p.URL, err)
			}
			if res.AccessKey != testAK {
				t.Fatalf("access key %q", res.AccessKey)
			}
		})
		t.Run("PUT "+key, func(t *testing.T) {
			p, err := pc.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key),
				ContentType: aws.String("application/octet-stream")}, s3.WithPresignExpires(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			req, at := presignedRequest(t, p, "presigned body")
			res, err := newVerifier(at).Verify(req)
			if err != nil {
				t.Fatalf("Verify %s: %v", p.URL, err)
			}
			if b, code := readBody(t, res); string(b) != "presigned body" || code != "" {
				t.Fatalf("body %q code %q", b, code)
			}
		})
	}
}

func TestPresignedRejects(t *testing.T) {
	ctx := context.Background()
	p, err := presignClient().PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k")},
		s3.WithPresignExpires(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		offset time.Duration // Now relative to the signing time
		mutate func(q url.Values)
		want   string
	}{
		{name: "valid at the last second", offset: 60 * time.Second, want: ""},
		{name: "expired", offset: 61 * time.Second, want: CodeAccessDenied},
		{name: "dated in the future", offset: -16 * time.Minute, want: CodeAccessDenied},
		{name: "slightly in the future", offset: -time.Minute, want: ""},
		{name: "expires zero", mutate: func(q url.Values) { q.Set("X-Amz-Expires", "0") }, want: CodeAuthorizationQueryParametersError},
		{name: "expires not a number", mutate: func(q url.Values) { q.Set("X-Amz-Expires", "1h") }, want: CodeAuthorizationQueryParametersError},
		{name: "missing signature", mutate: func(q url.Values) { q.Del("X-Amz-Signature") }, want: CodeAuthorizationQueryParametersError},
		{name: "wrong algorithm", mutate: func(q url.Values) { q.Set("X-Amz-Algorithm", "AWS4-HMAC-SHA1") }, want: CodeAuthorizationQueryParametersError},
		{name: "wrong region", mutate: func(q url.Values) {
			q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), "us-east-1", "eu-west-1", 1))
		}, want: CodeAuthorizationQueryParametersError},
		{name: "unknown key", mutate: func(q url.Values) {
			q.Set("X-Amz-Credential", strings.Replace(q.Get("X-Amz-Credential"), testAK, "AKIDOTHER", 1))
		}, want: CodeInvalidAccessKeyID},
		{name: "tampered parameter", mutate: func(q url.Values) { q.Set("response-content-type", "text/html") }, want: CodeSignatureDoesNotMatch},
		{name: "extended expiry", mutate: func(q url.Values) { q.Set("X-Amz-Expires", "3600") }, want: CodeSignatureDoesNotMatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, at := presignedRequest(t, p, "")
			if tc.mutate != nil {
				q := req.URL.Query()
				tc.mutate(q)
				req.URL.RawQuery = q.Encode()
			}
			_, err := newVerifier(at.Add(tc.offset)).Verify(req)
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
		})
	}
}

// TestPresignedExpiryLimit signs X-Amz-Expires values itself (the presign
// client would refuse), so the signature is valid and only the limit decides.
func TestPresignedExpiryLimit(t *testing.T) {
	for _, tc := range []struct {
		expires string
		want    string
	}{
		{"604800", ""},
		{"604801", CodeAuthorizationQueryParametersError},
		{"1", ""},
	} {
		t.Run(tc.expires, func(t *testing.T) {
			req := mustRequest(t, "GET", "http://"+testHost+"/bucket/key?X-Amz-Expires="+tc.expires, "")
			signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
			u, _, err := signer.PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSK},
				req, unsignedPayload, "s3", testRegion, t0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = newVerifier(t0).Verify(overTheWire(t, mustRequest(t, "GET", u, "")))
			if got := errCode(err); got != tc.want {
				t.Fatalf("code = %q, want %q (err %v)", got, tc.want, err)
			}
		})
	}
}

func TestStripAWSChunked(t *testing.T) {
	for in, want := range map[string]string{
		"":                   "",
		"aws-chunked":        "",
		"gzip":               "gzip",
		"aws-chunked,gzip":   "gzip",
		"gzip, aws-chunked":  "gzip",
		"AWS-Chunked , br":   "br",
		"gzip,aws-chunked,x": "gzip,x",
	} {
		if got := StripAWSChunked(in); got != want {
			t.Errorf("StripAWSChunked(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorHTTPStatus(t *testing.T) {
	for code, want := range map[string]int{
		CodeSignatureDoesNotMatch:        403,
		CodeAccessDenied:                 403,
		CodeInvalidAccessKeyID:           403,
		CodeRequestTimeTooSkewed:         403,
		CodeAuthorizationHeaderMalformed: 400,
		CodeXAmzContentSHA256Mismatch:    400,
		CodeIncompleteBody:               400,
		CodeInternalError:                500,
	} {
		if got := (&Error{Code: code}).HTTPStatus(); got != want {
			t.Errorf("%s: status %d, want %d", code, got, want)
		}
	}
}

type failingStore struct{}

func (failingStore) Lookup(context.Context, string) (string, bool, error) {
	return "", false, errors.New("db down")
}

func TestCredentialStoreFailure(t *testing.T) {
	v := newVerifier(t0)
	v.Creds = failingStore{}
	_, err := v.Verify(overTheWire(t, signHeader(t, headerCases[0], testSK, t0)))
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeInternalError || ae.Unwrap() == nil {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), testSK) {
		t.Fatal("secret leaked into the error")
	}
}

// TestCanonicalHeadersServerSide covers what the SDK oracle cannot sign:
// User-Agent, and Transfer-Encoding/Content-Length/Host that net/http moves
// out of the header map on the server.
func TestCanonicalHeadersServerSide(t *testing.T) {
	raw := "PUT /b/k HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent:   aws-cli/2.0   Python/3  \r\n" +
		"Transfer-Encoding: chunked\r\nX-Amz-Meta-A: one\r\nX-Amz-Meta-A: two  words\r\n\r\n0\r\n\r\n"
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	got := string(appendCanonicalHeaders(nil, r, []string{"host", "transfer-encoding", "user-agent", "x-amz-meta-a"}))
	want := "host:example.com:8080\ntransfer-encoding:chunked\nuser-agent:aws-cli/2.0 Python/3\nx-amz-meta-a:one,two words\n"
	if got != want {
		t.Fatalf("canonical headers\n got %q\nwant %q", got, want)
	}
	raw = "PUT /b/k HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
	if r, err = http.ReadRequest(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if got := string(appendCanonicalHeaders(nil, r, []string{"content-length"})); got != "content-length:3\n" {
		t.Fatalf("content-length: %q", got)
	}
}

func TestParseHTTPDate(t *testing.T) {
	want := time.Date(2007, 3, 27, 19, 36, 42, 0, time.UTC)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"Tue, 27 Mar 2007 19:36:42 GMT", true},
		{"Tue, 27 Mar 2007 19:36:42 +0000", true}, // s3cmd, AWS's SigV2 examples
		{"Tue, 27 Mar 2007 21:36:42 +0200", true},
		{"Tuesday, 27-Mar-07 19:36:42 GMT", true},
		{"20070327T193642Z", false},
		{"yesterday", false},
	} {
		got, err := parseHTTPDate(tc.in)
		if (err == nil) != tc.ok || (tc.ok && !got.Equal(want)) {
			t.Errorf("parseHTTPDate(%q) = %v, %v; want ok=%v %v", tc.in, got, err, tc.ok, want)
		}
	}
}
