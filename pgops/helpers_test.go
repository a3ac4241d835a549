package pgops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/fsck"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg/content"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// inlineMax is the knee of the gateways here: small, so that "just above the
// knee" costs little.
const inlineMax = 4096

// waitLimit bounds every wait for a condition (a safety net, never a speed
// assertion).
const waitLimit = 60 * time.Second

func client(gw *testgw.Gateway) *s3.Client {
	cfg := aws.Config{
		Region:      gw.Region,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, ""),
		HTTPClient:  gw.HTTPClient,
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(gw.Endpoint)
		o.UsePathStyle = true
	})
}

// start starts a gateway with the knee of these tests on database dsn.
func start(t *testing.T, engine, dsn string, env ...string) *testgw.Gateway {
	t.Helper()
	return testgw.Start(t, testgw.Options{Engine: engine, DatabaseURL: dsn, InlineMax: inlineMax, Env: env})
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 14))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// object is one object the tests write and expect back.
type object struct {
	key  string
	data []byte
	// parts > 0: written by multipart upload in that many parts.
	parts int
}

// sizeClasses returns one object of every size class, keys prefixed: empty,
// inline, just above the knee, multi-chunk, and a two-part multipart upload.
func sizeClasses(prefix string, seed uint64) []object {
	objs := []object{
		{key: prefix + "empty", data: []byte{}},
		{key: prefix + "inline", data: randBytes(seed, 100)},
		{key: prefix + "knee", data: randBytes(seed+1, inlineMax+100)},
		{key: prefix + "chunks", data: randBytes(seed+2, 2*content.ChunkSize+123)},
		{key: prefix + "multipart", data: randBytes(seed+3, store.MinPartSize+777), parts: 2},
	}
	if os.Getenv("S3GATE_PGOPS_BIG") != "" { // make pgops: many more, of assorted sizes
		for i := range 40 {
			objs = append(objs, object{key: fmt.Sprintf("%smore/%02d", prefix, i), data: randBytes(seed+100+uint64(i), (i*i*7919)%(3*content.ChunkSize))})
		}
	}
	return objs
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func createBucket(t *testing.T, c *s3.Client, bucket string) {
	t.Helper()
	if _, err := c.CreateBucket(ctxT(t), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// put writes o (by multipart upload if o.parts > 0).
func put(t *testing.T, c *s3.Client, bucket string, o object) {
	t.Helper()
	ctx := ctxT(t)
	if o.parts == 0 {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &o.key, Body: bytes.NewReader(o.data)}); err != nil {
			t.Fatalf("put %s: %v", o.key, err)
		}
		return
	}
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: &o.key})
	if err != nil {
		t.Fatalf("create upload %s: %v", o.key, err)
	}
	var done []types.CompletedPart
	partSize := max(store.MinPartSize, (len(o.data)+o.parts-1)/o.parts)
	for i, off := int32(1), 0; off < len(o.data); i, off = i+1, off+partSize {
		end := min(off+partSize, len(o.data))
		r, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: &o.key, UploadId: up.UploadId,
			PartNumber: aws.Int32(i), Body: bytes.NewReader(o.data[off:end])})
		if err != nil {
			t.Fatalf("upload part %d of %s: %v", i, o.key, err)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(i), ETag: r.ETag})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: &o.key,
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatalf("complete %s: %v", o.key, err)
	}
}

// putAll writes every object.
func putAll(t *testing.T, c *s3.Client, bucket string, objs []object) {
	t.Helper()
	for _, o := range objs {
		put(t, c, bucket, o)
	}
}

// get reads key whole and returns its bytes.
func get(ctx context.Context, c *s3.Client, bucket, key string) ([]byte, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// expectExactly checks that bucket holds exactly objs (by listing) and that
// each reads back byte-exact (SHA-256).
func expectExactly(t *testing.T, c *s3.Client, bucket string, objs []object) {
	t.Helper()
	ctx := ctxT(t)
	var want []string
	for _, o := range objs {
		want = append(want, o.key)
	}
	sort.Strings(want)
	got := list(t, c, bucket)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("bucket %s lists %q, want %q", bucket, got, want)
	}
	for _, o := range objs {
		b, err := get(ctx, c, bucket, o.key)
		if err != nil {
			t.Fatalf("get %s/%s: %v", bucket, o.key, err)
		}
		if sha256.Sum256(b) != sha256.Sum256(o.data) {
			t.Fatalf("get %s/%s: %d bytes, sha256 %x; want %d bytes, %x", bucket, o.key, len(b), sha256.Sum256(b), len(o.data), sha256.Sum256(o.data))
		}
	}
}

// list returns every key of bucket, in order.
func list(t *testing.T, c *s3.Client, bucket string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket})
	for p.HasMorePages() {
		page, err := p.NextPage(ctxT(t))
		if err != nil {
			t.Fatalf("list %s: %v", bucket, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, *o.Key)
		}
	}
	return keys
}

// fsckClean runs `s3gate fsck` on dsn (and data dir, if any) and fails the
// test unless it reports a clean store.
func fsckClean(t *testing.T, dsn string, extra ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	code := fsck.Command(ctxT(t), append([]string{"-database-url", dsn}, extra...), &out, &errb)
	if code != 0 || !strings.Contains(out.String(), "fsck: clean") {
		t.Fatalf("fsck exit %d:\n%s%s", code, out.String(), errb.String())
	}
	return out.String()
}

// tool runs one of PostgreSQL's client programs as this process's user.
func tool(t *testing.T, name string, args ...string) string {
	t.Helper()
	bin, ok := pgtest.Binaries()
	if !ok {
		t.Fatal("no PostgreSQL binaries")
	}
	out, err := exec.CommandContext(ctxT(t), bin+"/"+name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := conn.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return conn
}

// poll calls cond until it reports true, failing the test after waitLimit.
func poll(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached after %s (last error: %v)", what, waitLimit, err)
		}
		time.Sleep(20 * time.Millisecond) // the polling interval of a condition, not a synchronization
	}
}

// caughtUp waits until the standby at standbyURL has replayed everything the
// primary at primaryURL has written so far.
func caughtUp(t *testing.T, primaryURL, standbyURL string) {
	t.Helper()
	var lsn string
	if err := connect(t, primaryURL).QueryRow(ctxT(t), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatalf("primary LSN: %v", err)
	}
	sb := connect(t, standbyURL)
	poll(t, "standby replayed "+lsn, func() (bool, error) {
		var ok bool
		err := sb.QueryRow(ctxT(t), `SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, lsn).Scan(&ok)
		return ok, err
	})
}

// apiCode returns the S3 error code and message of err ("" if none).
func apiCode(err error) (code, msg string) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode(), ae.ErrorMessage()
	}
	return "", ""
}
