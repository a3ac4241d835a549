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

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
)

// Concurrency of the workloads (the fixed workload):
// S3GATE_BENCH_CLIENTS changes the 16 (both sides of every pair that uses
// it), e.g. to measure what batching costs a read at low concurrency.
var clients = envInt("S3GATE_BENCH_CLIENTS", 16) // 4 KiB objects, listings' population, part copies

const (
	largeClients = 4 // 64 MiB objects and multipart parts
	smallSize    = 4 * kib
	largeSize    = 64 * mib
	partSize     = 16 * mib
)

// sizes are the counts of one run: the default keeps `make bench` short,
// BENCH_FULL=1 takes the full sizes; S3GATE_BENCH_SCALE multiplies
// the object counts and the multipart size.
type sizes struct {
	smallOps, largeObjs, mpuParts int
	listKeys, listPrefixes        int
	walks, listings               int // repetitions of the listing rounds
	completeParts                 int
}

func runSizes(tb testing.TB) sizes {
	s := sizes{smallOps: 2000, largeObjs: 8, mpuParts: 8, listKeys: 10000, listPrefixes: 50,
		walks: 3, listings: 20, completeParts: 1000}
	if full() {
		s.smallOps, s.largeObjs, s.mpuParts, s.walks, s.listings = 16000, 32, 64, 10, 100
	}
	s.smallOps = scaled(tb, s.smallOps, clients)
	s.largeObjs = scaled(tb, s.largeObjs, largeClients)
	s.mpuParts = scaled(tb, s.mpuParts, 2)
	s.listKeys = scaled(tb, s.listKeys, 2*s.listPrefixes)
	s.completeParts = scaled(tb, s.completeParts, 2)
	return s
}

func full() bool { return os.Getenv("BENCH_FULL") != "" }

// objRef is an object written by a round, for the GET round that follows.
type objRef struct {
	key  string
	id   uint64
	size int64
}

// gwEnv is one live gateway with its clients, the raw PostgreSQL of the same
// run, and the objects written so far.
type gwEnv struct {
	engine  string
	gw      *testgw.Gateway
	dsn     string // the gateway's database, "" on the embedded default or an external endpoint
	probe   cpuProbe
	pg      *benchPG
	raw     *baseEnv // nil for an external endpoint
	sum     *summary
	sz      sizes
	clients []*s3.Client // one per concurrent client, each with its own connections
	bucket  string
	small   []objRef
	large   []objRef
	rawKeys []string // rows of the raw small-upsert round
	// rawLargeObjs are the raw medium's objects of the last 64 MiB round.
	rawLargeObjs []baseObj
	page50       round // the 50-key page, for the delimiter listing's target
}

// BenchmarkGateway runs the fixed workload against a live gateway
// (its own process, `s3gate serve`, on a durable PostgreSQL of this run) and
// pairs each workload with its raw PostgreSQL (or disk) counterpart, measured
// just before it on the same server: 4 KiB PUT/GET with 16 clients, identical
// 4 KiB PUTs (dedup), listings of 10,000 keys, Complete of 1,000 parts,
// 64 MiB PUT/GET with 4 clients, a multipart upload in 16 MiB parts. Every
// object has its own content and every GET verifies every byte. Run with
// -benchtime=1x; it ends with a summary table (README.md).
func BenchmarkGateway(b *testing.B) {
	sum := &summary{}
	var pg *benchPG
	var raw *baseEnv
	bin := ""
	if !testgw.External() {
		bin = gatewayBinary(b)
		pg = startBenchPG(b)
		raw = newBaseEnv(b, pg.newDB(b), b.TempDir())
	}
	prev := "" // the last engine's database, settled before the next
	for i, engine := range benchEngines() {
		if i > 0 && raw != nil {
			pg.settle(b, raw.dsn, prev)
		}
		b.Run("engine="+engine, func(b *testing.B) {
			e := newGWEnv(b, bin, engine, pg, raw, sum)
			prev = e.dsn
			// Each round starts settled: a round is not charged the
			// write-out (checkpoint, evicted dirty buffers) and the
			// autovacuums of the round before it.
			run := func(name string, f func(*testing.B)) {
				if raw != nil {
					pg.settle(b, raw.dsn, e.dsn)
				}
				b.Run(name, f)
			}
			if metadataWorkloads(engine) {
				run("put-4KiB", e.benchSmallPut)
				run("get-4KiB", e.benchSmallGet)
				run("put-4KiB-dedup", e.benchDedupPut)
				run("put-4KiB-bounds", e.benchSmallPutBounds)
				e.benchListings(b)
				run("complete-1000-parts", e.benchComplete)
			}
			run("put-64MiB", e.benchLargePut)
			run("get-64MiB", e.benchLargeGet)
			run("multipart-16MiB-parts", e.benchMultipart)
		})
	}
	sum.print()
}

// benchEngines: pgchunks, pglo and local (BENCH_FULL adds the embedded
// default); "external" for an external endpoint.
func benchEngines() []string {
	if testgw.External() {
		return []string{"external"}
	}
	engines := []string{config.EnginePGChunks, config.EnginePGLO, config.EngineLocal}
	if full() {
		engines = append([]string{testgw.Embedded}, engines...)
	}
	return engines
}

// metadataWorkloads: the 4 KiB, listing and Complete workloads touch only
// metadata and inline content, the same on every PostgreSQL engine; they run
// on pgchunks (and the embedded default, and an external endpoint).
func metadataWorkloads(engine string) bool {
	return engine != config.EnginePGLO && engine != config.EngineLocal
}

func newGWEnv(b *testing.B, bin, engine string, pg *benchPG, raw *baseEnv, sum *summary) *gwEnv {
	e := &gwEnv{engine: engine, pg: pg, raw: raw, sum: sum, sz: runSizes(b), bucket: "bench"}
	if testgw.External() {
		e.gw = testgw.Start(b, testgw.Options{})
		e.probe = cpuProbe{gw: pidsCPU(b)}
		// A shared server may hold other buckets: take a fresh name and clean up.
		var rnd [4]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			b.Fatalf("bucket name: %v", err)
		}
		e.bucket = "s3gate-bench-" + hex.EncodeToString(rnd[:])
	} else {
		if engine != testgw.Embedded {
			e.dsn = pg.newDB(b)
		}
		g := startProcGateway(b, bin, engine, e.dsn)
		e.gw = &g.Gateway
		e.probe = cpuProbe{gw: g.cpu, pg: raw.cpu}
		if engine == testgw.Embedded {
			e.probe.pg = nil // no PostgreSQL behind it
		}
	}
	for range clients {
		e.clients = append(e.clients, newClient(b, e.gw))
	}
	e.createBucket(b, e.bucket)
	return e
}

func (e *gwEnv) createBucket(b *testing.B, bucket string) {
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if e.gw.Region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(e.gw.Region)}
	}
	if _, err := e.clients[0].CreateBucket(b.Context(), in); err != nil {
		b.Fatalf("create bucket %s on %s: %v", bucket, e.gw.Endpoint, err)
	}
	if testgw.External() {
		b.Cleanup(func() { e.cleanup(b, bucket) })
	}
}

// measure times fn on the gateway, counting its statements.
func (e *gwEnv) measure(b *testing.B, ops int, bytes int64, fn func() ([]time.Duration, time.Duration, error)) round {
	count := e.pg.countStatements(b, e.dsn)
	r, err := e.probe.measure(ops, bytes, fn)
	if err != nil {
		b.Fatal(err)
	}
	r.stmtCalls, r.stmtsOK = count.stop(b, ops)
	return r
}

// measureRaw times fn on the raw medium (nil when there is none).
func (e *gwEnv) measureRaw(b *testing.B, ops int, bytes int64, fn func() ([]time.Duration, time.Duration, error)) *round {
	if e.raw == nil {
		return nil
	}
	r, err := cpuProbe{pg: e.raw.cpu}.measure(ops, bytes, fn)
	if err != nil {
		b.Fatal(err)
	}
	return &r
}

var (
	smallPutTarget = target{"≥ 0.8× raw; ≤ 600 us server CPU", func(gw, raw round) (bool, bool) {
		c, ok := gw.serverCPU()
		return gw.rate() >= 0.8*raw.rate() && c <= 600, ok
	}}
	smallGetTarget = target{"≥ 2× the issue-time gateway's GETs per server CPU second: make bench-compare BASE=3e7c344 HARNESS=tree", nil}
	largeTarget    = target{"≥ 0.9× raw", func(gw, raw round) (bool, bool) { return gw.rate() >= 0.9*raw.rate(), raw.wall > 0 }}
)

// Slices of the paired workloads: each side runs a slice in turn.
const smallSlices = 4

func (e *gwEnv) benchSmallPut(b *testing.B) {
	n := e.sz.smallOps
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("raw/%d", newID())
	}
	e.rawKeys = keys
	e.small = e.put(b, "put-4KiB", newBatch(smallSize, n), clients, smallSlices, func(lo, hi int) *round {
		return e.rawSmall(b, lo, hi, func(ctx context.Context, c *pgx.Conn, i int, buf []byte) error {
			fill(buf, uint64(i), 0)
			return smallUpsert(ctx, c, keys[i], buf)
		})
	}, smallPutTarget)
}

func (e *gwEnv) benchSmallGet(b *testing.B) {
	keys := e.rawKeys
	gw := e.get(b, "get-4KiB", e.small, clients, smallSlices, func(lo, hi int) *round {
		return e.rawSmall(b, lo, min(hi, len(keys)), func(ctx context.Context, c *pgx.Conn, i int, _ []byte) error {
			return smallSelect(ctx, c, keys[i], smallSize)
		})
	}, smallGetTarget)
	if c, ok := gw.serverCPU(); ok {
		b.ReportMetric(1e6/c, "ops/srv-cpu-s")
	}
}

// benchDedupPut writes 4 KiB objects that all have the same content: the
// case content addressing serves, and where writers meet on one blob row.
func (e *gwEnv) benchDedupPut(b *testing.B) {
	batch := newBatch(smallSize, e.sz.smallOps)
	for i := range batch {
		batch[i].id = 0 // one content for all
	}
	e.put(b, "put-4KiB identical", batch, clients, smallSlices, func(lo, hi int) *round {
		return e.rawSmall(b, lo, hi, func(ctx context.Context, c *pgx.Conn, _ int, buf []byte) error {
			fill(buf, 0, 0)
			return smallUpsert(ctx, c, fmt.Sprintf("dedup/%d", newID()), buf)
		})
	}, target{"no serialization on the blob row", nil})
}

// rawSmall is a raw 4 KiB round of ops [lo, hi) on 16 connections (nil
// without a raw medium).
func (e *gwEnv) rawSmall(b *testing.B, lo, hi int, op func(ctx context.Context, c *pgx.Conn, i int, buf []byte) error) *round {
	if e.raw == nil || hi <= lo {
		return nil
	}
	e.raw.smallConns(b) // opened before the CPU window
	return e.measureRaw(b, hi-lo, 0, func() ([]time.Duration, time.Duration, error) {
		return e.raw.smallRound(b, hi-lo, func(ctx context.Context, c *pgx.Conn, i int, buf []byte) error { return op(ctx, c, lo+i, buf) })
	})
}

// largeMedium returns the raw write and read of the engine's medium:
// pipelined bytea rows (pgchunks), pipelined large-object calls (pglo), fsynced files with
// hashing and a plain HTTP file server (local, embedded).
func (e *gwEnv) largeMedium() baseKind {
	switch e.engine {
	case config.EnginePGChunks:
		return baseKind{name: "bytea-pipe", pg: true, write: e.raw.byteaPipeWrite, read: e.raw.byteaPipeRead}
	case config.EnginePGLO:
		return baseKind{name: "pglo-pipe", pg: true, write: e.raw.loPipeWrite, read: e.raw.loPipeRead}
	default:
		return baseKind{name: "disk+hash", write: e.raw.diskHashWrite, read: e.raw.fileServerRead}
	}
}

// rawLarge writes (or reads back) objs on the engine's raw medium with
// 4 streams (nil without a raw medium).
func (e *gwEnv) rawLarge(b *testing.B, objs []baseObj, write bool) *round {
	if e.raw == nil || len(objs) == 0 {
		return nil
	}
	return e.measureRaw(b, len(objs), int64(len(objs))*objs[0].size, func() ([]time.Duration, time.Duration, error) {
		return e.raw.streams(b, e.largeMedium(), largeClients, objs, write)
	})
}

// largeSlices: each slice keeps all 4 clients busy.
func (e *gwEnv) largeSlices() int { return max(1, e.sz.largeObjs/largeClients) }

func (e *gwEnv) benchLargePut(b *testing.B) {
	n := e.sz.largeObjs
	if e.raw != nil {
		e.rawLargeObjs = newBaseObjs(n, largeSize)
	}
	e.large = e.put(b, "put-64MiB", newBatch(largeSize, n), largeClients, e.largeSlices(), func(lo, hi int) *round {
		return e.rawLarge(b, e.rawLargeObjs[min(lo, len(e.rawLargeObjs)):min(hi, len(e.rawLargeObjs))], true)
	}, largeTarget)
}

func (e *gwEnv) benchLargeGet(b *testing.B) {
	objs := e.rawLargeObjs
	e.get(b, "get-64MiB", e.large, largeClients, e.largeSlices(), func(lo, hi int) *round {
		return e.rawLarge(b, objs[min(lo, len(objs)):min(hi, len(objs))], false)
	}, largeTarget)
}

// paired runs the raw and the gateway side of a workload of n ops
// alternately, slice by slice (raw 0, gateway 0, raw 1, gateway 1, ...), so
// that the machine's drifting load lands on both sides alike, and adds up
// each side's slices.
func paired(n, slices int, raw func(lo, hi int) *round, gw func(lo, hi int) round) (round, *round) {
	var g round
	var r *round
	for s := range slices {
		lo, hi := n*s/slices, n*(s+1)/slices
		if rr := raw(lo, hi); rr != nil {
			if r == nil {
				r = &round{}
			}
			*r = r.add(*rr)
		}
		g = g.add(gw(lo, hi))
	}
	return g, r
}

// put times the PUTs of batch with `workers` clients, paired slice by slice
// with raw, and returns the batch.
func (e *gwEnv) put(b *testing.B, name string, batch []objRef, workers, slices int, raw func(lo, hi int) *round, t target) []objRef {
	gw, r := paired(len(batch), slices, raw, func(lo, hi int) round {
		return e.measure(b, hi-lo, objBytes(batch[lo:hi]), func() ([]time.Duration, time.Duration, error) {
			return e.putAll(b.Context(), batch[lo:hi], workers)
		})
	})
	e.sum.report(b, e.engine, name, gw, r, t)
	return batch
}

// get times the verified GETs of objs (written by the PUT round before) with
// `workers` clients, paired slice by slice with raw.
func (e *gwEnv) get(b *testing.B, name string, objs []objRef, workers, slices int, raw func(lo, hi int) *round, t target) round {
	if len(objs) == 0 {
		b.Skip("needs the PUT round before it")
	}
	gw, r := paired(len(objs), slices, raw, func(lo, hi int) round {
		return e.measure(b, hi-lo, objBytes(objs[lo:hi]), func() ([]time.Duration, time.Duration, error) {
			return e.getAll(b.Context(), objs[lo:hi], workers)
		})
	})
	e.sum.report(b, e.engine, name, gw, r, t)
	return gw
}

// objBytes is the bytes of a throughput round (objects of 1 MiB and more),
// 0 for an ops round.
func objBytes(objs []objRef) int64 {
	if len(objs) == 0 || objs[0].size < mib {
		return 0
	}
	return int64(len(objs)) * objs[0].size
}

// getAll reads the objects with `workers` clients and verifies every byte.
func (e *gwEnv) getAll(ctx context.Context, objs []objRef, workers int) ([]time.Duration, time.Duration, error) {
	scratch := make([][]byte, workers)
	bufs := make([][]byte, workers)
	for c := range workers {
		scratch[c] = make([]byte, 256*kib)
		bufs[c] = make([]byte, 256*kib)
	}
	return runOps(ctx, workers, len(objs), func(ctx context.Context, c, i int) error {
		return e.getOne(ctx, c, objs[i], scratch[c], bufs[c])
	})
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

func (e *gwEnv) getOne(ctx context.Context, c int, o objRef, scratch, buf []byte) error {
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

// newBatch names n new objects of the given size, each with its own content.
func newBatch(size int64, n int) []objRef {
	batch := make([]objRef, n)
	for i := range batch {
		id := newID()
		batch[i] = objRef{key: fmt.Sprintf("%s/%d", sizeName(size), id), id: id, size: size}
	}
	return batch
}

// putAll writes the batch with `workers` clients: per-object latency and
// wall time.
func (e *gwEnv) putAll(ctx context.Context, batch []objRef, workers int) ([]time.Duration, time.Duration, error) {
	return e.putAllIn(ctx, e.bucket, batch, workers)
}

// putAllIn is putAll into bucket; workers beyond the 16 clients share them.
func (e *gwEnv) putAllIn(ctx context.Context, bucket string, batch []objRef, workers int) ([]time.Duration, time.Duration, error) {
	return runOps(ctx, workers, len(batch), func(ctx context.Context, c, i int) error {
		o := batch[i]
		_, err := e.clients[c%len(e.clients)].PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(bucket),
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

// cleanup deletes every object of bucket on an external server, then the
// bucket.
func (e *gwEnv) cleanup(b *testing.B, bucket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := s3.NewListObjectsV2Paginator(e.clients[0], &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			b.Errorf("cleanup: list %s: %v", bucket, err)
			return
		}
		if len(page.Contents) == 0 {
			continue
		}
		ids := make([]types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			ids[i] = types.ObjectIdentifier{Key: o.Key}
		}
		if _, err := e.clients[0].DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket),
			Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
			b.Errorf("cleanup: delete objects: %v", err)
			return
		}
	}
	if _, err := e.clients[0].DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		b.Errorf("cleanup: delete bucket %s: %v", bucket, err)
	}
}

func sizeName(size int64) string {
	if size >= mib {
		return fmt.Sprintf("%dMiB", size/mib)
	}
	return fmt.Sprintf("%dKiB", size/kib)
}
