package localfs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/store/localfs"
)

// A GET of file content through a real gateway is sent from the file itself
// (sendfile: the content reader sees no Read at all), whole and in ranges,
// for single and multipart objects (an inline last part is copied as before),
// on the embedded engine (pins never lost) and on PostgreSQL (pins checked
// per slice), and over TLS, where net/http copies the file it was handed;
// with a bandwidth cap the GET is paced and read by Read, never
// handed over.
func TestGetSendsFiles(t *testing.T) {
	const partSize = 5 << 20
	single := random(t, 3<<20+17)
	multi := random(t, partSize+1000) // part 2 (1,000 bytes) is inline
	ranges := []struct {
		name       string
		key        string
		rng        string // "" whole object
		start, end int64  // of the bytes expected
	}{
		{"whole", "single", "", 0, int64(len(single)) - 1},
		{"range", "single", "bytes=100-2999999", 100, 2999999},
		{"suffix", "single", "bytes=-4096", int64(len(single)) - 4096, int64(len(single)) - 1},
		{"below-sniff", "single", "bytes=0-99", 0, 99}, // net/http copies its first 512 bytes itself
		{"multi-whole", "multi", "", 0, int64(len(multi)) - 1},
		{"multi-across", "multi", fmt.Sprintf("bytes=%d-%d", partSize-300, partSize+500), partSize - 300, partSize + 500},
	}
	for _, tc := range []struct {
		engine   string
		tls      bool // no sendfile: net/http copies the file handed over
		env      []string
		sendfile bool
	}{
		{testgw.Embedded, false, nil, true},
		{config.EngineLocal, false, nil, true},
		{testgw.Embedded, true, nil, true},
		{testgw.Embedded, false, []string{"S3GATE_BANDWIDTH_PER_REQUEST=1GiB"}, false},
	} {
		t.Run(fmt.Sprintf("%s/tls=%v/sendfile=%v", tc.engine, tc.tls, tc.sendfile), func(t *testing.T) {
			gw := testgw.Start(t, testgw.Options{Engine: tc.engine, TLS: tc.tls, InlineMax: 4096, Env: tc.env})
			cli := client(gw)
			ctx := context.Background()
			if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
				t.Fatal(err)
			}
			put(t, cli, "single", single)
			putParts(t, cli, "multi", multi[:partSize], multi[partSize:])

			var reads, sent, copied atomic.Int64
			localfs.ObserveReads(t, func(ev string, n int64) {
				map[string]*atomic.Int64{"read": &reads, "sent": &sent, "copied": &copied}[ev].Add(n)
			})
			var total int64
			for _, r := range ranges {
				total += r.end + 1 - r.start
				reads.Store(0)
				sent.Store(0)
				copied.Store(0)
				in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(r.key)}
				if r.rng != "" {
					in.Range = aws.String(r.rng)
				}
				out, err := cli.GetObject(ctx, in)
				if err != nil {
					t.Fatalf("%s: %v", r.name, err)
				}
				got, err := io.ReadAll(out.Body)
				_ = out.Body.Close()
				data := single
				if r.key == "multi" {
					data = multi
				}
				if want := data[r.start : r.end+1]; err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s: %d bytes, %v; want the %d bytes %d-%d", r.name, len(got), err, len(want), r.start, r.end)
				}
				// Bytes in files: all but the inline part 2 of "multi".
				fileBytes := r.end + 1 - r.start
				if r.key == "multi" {
					fileBytes = min(r.end+1, partSize) - r.start
				}
				// The server counts after its last write: wait for it.
				deadline := time.Now().Add(10 * time.Second)
				for reads.Load()+sent.Load() < fileBytes && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
				wantSent, wantReads := fileBytes, int64(0)
				if !tc.sendfile {
					wantSent, wantReads = 0, fileBytes
				}
				if sent.Load() != wantSent || reads.Load() != wantReads {
					t.Errorf("%s: %d bytes sent from the file, %d read; want %d and %d",
						r.name, sent.Load(), reads.Load(), wantSent, wantReads)
				}
				// net/http writes the first 512 bytes itself; the rest goes by
				// sendfile, except over TLS.
				wantCopied := min(sent.Load(), 512)
				if tc.tls {
					wantCopied = sent.Load()
				}
				if copied.Load() != wantCopied {
					t.Errorf("%s: %d of the %d bytes handed over were copied, want %d", r.name, copied.Load(), sent.Load(), wantCopied)
				}
			}
			// The metrics count the bytes sent past them, as those written.
			if got := getBytesMetric(t, gw); got != total {
				t.Errorf("s3gate_response_bytes_total of GetObject: %d, want %d", got, total)
			}
		})
	}
}

const bucket = "sendfile"

func client(gw *testgw.Gateway) *s3.Client {
	return s3.New(s3.Options{
		Region:       gw.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, ""),
		HTTPClient:   gw.HTTPClient,
		BaseEndpoint: aws.String(gw.Endpoint),
		UsePathStyle: true,
	})
}

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func put(t *testing.T, cli *s3.Client, key string, data []byte) {
	t.Helper()
	if _, err := cli.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
}

func putParts(t *testing.T, cli *s3.Client, key string, parts ...[]byte) {
	t.Helper()
	ctx := context.Background()
	up, err := cli.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	for i, p := range parts {
		n := aws.Int32(int32(i + 1))
		out, err := cli.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId, PartNumber: n, Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{PartNumber: n, ETag: out.ETag})
	}
	if _, err := cli.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatal(err)
	}
}

// getBytesMetric scrapes the response bytes counted for GetObject.
func getBytesMetric(t *testing.T, gw *testgw.Gateway) int64 {
	t.Helper()
	resp, err := http.Get(gw.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close() //nolint:errcheck // a read error below is the one to report
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	const series = `s3gate_response_bytes_total{operation="GetObject"} `
	for line := range strings.Lines(string(text)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return int64(f)
		}
	}
	t.Fatalf("no %s in /metrics", series)
	return 0
}
