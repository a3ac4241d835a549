package conformance

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/s3gate/s3gate/internal/testgw"
)

// vhostDomain is the base domain of the in-process gateways; against an
// external endpoint S3GATE_CONFORMANCE_DOMAIN names it.
const vhostDomain = "s3.test"

// hostLog records the Host of every request a client sends.
type hostLog struct {
	next  http.RoundTripper
	mu    sync.Mutex
	hosts []string
}

func (h *hostLog) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, r.URL.Host)
	h.mu.Unlock()
	return h.next.RoundTrip(r)
}

// sawBucketHost reports whether some request went to bucket.domain.
func (h *hostLog) sawBucketHost(bucket, domain string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.hosts, func(host string) bool { return strings.HasPrefix(host, bucket+"."+domain+":") })
}

// onlyBucketHost reports whether every request went to bucket.domain.
func (h *hostLog) onlyBucketHost(bucket, domain string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.hosts) > 0 && !slices.ContainsFunc(h.hosts, func(host string) bool { return !strings.HasPrefix(host, bucket+"."+domain+":") })
}

// vhostTransport resolves DOMAIN and every *.DOMAIN on the endpoint's port to
// the endpoint itself (a resolver in the dialer: no DNS or /etc/hosts
// needed) and refuses any other address, so no request can silently fall
// back to path style on 127.0.0.1.
func vhostTransport(t *testing.T, gw *testgw.Gateway, domain string) (*http.Transport, string) {
	t.Helper()
	target := endpointHost(t, gw)
	_, port, err := net.SplitHostPort(target)
	if err != nil {
		t.Fatalf("endpoint %s: %v", gw.Endpoint, err)
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, p, err := net.SplitHostPort(addr)
		if err != nil || p != port || (host != domain && !strings.HasSuffix(host, "."+domain)) {
			return nil, fmt.Errorf("vhost test dialer: unexpected address %q (want *.%s:%s)", addr, domain, port)
		}
		return d.DialContext(ctx, network, target)
	}
	if strings.HasPrefix(gw.Endpoint, "https:") {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if gw.CAFile != "" {
			pemBytes, err := os.ReadFile(gw.CAFile)
			if err != nil {
				t.Fatalf("read CA: %v", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pemBytes) {
				t.Fatalf("no certificate in %s", gw.CAFile)
			}
		}
		if !testgw.External() {
			// The test certificate names 127.0.0.1, localhost and
			// *.localhost, not *.s3.test: verify it (fully, chain and
			// name) as localhost's instead of skipping verification.
			cfg.ServerName = "localhost"
		}
		tr.TLSClientConfig = cfg
	}
	scheme := "http"
	if strings.HasPrefix(gw.Endpoint, "https:") {
		scheme = "https"
	}
	return tr, fmt.Sprintf("%s://%s:%s", scheme, domain, port)
}

// TestVHost drives a gateway with S3GATE_DOMAIN through virtual-host-style
// requests (bucket.DOMAIN): aws-sdk-go-v2 without UsePathStyle, and minio-go
// with BucketLookupDNS; path style keeps working beside it.
func TestVHost(t *testing.T) {
	domain := vhostDomain
	if testgw.External() {
		domain = os.Getenv("S3GATE_CONFORMANCE_DOMAIN")
		if domain == "" {
			t.Skip("S3GATE_CONFORMANCE_DOMAIN not set: skipping virtual-host-style tests against the external endpoint")
		}
	}
	for _, c := range combos() {
		if !testgw.External() && c.Engine != testgw.Embedded {
			continue // addressing does not depend on the engine
		}
		t.Run(c.Transport, func(t *testing.T) {
			t.Parallel()
			gw := testgw.Start(t, testgw.Options{Engine: c.Engine, TLS: c.TLS(), Domain: domain})
			tr, endpoint := vhostTransport(t, gw, domain)
			t.Run("aws-sdk-go-v2", func(t *testing.T) { vhostSDK(t, gw, tr, endpoint, domain) })
			t.Run("minio-go", func(t *testing.T) { vhostMinio(t, gw, tr, endpoint, domain) })
		})
	}
}

func vhostSDK(t *testing.T, gw *testgw.Gateway, tr *http.Transport, endpoint, domain string) {
	ctx := testCtx(t, 3*time.Minute)
	hl := &hostLog{next: tr}
	vgw := *gw
	vgw.HTTPClient = &http.Client{Transport: hl}
	c := sdkClient(t, &vgw, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = false // the SDK's default: virtual host whenever the bucket name allows
	})
	pgw := *gw
	pgw.HTTPClient = &http.Client{Transport: tr}
	path := sdkClient(t, &pgw, func(o *s3.Options) { o.BaseEndpoint = aws.String(endpoint) })
	bucket := bucketName("vhost")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	t.Cleanup(func() { dropBucket(t, path, bucket) })
	if !hl.sawBucketHost(bucket, domain) {
		t.Fatalf("the SDK did not address %s.%s (hosts: %q)", bucket, domain, hl.hosts)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("HeadBucket: %v", err)
	}
	objs := map[string][]byte{
		"a/b c+d=&ü.bin":  genBytes(950, 3*kib),
		"a/over-knee.bin": genBytes(951, 700*kib),
		"top":             genBytes(952, 1),
	}
	for k, b := range objs {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(b)}); err != nil {
			t.Fatalf("PutObject %s: %v", k, err)
		}
	}
	for k, b := range objs {
		readBackSDK(t, c, bucket, k, b)
		readBackSDK(t, path, bucket, k, b) // path style beside virtual host
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("a/"), Delimiter: aws.String("/")})
	if err != nil {
		t.Fatalf("ListObjectsV2: %v", err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if want := []string{"a/b c+d=&ü.bin", "a/over-knee.bin"}; !slices.Equal(keys, want) {
		t.Fatalf("ListObjectsV2 prefix a/: %q, want %q", keys, want)
	}
	// Multipart: the upload id and part number travel in the query.
	data := genBytes(953, 5*mib+1)
	mp, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("mp")})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	var parts []s3types.CompletedPart
	for i, chunk := range [][]byte{data[:5*mib], data[5*mib:]} {
		up, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("mp"), UploadId: mp.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(chunk)})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", i+1, err)
		}
		parts = append(parts, s3types.CompletedPart{ETag: up.ETag, PartNumber: aws.Int32(int32(i + 1))})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("mp"),
		UploadId: mp.UploadId, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	readBackSDK(t, c, bucket, "mp", data)
	for _, k := range []string{"a/b c+d=&ü.bin", "mp"} {
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)}); err != nil {
			t.Fatalf("DeleteObject %s: %v", k, err)
		}
		objectAbsent(t, c, bucket, k)
	}
	if _, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &s3types.Delete{
		Objects: []s3types.ObjectIdentifier{{Key: aws.String("a/over-knee.bin")}, {Key: aws.String("top")}}}}); err != nil {
		t.Fatalf("DeleteObjects: %v", err)
	}
	if keys := listKeys(t, c, bucket, ""); len(keys) != 0 {
		t.Fatalf("after deletes: %q left", keys)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("DeleteBucket: %v", err)
	}
	bucketGone(t, path, bucket)
	if !hl.onlyBucketHost(bucket, domain) {
		t.Fatalf("the SDK sent requests outside %s.%s: %q", bucket, domain, hl.hosts)
	}
}

func vhostMinio(t *testing.T, gw *testgw.Gateway, tr *http.Transport, endpoint, domain string) {
	ctx := testCtx(t, 3*time.Minute)
	hl := &hostLog{next: tr}
	mc, err := minio.New(strings.TrimPrefix(strings.TrimPrefix(endpoint, "https://"), "http://"), &minio.Options{
		Creds:        miniocreds.NewStaticV4(gw.AccessKey, gw.SecretKey, ""),
		Secure:       strings.HasPrefix(endpoint, "https:"),
		Region:       gw.Region,
		Transport:    hl,
		BucketLookup: minio.BucketLookupDNS,
	})
	if err != nil {
		t.Fatalf("minio client: %v", err)
	}
	sdk := sdkClient(t, gw)
	bucket := bucketName("vhostmio")
	if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: gw.Region}); err != nil {
		t.Fatalf("MakeBucket: %v", err)
	}
	t.Cleanup(func() { dropBucket(t, sdk, bucket) })
	// (minio-go sends MakeBucket in path style to DOMAIN itself; the
	// object calls below go to bucket.DOMAIN.)
	for i, tc := range []struct {
		key  string
		size int
		part uint64
	}{{"x/small ü+.bin", 1000, 0}, {"x/multi", 11 * mib, 5 * mib}} {
		data := genBytes(uint64(960+i), tc.size)
		if _, err := mc.PutObject(ctx, bucket, tc.key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{PartSize: tc.part}); err != nil {
			t.Fatalf("PutObject %s: %v", tc.key, err)
		}
		obj, err := mc.GetObject(ctx, bucket, tc.key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatalf("GetObject %s: %v", tc.key, err)
		}
		got, err := io.ReadAll(obj)
		obj.Close()
		if err != nil || sha(got) != sha(data) {
			t.Fatalf("GetObject %s: %d bytes (err %v), want %d bytes sha %s", tc.key, len(got), err, len(data), sha(data))
		}
		readBackSDK(t, sdk, bucket, tc.key, data) // path style on 127.0.0.1 sees the same object
	}
	var keys []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "x/", Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("ListObjects: %v", o.Err)
		}
		keys = append(keys, o.Key)
	}
	if want := []string{"x/multi", "x/small ü+.bin"}; !slices.Equal(keys, want) {
		t.Fatalf("ListObjects: %q, want %q", keys, want)
	}
	if !hl.sawBucketHost(bucket, domain) {
		t.Fatalf("minio-go did not address %s.%s (hosts: %q)", bucket, domain, hl.hosts)
	}
	for _, k := range keys {
		if err := mc.RemoveObject(ctx, bucket, k, minio.RemoveObjectOptions{}); err != nil {
			t.Fatalf("RemoveObject %s: %v", k, err)
		}
	}
	if err := mc.RemoveBucket(ctx, bucket); err != nil {
		t.Fatalf("RemoveBucket: %v", err)
	}
	bucketGone(t, sdk, bucket)
}
