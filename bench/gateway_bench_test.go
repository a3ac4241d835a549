package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/internal/testgw"
)

// Concurrency and the fixed workloads of one round (S3GATE_BENCH_SCALE scales
// the counts).
const (
	clients    = 16
	smallSize  = 4 * kib
	smallOps   = 4000
	largeSize  = 64 * mib
	largeCount = 32 // 2 GiB per round: bounded, and two objects per client
)

// objRef is an object written by a round, for the GET round that follows.
type objRef struct {
	key  string
	id   uint64
	size int64
}

// gwEnv is one live gateway with its clients and the objects written so far.
type gwEnv struct {
	gw      *testgw.Gateway
	cpu     *cpuMeter
	clients []*s3.Client // one per concurrent client, each with its own connections
	bucket  string
	small   []objRef
	large   []objRef
}

// BenchmarkGateway measures PUT and GET through a live gateway with 16
// concurrent aws-sdk-go-v2 clients, on each large engine:
// 4 KiB objects (ops/s, p50-ms, p99-ms) and 64 MiB objects (MiB/s). Every GET
// verifies every byte. Run with -benchtime=1x: one iteration is a fixed round.
func BenchmarkGateway(b *testing.B) {
	for _, engine := range testgw.Engines() {
		b.Run("engine="+engine, func(b *testing.B) {
			e := newGWEnv(b, engine)
			b.Run("put-4KiB", func(b *testing.B) { e.benchPut(b, &e.small, smallSize, scaled(b, smallOps, clients)) })
			b.Run("get-4KiB", func(b *testing.B) { e.benchGet(b, &e.small, smallSize, scaled(b, smallOps, clients)) })
			b.Run("put-64MiB", func(b *testing.B) { e.benchPut(b, &e.large, largeSize, scaled(b, largeCount, 1)) })
			b.Run("get-64MiB", func(b *testing.B) { e.benchGet(b, &e.large, largeSize, scaled(b, largeCount, 1)) })
		})
	}
}

func newGWEnv(b *testing.B, engine string) *gwEnv {
	tlsOn := os.Getenv("S3GATE_BENCH_TLS") != ""
	gw := testgw.Start(b, testgw.Options{Engine: engine, TLS: tlsOn})
	e := &gwEnv{gw: gw, cpu: newCPUMeter(b.Context(), b, gw.DatabaseURL), bucket: "bench"}
	if testgw.External() {
		// A shared server may hold other buckets: take a fresh name and clean up.
		var rnd [4]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			b.Fatalf("bucket name: %v", err)
		}
		e.bucket = "s3gate-bench-" + hex.EncodeToString(rnd[:])
	}
	for range clients {
		e.clients = append(e.clients, newClient(b, gw))
	}
	ctx := b.Context()
	in := &s3.CreateBucketInput{Bucket: aws.String(e.bucket)}
	if gw.Region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(gw.Region)}
	}
	if _, err := e.clients[0].CreateBucket(ctx, in); err != nil {
		b.Fatalf("create bucket %s on %s: %v", e.bucket, gw.Endpoint, err)
	}
	if testgw.External() {
		b.Cleanup(func() { e.cleanup(b) })
	}
	return e
}

// newClient builds one S3 client with its own connection pool, the SDK's default
// checksum behaviour, and no retries (a failure must show, not hide in latency).
func newClient(b *testing.B, gw *testgw.Gateway) *s3.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	if gw.CAFile != "" {
		pemBytes, err := os.ReadFile(gw.CAFile)
		if err != nil {
			b.Fatalf("read CA: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			b.Fatalf("no certificate in %s", gw.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	b.Cleanup(tr.CloseIdleConnections)
	cfg := aws.Config{
		Region:      gw.Region,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, ""),
		HTTPClient:  &http.Client{Transport: tr},
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(gw.Endpoint)
		o.UsePathStyle = true
		o.DisableLogOutputChecksumValidationSkipped = true
	})
}

// benchPut writes n objects of size bytes per iteration with 16 clients and
// appends them to *objs for the GET round.
func (e *gwEnv) benchPut(b *testing.B, objs *[]objRef, size int64, n int) {
	ctx := b.Context()
	var lats []time.Duration
	var wall time.Duration
	cpu := e.cpu.start(true)
	for iter := 0; iter < b.N; iter++ {
		batch := newBatch(size, n)
		lat, w, err := e.putAll(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		*objs = append(*objs, batch...)
		lats = append(lats, lat...)
		wall += w
	}
	e.report(b, cpu, lats, wall, size)
}

// benchGet reads n objects of the given size per iteration with 16 clients and
// verifies every byte. It writes them first (untimed) if no PUT round ran.
func (e *gwEnv) benchGet(b *testing.B, objs *[]objRef, size int64, n int) {
	if len(*objs) < n {
		b.StopTimer()
		e.benchPutUntimed(b, objs, size, n-len(*objs))
		b.StartTimer()
	}
	ctx := b.Context()
	scratch := make([][]byte, clients)
	bufs := make([][]byte, clients)
	for c := range clients {
		scratch[c] = make([]byte, 256*kib)
		bufs[c] = make([]byte, 256*kib)
	}
	var lats []time.Duration
	var wall time.Duration
	cpu := e.cpu.start(true)
	for iter := 0; iter < b.N; iter++ {
		// Read the newest n objects: with b.N > 1 each round reads what it can.
		batch := (*objs)[len(*objs)-n:]
		lat, w, err := runOps(ctx, clients, n, func(ctx context.Context, c, i int) error {
			return e.get(ctx, c, batch[i], scratch[c], bufs[c])
		})
		if err != nil {
			b.Fatal(err)
		}
		lats = append(lats, lat...)
		wall += w
	}
	e.report(b, cpu, lats, wall, size)
}

func (e *gwEnv) get(ctx context.Context, c int, o objRef, scratch, buf []byte) error {
	out, err := e.clients[c].GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(o.key)})
	if err != nil {
		return fmt.Errorf("get %s: %w", o.key, err)
	}
	defer out.Body.Close() // a read error below is the one that matters
	n, err := io.CopyBuffer(newVerifier(o.id, scratch), out.Body, buf)
	if err != nil {
		return fmt.Errorf("get %s: body after %d bytes: %w", o.key, n, err)
	}
	if n != o.size {
		return fmt.Errorf("get %s: %d bytes, want %d", o.key, n, o.size)
	}
	return nil
}

func (e *gwEnv) benchPutUntimed(b *testing.B, objs *[]objRef, size int64, n int) {
	batch := newBatch(size, n)
	if _, _, err := e.putAll(b.Context(), batch); err != nil {
		b.Fatalf("populate for GET: %v", err)
	}
	*objs = append(*objs, batch...)
}

// newBatch names n new objects of the given size, each with its own content.
func newBatch(size int64, n int) []objRef {
	batch := make([]objRef, n)
	for i := range batch {
		id := newID()
		batch[i] = objRef{key: fmt.Sprintf("%s/%d", sizeName(size), id), id: id, size: size}
	}
	return batch
}

// putAll writes the batch with 16 clients: per-object latency and wall time.
func (e *gwEnv) putAll(ctx context.Context, batch []objRef) ([]time.Duration, time.Duration, error) {
	return runOps(ctx, clients, len(batch), func(ctx context.Context, c, i int) error {
		o := batch[i]
		_, err := e.clients[c].PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(e.bucket),
			Key:           aws.String(o.key),
			Body:          newGenReader(o.id, o.size),
			ContentLength: aws.Int64(o.size),
		})
		if err != nil {
			return fmt.Errorf("put %s: %w", o.key, err)
		}
		return nil
	})
}

// report gives small objects ops/s, latency percentiles and CPU per op; large
// ones MiB/s and CPU per MiB.
func (e *gwEnv) report(b *testing.B, cpu cpuSpan, lats []time.Duration, wall time.Duration, size int64) {
	if size < mib {
		reportLatency(b, lats, wall)
		cpu.reportPerOp(b, len(lats))
		return
	}
	bytes := int64(len(lats)) * size
	reportThroughput(b, bytes, wall)
	cpu.report(b, bytes)
}

// cleanup deletes what the run wrote on an external server, then the bucket.
func (e *gwEnv) cleanup(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	all := append(append([]objRef(nil), e.small...), e.large...)
	for len(all) > 0 {
		n := min(len(all), 1000)
		ids := make([]types.ObjectIdentifier, n)
		for i, o := range all[:n] {
			ids[i] = types.ObjectIdentifier{Key: aws.String(o.key)}
		}
		all = all[n:]
		if _, err := e.clients[0].DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(e.bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
			b.Errorf("cleanup: delete objects: %v", err)
			return
		}
	}
	if _, err := e.clients[0].DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(e.bucket)}); err != nil {
		b.Errorf("cleanup: delete bucket %s: %v", e.bucket, err)
	}
}

func sizeName(size int64) string {
	if size >= mib {
		return fmt.Sprintf("%dMiB", size/mib)
	}
	return fmt.Sprintf("%dKiB", size/kib)
}
