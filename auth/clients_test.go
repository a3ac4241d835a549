package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"
)

// recorder is a minimal S3 endpoint: it verifies every request and keeps
// what it saw, answering PUTs with an ETag and failures with S3 XML errors.
type recorder struct {
	v  *Verifier
	mu sync.Mutex
	// per request: the payload mode, the decoded body hash, the trailer
	modes   []string
	bodies  [][32]byte
	trailer []string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := rc.v.Verify(r)
	if err == nil {
		var body []byte
		body, err = io.ReadAll(res.Body)
		if err == nil {
			tr := ""
			if res.Trailer != nil {
				alg, val, terr := res.Trailer()
				if terr != nil {
					err = terr
				}
				tr = alg + ":" + val
			}
			rc.mu.Lock()
			rc.modes = append(rc.modes, r.Header.Get("X-Amz-Content-Sha256"))
			rc.bodies = append(rc.bodies, sha256.Sum256(body))
			rc.trailer = append(rc.trailer, tr)
			rc.mu.Unlock()
		}
	}
	if err != nil {
		ae, ok := err.(*Error)
		if !ok {
			ae = &Error{Code: CodeInternalError, Message: err.Error()}
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(ae.HTTPStatus())
		_ = xml.NewEncoder(w).Encode(struct {
			XMLName xml.Name `xml:"Error"`
			Code    string
			Message string
		}{Code: ae.Code, Message: ae.Message})
		return
	}
	w.Header().Set("ETag", `"d41d8cd98f00b204e9800998ecf8427e"`)
	w.WriteHeader(http.StatusOK)
}

func startRecorder(t *testing.T, tls bool, secret string) (*recorder, *httptest.Server) {
	rc := &recorder{v: &Verifier{Region: testRegion, Creds: StaticCredentials{testAK: secret}}}
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(rc)
	} else {
		srv = httptest.NewServer(rc)
	}
	t.Cleanup(srv.Close)
	return rc, srv
}

func sdkClient(srv *httptest.Server) *s3.Client {
	return s3.New(s3.Options{
		Region:       testRegion,
		Credentials:  credentials.NewStaticCredentialsProvider(testAK, testSK, ""),
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		HTTPClient:   srv.Client(),
	})
}

// TestRealClients drives aws-sdk-go-v2 and minio-go with their default
// settings over HTTP and HTTPS: each picks its own wire format (signed
// payload hash, signed chunks, unsigned trailer) and all must verify.
func TestRealClients(t *testing.T) {
	ctx := context.Background()
	for _, tls := range []bool{false, true} {
		for _, size := range []int{0, 1000, 300_000} {
			data := testData(size)
			want := sha256.Sum256(data)
			t.Run(fmt.Sprintf("aws-sdk-go-v2/tls=%v/%d", tls, size), func(t *testing.T) {
				rc, srv := startRecorder(t, tls, testSK)
				_, err := sdkClient(srv).PutObject(ctx, &s3.PutObjectInput{
					Bucket: aws.String("bucket"), Key: aws.String("dir/a b+c=ü.bin"), Body: bytes.NewReader(data),
				})
				if err != nil {
					t.Fatalf("PutObject: %v", err)
				}
				checkRecorded(t, rc, want, size)
			})
			// Over plain HTTP the SDK must seek a body to hash it, so the
			// non-seekable (streamed) form exists only over HTTPS.
			if tls {
				t.Run(fmt.Sprintf("aws-sdk-go-v2-stream/tls=%v/%d", tls, size), func(t *testing.T) {
					rc, srv := startRecorder(t, tls, testSK)
					// A body that cannot seek is streamed without a payload hash.
					_, err := sdkClient(srv).PutObject(ctx, &s3.PutObjectInput{
						Bucket: aws.String("bucket"), Key: aws.String("dir/a b+c=ü.bin"),
						Body: io.MultiReader(bytes.NewReader(data)), ContentLength: aws.Int64(int64(size)),
					})
					if err != nil {
						t.Fatalf("PutObject: %v", err)
					}
					checkRecorded(t, rc, want, size)
				})
			}
			t.Run(fmt.Sprintf("minio-go-crc32c/tls=%v/%d", tls, size), func(t *testing.T) {
				rc, srv := startRecorder(t, tls, testSK)
				mc, err := minio.New(strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://"), &minio.Options{
					Creds: miniocreds.NewStaticV4(testAK, testSK, ""), Secure: tls, Region: testRegion,
					Transport: srv.Client().Transport, BucketLookup: minio.BucketLookupPath, TrailingHeaders: true,
				})
				if err != nil {
					t.Fatal(err)
				}
				_, err = mc.PutObject(ctx, "bucket", "dir/a b+c=ü.bin", io.MultiReader(bytes.NewReader(data)), int64(size),
					minio.PutObjectOptions{Checksum: minio.ChecksumCRC32C})
				if err != nil {
					t.Fatalf("PutObject: %v", err)
				}
				checkRecorded(t, rc, want, size)
			})
			t.Run(fmt.Sprintf("minio-go/tls=%v/%d", tls, size), func(t *testing.T) {
				rc, srv := startRecorder(t, tls, testSK)
				mc, err := minio.New(strings.TrimPrefix(strings.TrimPrefix(srv.URL, "https://"), "http://"), &minio.Options{
					Creds: miniocreds.NewStaticV4(testAK, testSK, ""), Secure: tls, Region: testRegion,
					Transport: srv.Client().Transport, BucketLookup: minio.BucketLookupPath,
				})
				if err != nil {
					t.Fatal(err)
				}
				_, err = mc.PutObject(ctx, "bucket", "dir/a b+c=ü.bin", bytes.NewReader(data), int64(size), minio.PutObjectOptions{})
				if err != nil {
					t.Fatalf("PutObject: %v", err)
				}
				checkRecorded(t, rc, want, size)
			})
		}
	}
}

func checkRecorded(t *testing.T, rc *recorder, want [32]byte, size int) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bodies) != 1 {
		t.Fatalf("server saw %d verified requests, want 1", len(rc.bodies))
	}
	if rc.bodies[0] != want {
		t.Fatalf("decoded body differs from the %d bytes sent (mode %s)", size, rc.modes[0])
	}
	t.Logf("mode %s trailer %q", rc.modes[0], rc.trailer[0])
}

func TestRealClientsWrongSecret(t *testing.T) {
	ctx := context.Background()
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", tls), func(t *testing.T) {
			_, srv := startRecorder(t, tls, "not-the-secret")
			_, err := sdkClient(srv).PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String("bucket"), Key: aws.String("k"), Body: bytes.NewReader([]byte("x")),
			})
			if err == nil || !strings.Contains(err.Error(), CodeSignatureDoesNotMatch) {
				t.Fatalf("err = %v, want %s", err, CodeSignatureDoesNotMatch)
			}
		})
	}
}

func TestSigV2(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	newReq := func(method, target string) *http.Request {
		r := mustRequest(t, method, "http://"+testHost+target, "")
		r.Header.Set("Content-Type", "text/plain")
		r.Header.Set("X-Amz-Meta-Color", "blue")
		return r
	}
	t.Run("header", func(t *testing.T) {
		for _, target := range []string{"/bucket/key", "/bucket/a%20b?acl", "/bucket/k?uploadId=xyz&partNumber=2&foo=bar"} {
			r := signer.SignV2(*newReq("PUT", target), testAK, testSK, false)
			if _, err := newVerifier(now).Verify(overTheWire(t, r)); err != nil {
				t.Fatalf("%s: %v", target, err)
			}
			r2 := overTheWire(t, r)
			r2.Header.Set("X-Amz-Meta-Color", "red")
			if _, err := newVerifier(now).Verify(r2); errCode(err) != CodeSignatureDoesNotMatch {
				t.Fatalf("%s tampered: %v", target, err)
			}
			if _, err := newVerifier(now.Add(time.Hour)).Verify(overTheWire(t, r)); errCode(err) != CodeRequestTimeTooSkewed {
				t.Fatalf("%s skewed: %v", target, err)
			}
		}
	})
	t.Run("presigned", func(t *testing.T) {
		r := signer.PreSignV2(*newReq("GET", "/bucket/key"), testAK, testSK, 60, false)
		sreq := overTheWire(t, mustRequest(t, "GET", r.URL.String(), ""))
		sreq.Header.Set("Content-Type", "text/plain")
		sreq.Header.Set("X-Amz-Meta-Color", "blue")
		if _, err := newVerifier(now).Verify(sreq); err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if _, err := newVerifier(now.Add(2 * time.Minute)).Verify(sreq); errCode(err) != CodeAccessDenied {
			t.Fatalf("expired: %v", err)
		}
	})
}
