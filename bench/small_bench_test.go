package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/s3gate/s3gate/internal/testgw"
)

// BenchmarkSmallPath measures the gateway's per-request cost for 4 KiB
// objects on the embedded default: one client, one request at a time, b.N
// requests, so ns/op, B/op and allocs/op are those of one request. The
// requests (unique keys and content, header-signed with the payload's
// SHA-256 as aws-sdk-go-v2 sends them over HTTP) are built and signed before
// the timer starts; what is timed and counted is net/http's client plus the
// whole gateway, in this process (cpu-us/op is their CPU). Read with -benchmem; it suits CPU and
// allocation profiles (-cpuprofile, -memprofile). S3GATE_BENCH_SMALL_ENGINE
// names another engine (pgchunks: the PostgreSQL metadata path, on a
// throwaway server of internal/pgtest).
func BenchmarkSmallPath(b *testing.B) {
	if testgw.External() {
		b.Skip("measures the in-process gateway")
	}
	engine := testgw.Embedded
	if e := os.Getenv("S3GATE_BENCH_SMALL_ENGINE"); e != "" {
		engine = e
	}
	gw := testgw.Start(b, testgw.Options{Engine: engine})
	s := &smallEnv{gw: gw, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}}
	b.Cleanup(s.client.CloseIdleConnections)
	s.do(b, s.signed(b, http.MethodPut, "/small", nil))
	var keys []objRef
	b.Run("put-4KiB", func(b *testing.B) {
		batch := newBatch(smallSize, b.N)
		s.run(b, s.puts(b, batch), 0)
		keys = append(keys, batch...)
	})
	b.Run("get-4KiB", func(b *testing.B) {
		if len(keys) == 0 { // run alone: write what it reads, untimed
			keys = newBatch(smallSize, 100)
			for _, req := range s.puts(b, keys) {
				s.do(b, req)
			}
		}
		reqs := make([]*http.Request, b.N)
		for i := range reqs {
			reqs[i] = s.signed(b, http.MethodGet, "/small/"+keys[i%len(keys)].key, nil)
		}
		s.run(b, reqs, smallSize)
	})
}

type smallEnv struct {
	gw     *testgw.Gateway
	client *http.Client
}

// puts returns the signed PUTs of batch, each with its own content.
func (s *smallEnv) puts(b *testing.B, batch []objRef) []*http.Request {
	reqs := make([]*http.Request, len(batch))
	for i, o := range batch {
		body := make([]byte, o.size)
		fill(body, o.id, 0)
		reqs[i] = s.signed(b, http.MethodPut, "/small/"+o.key, body)
	}
	return reqs
}

// signed builds a path-style request signed as aws-sdk-go-v2 signs it.
func (s *smallEnv) signed(b *testing.B, method, path string, body []byte) *http.Request {
	req, err := http.NewRequest(method, s.gw.Endpoint+path, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if body == nil {
		req.Body, req.GetBody, req.ContentLength = nil, nil, 0
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: s.gw.AccessKey, SecretAccessKey: s.gw.SecretKey}
	if err := signer.SignHTTP(context.Background(), creds, req, payload, "s3", s.gw.Region, time.Now()); err != nil {
		b.Fatal(err)
	}
	return req
}

// run sends the requests one after the other (timed) and checks each answer:
// 200 and, for a GET, want bytes.
func (s *smallEnv) run(b *testing.B, reqs []*http.Request, want int) {
	buf := make([]byte, 2*want+512)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), selfCPU()
	for _, req := range reqs {
		s.check(b, req, buf, want)
	}
	b.ReportMetric(float64(len(reqs))/time.Since(start).Seconds(), "ops/s")
	// CPU per request (client and gateway) varies less than wall time on a
	// loaded machine.
	b.ReportMetric(float64((selfCPU()-cpu0).Microseconds())/float64(len(reqs)), "cpu-us/op")
}

func (s *smallEnv) do(b *testing.B, req *http.Request) {
	s.check(b, req, make([]byte, 512), 0)
}

func (s *smallEnv) check(b *testing.B, req *http.Request, buf []byte, want int) {
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.ReadFull(resp.Body, buf)
	resp.Body.Close() //nolint:errcheck // the status and length below decide
	if resp.StatusCode != http.StatusOK || n != want || (err != io.ErrUnexpectedEOF && err != io.EOF) {
		b.Fatal(fmt.Errorf("%s %s: status %d, %d bytes (want %d), %v: %q", req.Method, req.URL.Path, resp.StatusCode, n, want, err, buf[:n]))
	}
}
