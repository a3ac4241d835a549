// Package conformance is the end-to-end suite: real S3 clients (aws-sdk-go-v2,
// minio-go, the aws cli) against a live gateway over HTTP and HTTPS. Pointed at
// another endpoint (S3GATE_CONFORMANCE_ENDPOINT) it doubles as a compatibility
// check for any S3 server.
package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// combo is one cell of the engine × transport matrix.
type combo struct {
	Engine    string
	Transport string // "http" or "https"
}

func (c combo) TLS() bool { return c.Transport == "https" }

// combos lists the matrix: every large engine over both transports, or a
// single cell when the suite runs against an external endpoint.
func combos() []combo {
	if testgw.External() {
		tr := "http"
		if strings.HasPrefix(strings.ToLower(os.Getenv("S3GATE_CONFORMANCE_ENDPOINT")), "https") {
			tr = "https"
		}
		return []combo{{Engine: "external", Transport: tr}}
	}
	var out []combo
	for _, e := range testgw.Engines() {
		for _, tr := range []string{"http", "https"} {
			out = append(out, combo{Engine: e, Transport: tr})
		}
	}
	return out
}

// EnvFullMatrix makes every suite run the whole engine × transport matrix
// (make test-full); by default suites whose code path does not depend on the
// transport run the lighter cut of lightCombos.
const EnvFullMatrix = "S3GATE_FULL_MATRIX"

// lightCombos is the lighter cut of the matrix: every engine once, the
// transports alternating so that both are covered (embedded and pglo over
// HTTPS, pgchunks and local over HTTP). With S3GATE_FULL_MATRIX set it is
// the whole matrix.
func lightCombos() []combo {
	all := combos()
	if testgw.External() || os.Getenv(EnvFullMatrix) != "" {
		return all
	}
	var out []combo
	for i, e := range testgw.Engines() {
		tr := "https"
		if i%2 == 1 {
			tr = "http"
		}
		out = append(out, combo{Engine: e, Transport: tr})
	}
	return out
}

// forEachEngine is forEachCombo over lightCombos: for suites whose requests
// do not change with the transport (the SDK and minio-go suites, whose
// signing and chunking do, keep the whole matrix).
// metaCells are the cells of what depends on the metadata engine but not on
// the content engine or the transport: the embedded default and one
// PostgreSQL engine, or the external gateway.
func metaCells() []string {
	if testgw.External() {
		return []string{"external"}
	}
	return []string{testgw.Embedded, config.EnginePGChunks}
}

func forEachEngine(t *testing.T, fn func(t *testing.T, c combo, gw *testgw.Gateway)) {
	t.Helper()
	runCells(t, lightCombos(), fn)
}

// forEachCombo starts one gateway per matrix cell and runs fn as a parallel
// subtest named "engine/transport"; fn's own subtests share that gateway.
func forEachCombo(t *testing.T, fn func(t *testing.T, c combo, gw *testgw.Gateway)) {
	t.Helper()
	runCells(t, combos(), fn)
}

// runCells starts one gateway per cell and runs fn as a parallel subtest
// named "engine/transport".
func runCells(t *testing.T, cells []combo, fn func(t *testing.T, c combo, gw *testgw.Gateway)) {
	t.Helper()
	for _, c := range cells {
		t.Run(fmt.Sprintf("%s/%s", c.Engine, c.Transport), func(t *testing.T) {
			// Cells run side by side (up to -parallel, GOMAXPROCS by default):
			// much of a cell's time is waiting on clients, fsync and commits.
			t.Parallel()
			gw := testgw.Start(t, testgw.Options{Engine: c.Engine, TLS: c.TLS()})
			fn(t, c, gw)
		})
	}
}

// testCtx is a context bounded well below the go test timeout so a hung
// request fails one test instead of the whole binary.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// --- clients -----------------------------------------------------------------

// sdkClient is aws-sdk-go-v2 with its default settings (default request
// checksums and response validation) in path style, trusting the test CA.
func sdkClient(t testing.TB, gw *testgw.Gateway, opts ...func(*s3.Options)) *s3.Client {
	return sdkClientWithKeys(t, gw, gw.AccessKey, gw.SecretKey, opts...)
}

func sdkClientWithKeys(t testing.TB, gw *testgw.Gateway, ak, sk string, opts ...func(*s3.Options)) *s3.Client {
	t.Helper()
	// Built by hand rather than by config.LoadDefaultConfig so that the
	// machine's AWS_* variables and shared files (AWS_CA_BUNDLE, profiles) do not
	// leak in; the S3 client still applies all its defaults (checksums, retries).
	cfg := aws.Config{
		Region:      gw.Region,
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, ""),
		HTTPClient:  gw.HTTPClient,
	}
	all := append([]func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(gw.Endpoint)
		o.UsePathStyle = true
	}}, opts...)
	return s3.NewFromConfig(cfg, all...)
}

// minioClient is minio-go v7 in path style over the gateway's transport.
func minioClient(t testing.TB, gw *testgw.Gateway) *minio.Client {
	t.Helper()
	u, err := url.Parse(gw.Endpoint)
	if err != nil {
		t.Fatalf("parse endpoint: %v", err)
	}
	mc, err := minio.New(u.Host, &minio.Options{
		Creds:        miniocreds.NewStaticV4(gw.AccessKey, gw.SecretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       gw.Region,
		Transport:    gw.HTTPClient.Transport,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatalf("minio client: %v", err)
	}
	return mc
}

// bucketName returns a fresh, valid, unique bucket name so that tests never
// collide, also on a shared external endpoint.
func bucketName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("s3gate-%s-%s", prefix, hex.EncodeToString(b[:]))
}

// mustBucket creates a bucket with the SDK and removes it (and what is left in
// it) at the end of the test.
func mustBucket(t *testing.T, c *s3.Client, prefix string) string {
	t.Helper()
	name := bucketName(prefix)
	ctx := testCtx(t, time.Minute)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("CreateBucket %s: %v", name, err)
	}
	t.Cleanup(func() { emptyAndDelete(t, c, name) })
	return name
}

// emptyAndDelete removes every object and upload of a bucket, then the bucket.
// Failures are logged: the gateway is thrown away anyway, but an external
// endpoint should be left clean.
func emptyAndDelete(t testing.TB, c *s3.Client, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Logf("cleanup list %s: %v", bucket, err)
			return
		}
		for _, o := range page.Contents {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
				t.Logf("cleanup delete %s/%s: %v", bucket, aws.ToString(o.Key), err)
			}
		}
	}
	if ups, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)}); err == nil {
		for _, u := range ups.Uploads {
			_, _ = c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId})
		}
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Logf("cleanup delete bucket %s: %v", bucket, err)
	}
}

// --- data --------------------------------------------------------------------

// genReader yields size deterministic pseudo-random bytes for a seed, without
// buffering them: the same seed always gives the same stream.
func genReader(seed uint64, size int64) io.Reader {
	return io.LimitReader(mrand.NewChaCha8(seedBytes(seed)), size)
}

func seedBytes(seed uint64) [32]byte {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	copy(s[8:], "s3gate-conformance-generator!!")
	return s
}

// genBytes is genReader materialized, for sizes that fit comfortably in memory.
func genBytes(seed uint64, size int) []byte {
	b := make([]byte, size)
	if _, err := io.ReadFull(genReader(seed, int64(size)), b); err != nil {
		panic(err) // the generator cannot fail
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// shaReader hashes a stream without buffering it and returns hash and length.
func shaReader(r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

func sumHex(h hash.Hash, b []byte) string {
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// --- errors ------------------------------------------------------------------

// apiCode returns the S3 error code of an SDK error ("" if there is none).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// httpStatus returns the HTTP status of an SDK error (0 if there is none).
func httpStatus(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// wantAPIError fails unless err carries the S3 error code want.
func wantAPIError(t testing.TB, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want error %s", want)
	}
	if got := apiCode(err); got != want {
		t.Fatalf("got error code %q (status %d, %v), want %s", got, httpStatus(err), err, want)
	}
}

// wantStatus fails unless err is an HTTP error with the given status (for
// HEAD and 304 answers, which carry no error body).
func wantStatus(t testing.TB, err error, want int) {
	t.Helper()
	if err == nil {
		t.Fatalf("got success, want HTTP %d", want)
	}
	if got := httpStatus(err); got != want {
		t.Fatalf("got HTTP %d (%v), want %d", got, err, want)
	}
}

// s3Error is the XML error body of S3.
type s3Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// errorCode parses an S3 XML error body ("" if it is not one).
func errorCode(body []byte) string {
	var e s3Error
	if xml.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Code
}

// --- raw signed requests ------------------------------------------------------

// rawReq describes a request built by hand, for input that the SDKs refuse to
// send; it is signed with the aws-sdk-go-v2 v4 signer.
type rawReq struct {
	Method  string
	Path    string // already escaped, e.g. "/bucket/key"
	Query   url.Values
	Header  http.Header
	Body    []byte
	Stream  io.Reader // used instead of Body when set (size in Length)
	Length  int64
	Payload string    // x-amz-content-sha256; default: SHA-256 of Body
	Time    time.Time // signing time; default now
	AK, SK  string    // default: the gateway's keys
}

// newRawRequest builds and signs the request without sending it.
func newRawRequest(t testing.TB, ctx context.Context, gw *testgw.Gateway, r rawReq) *http.Request {
	t.Helper()
	u := gw.Endpoint + r.Path
	if len(r.Query) > 0 {
		u += "?" + strings.ReplaceAll(r.Query.Encode(), "+", "%20")
	}
	var body io.Reader = bytes.NewReader(r.Body)
	length := int64(len(r.Body))
	if r.Stream != nil {
		body, length = r.Stream, r.Length
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, body)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.ContentLength = length
	if length == 0 {
		req.Body = http.NoBody
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	payload := r.Payload
	if payload == "" {
		payload = sha(r.Body)
	}
	req.Header.Set("X-Amz-Content-Sha256", payload)
	ak, sk := r.AK, r.SK
	if ak == "" {
		ak, sk = gw.AccessKey, gw.SecretKey
	}
	at := r.Time
	if at.IsZero() {
		at = time.Now()
	}
	creds := aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, payload, "s3", gw.Region, at); err != nil {
		t.Fatalf("sign: %v", err)
	}
	return req
}

// doRaw sends a raw signed request and returns status, headers and body.
func doRaw(t testing.TB, gw *testgw.Gateway, r rawReq) (int, http.Header, []byte) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	return send(t, gw, newRawRequest(t, ctx, gw, r))
}

func send(t testing.TB, gw *testgw.Gateway, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := gw.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Redacted(), err)
	}
	return resp.StatusCode, resp.Header, body
}

// wantRawError fails unless a raw response is an S3 error with that status and code.
func wantRawError(t testing.TB, what string, status int, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	if status != wantStatus || errorCode(body) != wantCode {
		t.Fatalf("%s: got HTTP %d code %q, want HTTP %d %s; body: %.400s", what, status, errorCode(body), wantStatus, wantCode, body)
	}
}

// presignRaw presigns a GET with the v4 signer at a chosen time and lifetime.
func presignRaw(t testing.TB, gw *testgw.Gateway, path string, at time.Time, expires time.Duration) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, gw.Endpoint+path+fmt.Sprintf("?X-Amz-Expires=%d", int(expires/time.Second)), nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	creds := aws.Credentials{AccessKeyID: gw.AccessKey, SecretAccessKey: gw.SecretKey}
	u, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", gw.Region, at)
	if err != nil {
		t.Fatalf("presign: %v", err)
	}
	return u
}

// objectAbsent fails unless HEAD of the key answers 404.
func objectAbsent(t testing.TB, c *s3.Client, bucket, key string) {
	t.Helper()
	_, err := c.HeadObject(testCtx(t, time.Minute), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if httpStatus(err) != http.StatusNotFound {
		t.Fatalf("HEAD %s/%.60s: got %v, want 404 (the failed request must leave nothing behind)", bucket, key, err)
	}
}

// listKeys lists every key of a bucket (V2, all pages).
func listKeys(t testing.TB, c *s3.Client, bucket, prefix string) []string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s: %v", bucket, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// --- wire formats ---------------------------------------------------------------

// wireLog records the payload modes (x-amz-content-sha256) and checksum headers
// that a client really put on the wire, so the suite can prove that it
// exercised the formats it claims to cover.
type wireLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[string]bool // "MODE" and "MODE+header" entries for PUT requests
}

func (w *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut {
		mode := r.Header.Get("X-Amz-Content-Sha256")
		if len(mode) == 64 && !strings.ContainsFunc(mode, func(c rune) bool { return !strings.ContainsRune("0123456789abcdef", c) }) {
			mode = "SIGNED-HEX"
		}
		w.mu.Lock()
		w.seen[mode] = true
		for _, h := range []string{"X-Amz-Checksum-Crc32", "X-Amz-Trailer"} {
			if v := r.Header.Get(h); v != "" {
				w.seen[mode+"+"+strings.ToLower(h)] = true
				if h == "X-Amz-Trailer" {
					w.seen[mode+"+trailer:"+strings.ToLower(v)] = true
				}
			}
		}
		w.mu.Unlock()
	}
	return w.next.RoundTrip(r)
}

// Saw reports whether a PUT with that entry was sent.
func (w *wireLog) Saw(entry string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[entry]
}

func (w *wireLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for k := range w.seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// recordingGateway returns a copy of gw whose HTTP client logs wire formats.
func recordingGateway(gw *testgw.Gateway) (*testgw.Gateway, *wireLog) {
	next := gw.HTTPClient.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	wl := &wireLog{next: next, seen: map[string]bool{}}
	cp := *gw
	cp.HTTPClient = &http.Client{Transport: wl}
	return &cp, wl
}
