package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/store"
)

// referenceSigningKey is the SigV4 key derivation written out with
// crypto/hmac, independently of the package's helpers.
func referenceSigningKey(secret, date, region, service string) []byte {
	k := []byte("AWS4" + secret)
	for _, part := range []string{date, region, service, "aws4_request"} {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(part))
		k = m.Sum(nil)
	}
	return k
}

// TestSigningKeyCache: the cached key is the derived key, on a miss and on
// a hit, for every (secret, date, region, service); each differs from the
// others, so none is served for another.
func TestSigningKeyCache(t *testing.T) {
	tests := []struct {
		name, secret, date, region, service string
		want                                string // hex, where a published value exists
	}{
		{"AWS's published example", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam",
			"f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"},
		{"test key", testSK, "20260102", testRegion, "s3", ""},
		{"next day", testSK, "20260103", testRegion, "s3", ""},
		{"other region", testSK, "20260102", "eu-west-1", "s3", ""},
		{"other service", testSK, "20260102", testRegion, "s3express", ""},
		{"secret one byte off", testSK[:len(testSK)-1] + "X", "20260102", testRegion, "s3", ""},
		{"empty secret", "", "20260102", testRegion, "s3", ""},
		{"secret longer than an HMAC block and the stack buffer", strings.Repeat("long-secret/", 20), "20260102", testRegion, "s3", ""},
	}
	var c keyCache
	seen := map[string]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := referenceSigningKey(tt.secret, tt.date, tt.region, tt.service)
			if tt.want != "" && hex.EncodeToString(want) != tt.want {
				t.Fatalf("reference derivation %x, published %s", want, tt.want)
			}
			for _, pass := range []string{"miss", "hit"} {
				if got := c.get(tt.secret, tt.date, tt.region, tt.service); !bytes.Equal(got, want) {
					t.Fatalf("%s: key %x, want %x", pass, got, want)
				}
			}
			if other, dup := seen[string(want)]; dup {
				t.Fatalf("same key as %q", other)
			}
			seen[string(want)] = tt.name
		})
	}
	if len(c.keys) != len(tests) {
		t.Errorf("%d cached keys for %d scopes", len(c.keys), len(tests))
	}
}

// TestSigningKeyCacheConcurrent: many goroutines deriving and finding keys
// at once, past the bound so that the cache is also replaced under them,
// always get the right key. Run with -race.
func TestSigningKeyCacheConcurrent(t *testing.T) {
	const workers, perWorker = 8, maxCachedKeys / 4 // 2x the bound in all
	var c keyCache
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				// Half the scopes are shared between workers (hits and
				// racing inserts), half are the worker's own (misses).
				secret := fmt.Sprintf("secret-%d", i%16)
				region := fmt.Sprintf("region-%d-%d", w%2, i)
				got := c.get(secret, "20260102", region, "s3")
				if want := referenceSigningKey(secret, "20260102", region, "s3"); !bytes.Equal(got, want) {
					errs <- fmt.Errorf("worker %d, scope %d: wrong key", w, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if n := len(c.keys); n == 0 || n > maxCachedKeys {
		t.Errorf("%d cached keys, bound %d", n, maxCachedKeys)
	}
}

// TestSigningKeyCacheRotation: after an access key's secret changes, requests
// signed with the old secret are refused (header, presigned and aws-chunked
// alike) although its derived key was cached, requests signed with the new
// one verify, and once the key is deleted nothing verifies.
func TestSigningKeyCacheRotation(t *testing.T) {
	ctx := context.Background()
	const newSK = "rotated-secret-9876543210abcdefghij"
	keys := newMemKeys(store.AccessKey{ID: testAK, Secret: testSK})
	v := &Verifier{Region: testRegion, Creds: &Keyring{Keys: keys}}
	kinds := []struct {
		name string
		req  func(t *testing.T, secret string) *http.Request
	}{
		{"header", func(t *testing.T, secret string) *http.Request {
			return overTheWire(t, signHeader(t, headerCase{method: "PUT", key: "k", body: []byte("x")}, secret, time.Now()))
		}},
		{"presigned", func(t *testing.T, secret string) *http.Request {
			pc := s3.NewPresignClient(s3.New(s3.Options{
				Region: testRegion, Credentials: credentials.NewStaticCredentialsProvider(testAK, secret, ""),
				BaseEndpoint: aws.String("http://" + testHost), UsePathStyle: true,
			}))
			p, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k")},
				s3.WithPresignExpires(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			req, _ := presignedRequest(t, p, "")
			return req
		}},
	}
	verify := func(t *testing.T, req *http.Request, want string) {
		t.Helper()
		if _, err := v.Verify(req); errCode(err) != want {
			t.Fatalf("Verify: code %q, want %q", errCode(err), want)
		}
	}
	// aws-chunked requests are signed by minio-go with testSK only.
	chunked := func(t *testing.T) *http.Request {
		req, enc := streamingRequest(t, modeSigned, testData(100), time.Now())
		return overTheWire(t, withBody(req, enc, false))
	}
	steps := []struct {
		name           string
		change         func() error
		old, new, chnk string // the codes for the old secret, the new one, aws-chunked (old)
	}{
		{"before rotation", nil, "", CodeSignatureDoesNotMatch, ""},
		{"after rotation", func() error {
			if err := keys.DeleteKey(ctx, testAK); err != nil {
				return err
			}
			return keys.CreateKey(ctx, store.AccessKey{ID: testAK, Secret: newSK})
		}, CodeSignatureDoesNotMatch, "", CodeSignatureDoesNotMatch},
		{"after deletion", func() error { return keys.DeleteKey(ctx, testAK) },
			CodeInvalidAccessKeyID, CodeInvalidAccessKeyID, CodeInvalidAccessKeyID},
	}
	for _, st := range steps {
		if st.change != nil {
			if err := st.change(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		for _, k := range kinds {
			t.Run(st.name+"/"+k.name, func(t *testing.T) {
				verify(t, k.req(t, testSK), st.old)
				verify(t, k.req(t, newSK), st.new)
			})
		}
		t.Run(st.name+"/aws-chunked", func(t *testing.T) { verify(t, chunked(t), st.chnk) })
	}
}
