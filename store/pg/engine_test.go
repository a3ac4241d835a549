package pg

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg/content"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const testKnee = 256 << 10

var modes = []string{LargePGLO, LargePGChunks, LargeLocal}

type env struct {
	e     *Engine
	media *localfs.Media
	dir   string
	dsn   string
}

func newEnv(t testing.TB, mode string) *env {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	cfg := Config{DatabaseURL: dsn, InlineMax: testKnee, Large: mode, Region: "us-east-1"}
	v := &env{dsn: dsn}
	if mode == LargeLocal {
		v.dir = t.TempDir()
		m, err := localfs.Open(v.dir, false)
		if err != nil {
			t.Fatalf("localfs.Open: %v", err)
		}
		cfg.Media, v.media = m, m
	}
	e, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(e.Close)
	v.e = e
	if err := e.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	return v
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n - n%8; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func (v *env) put(t *testing.T, key string, data []byte) store.ObjectInfo {
	t.Helper()
	info, err := v.e.PutObject(context.Background(), "b", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info
}

func (v *env) get(t *testing.T, key string, opts store.GetOptions) (store.ObjectInfo, *store.ByteRange, []byte) {
	t.Helper()
	info, rng, rd, err := v.e.GetObject(context.Background(), "b", key, opts, false)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return info, rng, b
}

func (v *env) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := v.e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// contentLeft counts stored content units of every kind: blob rows, large
// objects, chunk rows, published files and stage files.
func (v *env) contentLeft(t *testing.T) map[string]int {
	t.Helper()
	m := map[string]int{
		"blobs":  v.count(t, `SELECT count(*) FROM blobs`),
		"los":    v.count(t, `SELECT count(*) FROM pg_largeobject_metadata`),
		"chunks": v.count(t, `SELECT count(*) FROM blob_chunks`),
		"staged": v.count(t, `SELECT count(*) FROM blob_stages`),
	}
	if v.media != nil {
		ids, err := v.media.BlobIDs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		stages, err := v.media.StageFiles()
		if err != nil {
			t.Fatal(err)
		}
		m["files"], m["stages"] = len(ids), len(stages)
	}
	return m
}

func sameBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		gs, ws := sha256.Sum256(got), sha256.Sum256(want)
		t.Fatalf("%s: got %d bytes sha256 %x, want %d bytes sha256 %x", what, len(got), gs[:6], len(want), ws[:6])
	}
}

func TestMigrateConcurrent(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = Migrate(ctx, dsn) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate #%d: %v", i, err)
		}
	}
	if err := Migrate(ctx, dsn); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	e, err := Open(ctx, Config{DatabaseURL: dsn, Large: LargePGChunks, SkipMigrate: true})
	if err != nil {
		t.Fatalf("Open after migrate: %v", err)
	}
	defer e.Close()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var n, maxV int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &maxV); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || maxV != ms[len(ms)-1].version {
		t.Errorf("schema_migrations: %d rows, max %d; want %d rows, max %d", n, maxV, len(ms), ms[len(ms)-1].version)
	}
}

func TestOpenRefusesStaleSchema(t *testing.T) {
	_, err := Open(context.Background(), Config{DatabaseURL: pgtest.DSN(t), SkipMigrate: true})
	if err == nil {
		t.Fatal("Open with SkipMigrate on an empty database succeeded")
	}
}

func TestBuckets(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	ctx := context.Background()
	if err := v.e.CreateBucket(ctx, "b", ""); !errors.Is(err, store.ErrBucketExists) {
		t.Errorf("CreateBucket twice: %v, want ErrBucketExists", err)
	}
	if err := v.e.CreateBucket(ctx, "a", "eu-west-1"); err != nil {
		t.Fatal(err)
	}
	bs, err := v.e.ListBuckets(ctx)
	if err != nil || len(bs) != 2 || bs[0].Name != "a" || bs[0].Region != "eu-west-1" || bs[1].Name != "b" || bs[1].Region != "us-east-1" {
		t.Fatalf("ListBuckets = %+v, %v", bs, err)
	}
	if _, err := v.e.HeadBucket(ctx, "nope"); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("HeadBucket(nope): %v", err)
	}
	v.put(t, "k", []byte("x"))
	if err := v.e.DeleteBucket(ctx, "b"); !errors.Is(err, store.ErrBucketNotEmpty) {
		t.Errorf("DeleteBucket with object: %v", err)
	}
	if err := v.e.DeleteObject(ctx, "b", "k"); err != nil {
		t.Fatal(err)
	}
	u, err := v.e.CreateMultipartUpload(ctx, "b", "m", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.UploadPart(ctx, "b", "m", u.UploadID, 1, strings.NewReader("part"), store.PutOptions{Size: 4}); err != nil {
		t.Fatal(err)
	}
	// Only in-progress uploads: they go with the bucket, parts included.
	if err := v.e.DeleteBucket(ctx, "b"); err != nil {
		t.Errorf("DeleteBucket with only an upload: %v", err)
	}
	var left int
	if err := v.e.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM uploads WHERE upload_id = $1) +
		(SELECT count(*) FROM upload_parts WHERE upload_id = $1)`, u.UploadID).Scan(&left); err != nil || left != 0 {
		t.Errorf("upload rows left after DeleteBucket: %d, %v", left, err)
	}
	if err := v.e.AbortMultipartUpload(ctx, "b", "m", u.UploadID); !errors.Is(err, store.ErrNoSuchUpload) {
		t.Errorf("abort of an upload dropped with its bucket: %v", err)
	}
	if err := v.e.DeleteBucket(ctx, "b"); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("DeleteBucket gone: %v", err)
	}
	if _, err := v.e.PutObject(ctx, "b", "k", strings.NewReader("x"), store.PutOptions{Size: 1}); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("put into deleted bucket: %v", err)
	}
	if _, _, _, err := v.e.GetObject(ctx, "b", "k", store.GetOptions{}, false); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("get from deleted bucket: %v", err)
	}
}

// TestPutGet covers sizes around the knee and across chunk boundaries, with
// the bytes read back compared, for every large engine.
func TestPutGet(t *testing.T) {
	sizes := []int{0, 1, testKnee, testKnee + 1, 3<<20 + 123}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			for i, size := range sizes {
				data := randBytes(uint64(i+1), size)
				key := fmt.Sprintf("obj/%d", size)
				meta := store.ObjectMeta{ContentType: "text/plain", User: map[string]string{"k": "v"}}
				info, err := v.e.PutObject(context.Background(), "b", key, bytes.NewReader(data),
					store.PutOptions{Size: int64(size), Meta: meta, ChecksumAlgorithm: store.AlgCRC32C})
				if err != nil {
					t.Fatalf("put %d: %v", size, err)
				}
				if info.ETag != md5hex(data) || info.Size != int64(size) || info.Checksum.Algorithm != store.AlgCRC32C {
					t.Errorf("put %d: info %+v", size, info)
				}
				got, rng, b := v.get(t, key, store.GetOptions{})
				sameBytes(t, key, b, data)
				if rng != nil || got.ETag != info.ETag || got.Meta.ContentType != "text/plain" || got.Meta.User["k"] != "v" ||
					got.Checksum != info.Checksum || !got.LastModified.Equal(info.LastModified) {
					t.Errorf("get %d: info %+v range %v, put said %+v", size, got, rng, info)
				}
				wantTier := mode
				if size <= testKnee {
					wantTier = store.TierInline
				}
				var tier string
				if err := v.e.pool.QueryRow(context.Background(), `SELECT b.tier FROM objects o JOIN blobs b ON b.id = o.blob_id WHERE o.key = $1`, key).Scan(&tier); err != nil {
					t.Fatal(err)
				}
				if tier != wantTier {
					t.Errorf("size %d stored in tier %q, want %q", size, tier, wantTier)
				}
				head, _, rd, err := v.e.GetObject(context.Background(), "b", key, store.GetOptions{}, true)
				if err != nil || rd != nil || head.ETag != info.ETag || head.Size != int64(size) {
					t.Errorf("head %d: %+v reader=%v err=%v", size, head, rd != nil, err)
				}
			}
		})
	}
}

func TestRangesAndConditions(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			data := randBytes(7, 3<<20+5)
			info := v.put(t, "big", data)
			size := int64(len(data))
			tests := []struct {
				spec       string
				start, end int64
				err        error
			}{
				{"bytes=0-0", 0, 0, nil},
				{"bytes=1048575-1048577", 1048575, 1048577, nil},
				{"bytes=-10", size - 10, size - 1, nil},
				{"bytes=3000000-", 3000000, size - 1, nil},
				{"bytes=100-99999999", 100, size - 1, nil},
				{fmt.Sprintf("bytes=%d-", size), 0, 0, store.ErrInvalidRange},
			}
			for _, tc := range tests {
				_, rng, rd, err := v.e.GetObject(context.Background(), "b", "big", store.GetOptions{RangeSpec: tc.spec}, false)
				if tc.err != nil {
					if !errors.Is(err, tc.err) || rd != nil {
						t.Errorf("%s: err %v, want %v", tc.spec, err, tc.err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", tc.spec, err)
				}
				b, err := io.ReadAll(rd)
				rd.Close()
				if err != nil {
					t.Fatalf("%s: read: %v", tc.spec, err)
				}
				if rng == nil || rng.Start != tc.start || rng.End != tc.end {
					t.Errorf("%s: range %+v, want %d-%d", tc.spec, rng, tc.start, tc.end)
				}
				sameBytes(t, tc.spec, b, data[tc.start:tc.end+1])
			}
			past := info.LastModified.Add(-time.Hour)
			future := info.LastModified.Add(time.Hour)
			conds := []struct {
				name string
				c    store.Conditions
				err  error
			}{
				{"if-match ok", store.Conditions{IfMatch: `"` + info.ETag + `"`}, nil},
				{"if-match bad", store.Conditions{IfMatch: `"x"`}, store.ErrPreconditionFailed},
				{"if-none-match", store.Conditions{IfNoneMatch: info.ETag}, store.ErrNotModified},
				{"if-modified-since future", store.Conditions{IfModifiedSince: &future}, store.ErrNotModified},
				{"if-unmodified-since past", store.Conditions{IfUnmodifiedSince: &past}, store.ErrPreconditionFailed},
			}
			for _, tc := range conds {
				got, _, rd, err := v.e.GetObject(context.Background(), "b", "big", store.GetOptions{Cond: tc.c}, false)
				if rd != nil {
					rd.Close()
				}
				if !errors.Is(err, tc.err) && !(tc.err == nil && err == nil) {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
				}
				if tc.err != nil && got.ETag != info.ETag {
					t.Errorf("%s: no ObjectInfo with the error: %+v", tc.name, got)
				}
			}
		})
	}
}

func TestDedupOverwriteDelete(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			data := randBytes(11, 1<<20+17)
			v.put(t, "one", data)
			v.put(t, "two", data)
			left := v.contentLeft(t)
			want := map[string]int{"blobs": 1, "los": 0, "chunks": 0, "staged": 0}
			switch mode {
			case LargePGLO:
				want["los"] = 1
			case LargePGChunks:
				want["chunks"] = 2
			case LargeLocal:
				want["files"], want["stages"] = 1, 0
			}
			if fmt.Sprint(left) != fmt.Sprint(want) {
				t.Errorf("after dedup put: %v, want %v", left, want)
			}
			_, _, b := v.get(t, "two", store.GetOptions{})
			sameBytes(t, "two", b, data)

			other := randBytes(12, 2<<20)
			v.put(t, "one", other)
			_, _, b = v.get(t, "one", store.GetOptions{})
			sameBytes(t, "overwritten", b, other)
			_, _, b = v.get(t, "two", store.GetOptions{})
			sameBytes(t, "untouched", b, data)

			if err := v.e.DeleteObject(ctx, "b", "one"); err != nil {
				t.Fatal(err)
			}
			if err := v.e.DeleteObject(ctx, "b", "one"); err != nil {
				t.Errorf("delete missing key: %v", err)
			}
			if _, _, _, err := v.e.GetObject(ctx, "b", "one", store.GetOptions{}, false); !errors.Is(err, store.ErrNoSuchKey) {
				t.Errorf("get deleted: %v", err)
			}
			res, err := v.e.DeleteObjects(ctx, "b", []string{"two", "nothing"})
			if err != nil || len(res) != 2 || res[0].Key != "two" || res[0].Err != nil || res[1].Err != nil {
				t.Fatalf("DeleteObjects: %+v, %v", res, err)
			}
			if n := v.count(t, `SELECT count(*) FROM objects`); n != 0 {
				t.Errorf("%d objects left", n)
			}
		})
	}
}

// failingReader returns data, then an error: a client that goes away after
// the large engine has started writing.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, f.err
	}
	return n, err
}

// assertPoolClean proves amendment A1: no pooled connection is inside a
// transaction, no session of this database holds an advisory lock or sits
// idle in a transaction.
func (v *env) assertPoolClean(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, c := range v.e.pool.AcquireAllIdle(ctx) {
		if st := c.Conn().PgConn().TxStatus(); st != 'I' {
			t.Errorf("pooled connection in transaction status %q", st)
		}
		c.Release()
	}
	if n := v.count(t, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND a.datname = current_database()`); n != 0 {
		t.Errorf("%d advisory locks held", n)
	}
	if n := v.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND state LIKE 'idle in transaction%'`); n != 0 {
		t.Errorf("%d sessions idle in transaction", n)
	}
}

// TestFailuresLeaveNothing forces failures after BEGIN (a body that breaks
// after the large object / chunk rows / stage file were started, a bad
// digest, a failed conditional write under the object lock) and checks that
// nothing was stored and the pooled connections are clean (A1).
func TestFailuresLeaveNothing(t *testing.T) {
	clientGone := errors.New("client went away")
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			v.put(t, "exists", []byte("small"))
			before := v.contentLeft(t)
			data := randBytes(21, 3<<20)
			wrongMD5 := md5.Sum([]byte("other"))
			tests := []struct {
				name string
				key  string
				body io.Reader
				opts store.PutOptions
				want error
			}{
				{"body fails mid-stream", "k1", &failingReader{r: bytes.NewReader(data[:2<<20]), err: clientGone}, store.PutOptions{Size: -1}, clientGone},
				{"bad content-md5 large", "k2", bytes.NewReader(data), store.PutOptions{Size: int64(len(data)), ContentMD5: wrongMD5[:]}, store.ErrBadDigest},
				{"bad content-md5 inline", "k3", bytes.NewReader(data[:100]), store.PutOptions{Size: 100, ContentMD5: wrongMD5[:]}, store.ErrBadDigest},
				{"bad checksum large", "k4", bytes.NewReader(data), store.PutOptions{Size: int64(len(data)), Checksums: map[string]string{"CRC32": "AAAAAA=="}}, store.ErrBadDigest},
				{"short body", "k5", bytes.NewReader(data[:1<<20]), store.PutOptions{Size: int64(len(data))}, store.ErrIncompleteBody},
				{"if-none-match on existing", "exists", bytes.NewReader(data), store.PutOptions{Size: int64(len(data)), IfNoneMatch: "*"}, store.ErrPreconditionFailed},
				{"if-match mismatch", "exists", bytes.NewReader(data), store.PutOptions{Size: int64(len(data)), IfMatch: `"nope"`}, store.ErrPreconditionFailed},
			}
			for _, tc := range tests {
				_, err := v.e.PutObject(ctx, "b", tc.key, tc.body, tc.opts)
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
				}
				if after := v.contentLeft(t); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("%s: content %v, before %v", tc.name, after, before)
				}
				v.assertPoolClean(t)
			}
			cctx, cancel := context.WithCancel(ctx)
			cancelling := io.MultiReader(bytes.NewReader(data[:2<<20]), readerFunc(func([]byte) (int, error) {
				cancel()
				return 0, errors.New("cancelled")
			}))
			if _, err := v.e.PutObject(cctx, "b", "k6", cancelling, store.PutOptions{Size: -1}); err == nil {
				t.Errorf("put with cancelled context succeeded")
			}
			if after := v.contentLeft(t); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("cancelled: content %v, before %v", after, before)
			}
			v.assertPoolClean(t)
			if mode != LargeLocal {
				// GC's stage reaper takes the stage mid-body: the put cannot
				// publish, answers 503 and leaves nothing.
				reaped := false
				reaping := io.MultiReader(bytes.NewReader(data[:2<<20]), readerFunc(func(p []byte) (int, error) {
					if !reaped {
						reaped = true
						v.unstageAll(t)
					}
					return 0, io.EOF
				}), bytes.NewReader(data[2<<20:]))
				if _, err := v.e.PutObject(ctx, "b", "k7", reaping, store.PutOptions{Size: int64(len(data))}); !errors.Is(err, store.ErrUnavailable) {
					t.Errorf("stage reaped mid-body: err %v, want ErrUnavailable", err)
				}
				if after := v.contentLeft(t); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("stage reaped: content %v, before %v", after, before)
				}
				v.assertPoolClean(t)
			}
			if n := v.count(t, `SELECT count(*) FROM objects`); n != 1 {
				t.Errorf("%d objects, want 1", n)
			}
			_, _, b := v.get(t, "exists", store.GetOptions{})
			sameBytes(t, "exists", b, []byte("small"))
		})
	}
}

type readerFunc func([]byte) (int, error)

// unstageAll drops every stage row with its content, as GC's stage reaper
// does with abandoned ones.
func (v *env) unstageAll(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	rows, err := v.e.pool.Query(ctx, `SELECT blob_id FROM blob_stages`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) == 0 {
		t.Fatal("no stage row to reap")
	}
	for _, id := range ids {
		if err := v.e.withTx(ctx, func(tx pgx.Tx) error {
			_, err := content.Unstage(ctx, tx, id, -1)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestConcurrentPutsSameKey(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			const n = 6
			datas := make([][]byte, n)
			for i := range datas {
				size := 1000 + i
				if i%2 == 0 {
					size = 1<<20 + i // large
				}
				datas[i] = randBytes(uint64(100+i), size)
			}
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range datas {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = v.e.PutObject(ctx, "b", "same", bytes.NewReader(datas[i]), store.PutOptions{Size: int64(len(datas[i]))})
				}()
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("put %d: %v", i, err)
				}
			}
			info, _, b := v.get(t, "same", store.GetOptions{})
			found := false
			for _, d := range datas {
				if bytes.Equal(b, d) {
					found = true
					if info.ETag != md5hex(d) {
						t.Errorf("etag %s does not match the content read", info.ETag)
					}
				}
			}
			if !found {
				t.Errorf("content read (%d bytes) is none of the contents written", len(b))
			}
			v.assertPoolClean(t)
		})
	}
}

func TestCopyObject(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			data := randBytes(31, 2<<20+3)
			src := v.put(t, "src", data)
			blobs := v.count(t, `SELECT count(*) FROM blobs`)
			info, err := v.e.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src"}, "b", "dst", store.CopyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if info.ETag != src.ETag || info.Size != src.Size {
				t.Errorf("copy info %+v", info)
			}
			if n := v.count(t, `SELECT count(*) FROM blobs`); n != blobs {
				t.Errorf("copy created blobs: %d, was %d", n, blobs)
			}
			_, _, b := v.get(t, "dst", store.GetOptions{})
			sameBytes(t, "dst", b, data)

			if _, err := v.e.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src"}, "b", "src", store.CopyOptions{}); !errors.Is(err, store.ErrInvalidRequest) {
				t.Errorf("self copy without REPLACE: %v", err)
			}
			meta := store.ObjectMeta{ContentType: "image/png"}
			if _, err := v.e.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src"}, "b", "src", store.CopyOptions{ReplaceMeta: true, Meta: meta}); err != nil {
				t.Errorf("self copy with REPLACE: %v", err)
			}
			got, _, b := v.get(t, "src", store.GetOptions{})
			sameBytes(t, "src after self copy", b, data)
			if got.Meta.ContentType != "image/png" {
				t.Errorf("meta after REPLACE: %+v", got.Meta)
			}
			if _, err := v.e.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src", Cond: store.Conditions{IfNoneMatch: src.ETag}}, "b", "x", store.CopyOptions{}); !errors.Is(err, store.ErrPreconditionFailed) {
				t.Errorf("copy-source-if-none-match: %v", err)
			}
			if _, err := v.e.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "missing"}, "b", "x", store.CopyOptions{}); !errors.Is(err, store.ErrNoSuchKey) {
				t.Errorf("copy of missing: %v", err)
			}
			if _, err := v.e.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src"}, "nobucket", "x", store.CopyOptions{}); !errors.Is(err, store.ErrNoSuchBucket) {
				t.Errorf("copy to missing bucket: %v", err)
			}
			v.assertPoolClean(t)
		})
	}
}

func TestMultipart(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			sizes := []int{store.MinPartSize, store.MinPartSize + 1, 100}
			var whole []byte
			var parts []store.CompletePart
			u, err := v.e.CreateMultipartUpload(ctx, "b", "mp", store.ObjectMeta{ContentType: "a/b"}, store.AlgCRC32, store.ChecksumFullObject)
			if err != nil {
				t.Fatal(err)
			}
			var partData [][]byte
			for i, size := range sizes {
				d := randBytes(uint64(40+i), size)
				partData = append(partData, d)
				whole = append(whole, d...)
				pi, err := v.e.UploadPart(ctx, "b", "mp", u.UploadID, i+1, bytes.NewReader(d), store.PutOptions{Size: int64(size)})
				if err != nil {
					t.Fatalf("part %d: %v", i+1, err)
				}
				if pi.ETag != md5hex(d) || pi.Checksum.Algorithm != store.AlgCRC32 {
					t.Errorf("part %d info %+v", i+1, pi)
				}
				parts = append(parts, store.CompletePart{Number: i + 1, ETag: pi.ETag})
			}
			// Re-uploading part 3 replaces it.
			d3 := randBytes(49, 200)
			pi3, err := v.e.UploadPart(ctx, "b", "mp", u.UploadID, 3, bytes.NewReader(d3), store.PutOptions{Size: 200})
			if err != nil {
				t.Fatal(err)
			}
			whole = append(whole[:len(whole)-100], d3...)
			parts[2].ETag = pi3.ETag

			lp, err := v.e.ListParts(ctx, "b", "mp", u.UploadID, 0, 2)
			if err != nil || len(lp.Parts) != 2 || !lp.Truncated || lp.NextPartNumberMarker != 2 {
				t.Fatalf("ListParts: %+v, %v", lp, err)
			}
			lp, err = v.e.ListParts(ctx, "b", "mp", u.UploadID, 2, 2)
			if err != nil || len(lp.Parts) != 1 || lp.Truncated || lp.Parts[0].Size != 200 {
				t.Fatalf("ListParts page 2: %+v, %v", lp, err)
			}
			errCases := []struct {
				name  string
				parts []store.CompletePart
				want  error
			}{
				{"wrong etag", []store.CompletePart{parts[0], {Number: 2, ETag: "00"}, parts[2]}, store.ErrInvalidPart},
				{"missing part", []store.CompletePart{parts[0], parts[1], {Number: 9, ETag: parts[2].ETag}}, store.ErrInvalidPart},
				{"order", []store.CompletePart{parts[1], parts[0], parts[2]}, store.ErrInvalidPartOrder},
				{"missing last part", []store.CompletePart{parts[2], {Number: 4, ETag: "x"}}, store.ErrInvalidPart},
			}
			for _, tc := range errCases {
				if _, err := v.e.CompleteMultipartUpload(ctx, "b", "mp", u.UploadID, tc.parts, store.PutOptions{}); !errors.Is(err, tc.want) {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
				}
			}
			// EntityTooSmall: a small part that is not the last.
			u2, err := v.e.CreateMultipartUpload(ctx, "b", "small", store.ObjectMeta{}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			var small []store.CompletePart
			for i := 1; i <= 2; i++ {
				pi, err := v.e.UploadPart(ctx, "b", "small", u2.UploadID, i, strings.NewReader("tiny"), store.PutOptions{Size: 4})
				if err != nil {
					t.Fatal(err)
				}
				small = append(small, store.CompletePart{Number: i, ETag: pi.ETag})
			}
			if _, err := v.e.CompleteMultipartUpload(ctx, "b", "small", u2.UploadID, small, store.PutOptions{}); !errors.Is(err, store.ErrEntityTooSmall) {
				t.Errorf("small parts: %v, want ErrEntityTooSmall", err)
			}
			if _, err := v.e.UploadPart(ctx, "b", "mp", "bogus", 1, strings.NewReader("x"), store.PutOptions{Size: 1}); !errors.Is(err, store.ErrNoSuchUpload) {
				t.Errorf("UploadPart to bogus upload: %v", err)
			}
			if _, err := v.e.UploadPart(ctx, "b", "other-key", u.UploadID, 1, strings.NewReader("x"), store.PutOptions{Size: 1}); !errors.Is(err, store.ErrNoSuchUpload) {
				t.Errorf("UploadPart with wrong key: %v", err)
			}

			lu, err := v.e.ListMultipartUploads(ctx, "b", store.ListUploadsParams{})
			if err != nil || len(lu.Uploads) != 2 || lu.Uploads[0].Key != "mp" || lu.Uploads[1].Key != "small" {
				t.Fatalf("ListMultipartUploads: %+v, %v", lu, err)
			}

			info, err := v.e.CompleteMultipartUpload(ctx, "b", "mp", u.UploadID, parts, store.PutOptions{})
			if err != nil {
				t.Fatalf("complete: %v", err)
			}
			if !strings.HasSuffix(info.ETag, "-3") || info.Size != int64(len(whole)) || info.Checksum.Type != store.ChecksumFullObject {
				t.Errorf("complete info %+v", info)
			}
			// A repeat (an SDK retry after a lost reply) answers the same
			// result; another part list finds no upload.
			again, err := v.e.CompleteMultipartUpload(ctx, "b", "mp", u.UploadID, parts, store.PutOptions{})
			if err != nil || again.ETag != info.ETag || again.Checksum != info.Checksum || again.Size != info.Size {
				t.Errorf("complete twice: %+v, %v; want %+v", again, err, info)
			}
			if _, err := v.e.CompleteMultipartUpload(ctx, "b", "mp", u.UploadID, parts[:2], store.PutOptions{}); !errors.Is(err, store.ErrNoSuchUpload) {
				t.Errorf("complete again with other parts: %v", err)
			}
			got, _, b := v.get(t, "mp", store.GetOptions{})
			sameBytes(t, "multipart object", b, whole)
			if got.ETag != info.ETag || len(got.Parts) != 3 || got.Meta.ContentType != "a/b" || got.Checksum != info.Checksum {
				t.Errorf("get info %+v", got)
			}
			p1 := int64(sizes[0])
			p2 := p1 + int64(sizes[1])
			ranges := []struct{ start, end int64 }{
				{p1 - 10, p1 + 10}, // across the 1|2 boundary
				{p1 - 1, p2},       // from the end of 1 to the start of 3
				{0, int64(len(whole)) - 1},
				{p2 + 5, p2 + 5}, // inside the inline last part
			}
			for _, r := range ranges {
				_, rng, b := v.get(t, "mp", store.GetOptions{RangeSpec: fmt.Sprintf("bytes=%d-%d", r.start, r.end)})
				if rng == nil || rng.Start != r.start || rng.End != r.end {
					t.Errorf("range %v: got %+v", r, rng)
				}
				sameBytes(t, fmt.Sprintf("range %d-%d", r.start, r.end), b, whole[r.start:r.end+1])
			}
			_, rng, b := v.get(t, "mp", store.GetOptions{PartNumber: 2})
			if rng == nil || rng.Start != p1 || rng.End != p2-1 {
				t.Errorf("partNumber 2 range %+v", rng)
			}
			sameBytes(t, "part 2", b, partData[1])
			if _, _, _, err := v.e.GetObject(ctx, "b", "mp", store.GetOptions{PartNumber: 4}, false); !errors.Is(err, store.ErrInvalidRange) {
				t.Errorf("partNumber 4: %v", err)
			}
			// Copy of a multipart object references the same part blobs.
			blobs := v.count(t, `SELECT count(*) FROM blobs`)
			if _, err := v.e.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "mp"}, "b", "mp-copy", store.CopyOptions{}); err != nil {
				t.Fatal(err)
			}
			_, _, b = v.get(t, "mp-copy", store.GetOptions{})
			sameBytes(t, "copy of multipart", b, whole)
			if n := v.count(t, `SELECT count(*) FROM blobs`); n != blobs {
				t.Errorf("copy of multipart created blobs: %d, was %d", n, blobs)
			}
			// Overwriting a multipart object with a single put drops its manifest.
			v.put(t, "mp", []byte("plain"))
			if n := v.count(t, `SELECT count(*) FROM object_parts WHERE key = 'mp'`); n != 0 {
				t.Errorf("%d manifest rows left after overwrite", n)
			}
			if err := v.e.AbortMultipartUpload(ctx, "b", "small", u2.UploadID); err != nil {
				t.Fatal(err)
			}
			if err := v.e.AbortMultipartUpload(ctx, "b", "small", u2.UploadID); !errors.Is(err, store.ErrNoSuchUpload) {
				t.Errorf("abort twice: %v", err)
			}
			v.assertPoolClean(t)
		})
	}
}

func TestUploadPartCopy(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			data := randBytes(61, store.MinPartSize+1000)
			v.put(t, "src", data)
			u, err := v.e.CreateMultipartUpload(ctx, "b", "dst", store.ObjectMeta{}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			blobs := v.count(t, `SELECT count(*) FROM blobs`)
			p1, err := v.e.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: "src"}, "b", "dst", u.UploadID, 1)
			if err != nil {
				t.Fatal(err)
			}
			if n := v.count(t, `SELECT count(*) FROM blobs`); n != blobs {
				t.Errorf("whole-object part copy created a blob")
			}
			p2, err := v.e.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: "src", Range: &store.ByteRange{Start: 10, End: 2<<20 + 9}}, "b", "dst", u.UploadID, 2)
			if err != nil {
				t.Fatal(err)
			}
			if p2.Size != 2<<20 || p2.ETag != md5hex(data[10:2<<20+10]) {
				t.Errorf("range part copy %+v", p2)
			}
			if _, err := v.e.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: "src", Range: &store.ByteRange{Start: 0, End: int64(len(data))}}, "b", "dst", u.UploadID, 3); !errors.Is(err, store.ErrInvalidArgument) {
				t.Errorf("range beyond source: %v", err)
			}
			if _, err := v.e.CompleteMultipartUpload(ctx, "b", "dst", u.UploadID, []store.CompletePart{{Number: 1, ETag: p1.ETag}, {Number: 2, ETag: p2.ETag}}, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			_, _, b := v.get(t, "dst", store.GetOptions{})
			sameBytes(t, "dst", b, append(append([]byte{}, data...), data[10:2<<20+10]...))
		})
	}
}

func TestListObjects(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	ctx := context.Background()
	keys := []string{"a/1", "a/2", "a/b/3", "b", "c/x/1", "c/y", "d", "d/", "z", "é/1"} // byte order
	for _, k := range keys {
		v.put(t, k, []byte(k))
	}
	type entry = string // objects plain, common prefixes suffixed with " (cp)"
	list := func(p store.ListParams) ([]entry, store.ListResult) {
		res, err := v.e.ListObjects(ctx, "b", p)
		if err != nil {
			t.Fatalf("list %+v: %v", p, err)
		}
		var out []entry
		for _, o := range res.Objects {
			out = append(out, o.Key)
		}
		for _, cp := range res.CommonPrefixes {
			out = append(out, cp+" (cp)")
		}
		sort.Strings(out)
		return out, res
	}
	tests := []struct {
		name string
		p    store.ListParams
		want []entry
	}{
		{"all", store.ListParams{}, keys},
		{"delimiter", store.ListParams{Delimiter: "/"}, []entry{"a/ (cp)", "b", "c/ (cp)", "d", "d/ (cp)", "z", "é/ (cp)"}},
		{"prefix", store.ListParams{Prefix: "a/"}, []entry{"a/1", "a/2", "a/b/3"}},
		{"prefix+delimiter", store.ListParams{Prefix: "a/", Delimiter: "/"}, []entry{"a/1", "a/2", "a/b/ (cp)"}},
		{"prefix+delimiter c", store.ListParams{Prefix: "c/", Delimiter: "/"}, []entry{"c/x/ (cp)", "c/y"}},
		{"after", store.ListParams{After: "c/x/1"}, []entry{"c/y", "d", "d/", "z", "é/1"}},
		{"after a cp", store.ListParams{After: "a/", Delimiter: "/"}, []entry{"b", "c/ (cp)", "d", "d/ (cp)", "z", "é/ (cp)"}},
		{"multi-char delimiter", store.ListParams{Delimiter: "/1"}, []entry{"a/1 (cp)", "a/2", "a/b/3", "b", "c/x/1 (cp)", "c/y", "d", "d/", "z", "é/1 (cp)"}},
		{"no match", store.ListParams{Prefix: "q"}, nil},
	}
	for _, tc := range tests {
		got, res := list(tc.p)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || res.Truncated {
			t.Errorf("%s: got %q (truncated %v), want %q", tc.name, got, res.Truncated, tc.want)
		}
	}
	// Pagination: pages of every size reassemble into the unpaginated listing.
	for _, delim := range []string{"", "/"} {
		full, _ := list(store.ListParams{Delimiter: delim})
		for size := 1; size <= 4; size++ {
			var all []entry
			after := ""
			for page := 0; ; page++ {
				if page > 20 {
					t.Fatalf("delimiter %q size %d: no end", delim, size)
				}
				got, res := list(store.ListParams{Delimiter: delim, After: after, MaxKeys: size})
				if len(got) > size {
					t.Fatalf("page of %d entries, max %d", len(got), size)
				}
				all = append(all, got...)
				if !res.Truncated {
					break
				}
				if len(got) != size || res.NextAfter == "" {
					t.Fatalf("truncated page with %d entries, next %q", len(got), res.NextAfter)
				}
				after = res.NextAfter
			}
			sort.Strings(all)
			if fmt.Sprint(all) != fmt.Sprint(full) {
				t.Errorf("delimiter %q pages of %d: %q, want %q", delim, size, all, full)
			}
		}
	}
	if _, err := v.e.ListObjects(ctx, "nope", store.ListParams{}); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("list missing bucket: %v", err)
	}
}

func TestLockKeyDistinct(t *testing.T) {
	seen := map[int64]string{}
	for _, id := range [][2]string{{"a", "b/c"}, {"a/b", "c"}, {"ab", "c"}, {"a", "bc"}} {
		k := objectLockKey(id[0], id[1])
		if prev, dup := seen[k]; dup {
			t.Errorf("lock key of %q equals that of %s", id, prev)
		}
		seen[k] = fmt.Sprint(id)
	}
	if objectLockKey("u", "") == uploadLockKey("u") {
		t.Errorf("object and upload lock keys share a namespace")
	}
}

// TestLocalStageDirClean checks that the local engine leaves no stage files
// after successful puts either.
func TestLocalStageDirClean(t *testing.T) {
	v := newEnv(t, LargeLocal)
	v.put(t, "x", randBytes(5, 1<<20))
	v.put(t, "y", randBytes(5, 1<<20)) // dedup: the second stage is discarded
	entries, err := os.ReadDir(filepath.Join(v.dir, "stage"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("stage files left: %d", len(entries))
	}
}
