// Package storetest is the behavioural suite of the store.ObjectStore
// contract, written once and run on every metadata engine with every large
// engine (TestStore in this package's tests). It is test support: only tests
// import it.
//
// The suite talks to the engine through store.ObjectStore alone. Where a test
// proves something the API cannot show (no content left after a failure, one
// blob for two keys, no manifest rows after an overwrite, no leaked
// transaction), it asks the engine's Env hooks, which each engine's test file
// fills with its own SQL and file listings.
package storetest

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // S3 ETags are MD5
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store"
)

// Knee is the inline knee every Env must be opened with: content up to Knee
// bytes is inline, above it in the large engine. Small, so that the suite
// crosses it with little data.
const Knee = 64 << 10

// Env is one engine under test, freshly opened, without buckets.
type Env struct {
	// Store is the engine itself (not wrapped in store.New: the suite wraps
	// it where it tests validation).
	Store store.ObjectStore
	// LargeTier is the tier of blobs above Knee (store.TierPGLO, ...).
	LargeTier string
	// Content lists every stored content unit by kind, each kind's ids
	// sorted: "blobs" (the blob rows) and the engine's others (large objects,
	// chunk rows, stage rows, published files, stage files). Every kind the
	// engine has is present, empty or not.
	Content func(t testing.TB) map[string][]string
	// Units gives the content units, by kind, that one blob of size bytes
	// above Knee holds besides its blob row.
	Units func(size int) map[string]int
	// Object reports how bucket/key is stored; the object must exist.
	Object func(t testing.TB, bucket, key string) Stored
	// Rows counts the metadata rows of objects and uploads.
	Rows func(t testing.TB) Rows
	// Idle checks that the engine holds nothing for a finished request: no
	// pin, no open transaction, no lock.
	Idle func(t testing.TB)
	// ReapStages drops every stage with its content, as GC's stage reaper
	// does with an abandoned one; nil where a put's stage is not reaped. It
	// is called from within a put's body read, so it reports with Errorf.
	ReapStages func(t testing.TB)
	// RemoveVersionWithBlobs is fsck's repair of a version whose blobs
	// have no bytes (versionID "": the current one), as the engine's GC runs
	// it (protocol.RemoveVersionWithBlobs over the engine's dialect).
	RemoveVersionWithBlobs func(ctx context.Context, bucket, key, versionID string, ids []int64, bypassGovernance bool) (bool, error)
}

// Stored is how one object is stored.
type Stored struct {
	Blob  int64  // its blob's id; 0 for a multipart object
	Tier  string // its blob's tier; "" for a multipart object
	Parts int    // its manifest rows
}

// Rows counts metadata rows.
type Rows struct {
	Objects, Uploads, UploadParts int
}

// test is one test of the suite; b is an existing bucket of v.
type test struct {
	name string
	fn   func(t *testing.T, v *Env)
}

var tests = []test{
	{"Buckets", testBuckets},
	{"PutGet", testPutGet},
	{"RangesAndConditions", testRangesAndConditions},
	{"DedupOverwriteDelete", testDedupOverwriteDelete},
	{"Copy", testCopy},
	{"List", testList},
	{"Multipart", testMultipart},
	{"Uploads", testUploads},
	{"UploadListing", testUploadListing},
	{"UploadPartCopy", testUploadPartCopy},
	{"FailuresLeaveNothing", testFailuresLeaveNothing},
	{"ConcurrentPuts", testConcurrentPuts},
	{"ConditionalPutRace", testConditionalPutRace},
	{"BucketCors", testBucketCors},
	{"BucketCorsRace", testBucketCorsRace},
	{"ObjectLock", testObjectLock},
	{"RemoveObjectWithBlobs", testRemoveObjectWithBlobs},
}

// Run runs the suite, each test as a parallel subtest on its own engine from
// open, with the bucket "b" created.
func Run(t *testing.T, open func(t *testing.T) *Env) {
	for _, tc := range slices.Concat(tests, versionTests) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := open(t)
			if err := v.Store.CreateBucket(context.Background(), "b", ""); err != nil {
				t.Fatalf("CreateBucket: %v", err)
			}
			tc.fn(t, v)
		})
	}
}

// Bytes returns n deterministic pseudo-random bytes for seed.
func Bytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n - n%8; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// MD5Hex is the hex MD5 of b: the ETag of a single put.
func MD5Hex(b []byte) string {
	s := md5.Sum(b) //nolint:gosec // see import
	return hex.EncodeToString(s[:])
}

// SameBytes fails t unless got equals want, naming both by length and digest.
func SameBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		gs, ws := sha256.Sum256(got), sha256.Sum256(want)
		t.Fatalf("%s: got %d bytes sha256 %x, want %d bytes sha256 %x", what, len(got), gs[:6], len(want), ws[:6])
	}
}

// PoolClean proves amendment A1 on a PostgreSQL pool: no pooled connection
// is inside a transaction, no session of the database holds an advisory lock
// or sits idle in a transaction.
func PoolClean(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	for _, c := range pool.AcquireAllIdle(ctx) {
		if st := c.Conn().PgConn().TxStatus(); st != 'I' {
			t.Errorf("pooled connection in transaction status %q", st)
		}
		c.Release()
	}
	for what, q := range map[string]string{
		"advisory locks held": `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND a.datname = current_database()`,
		"sessions idle in transaction": `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND state LIKE 'idle in transaction%'`,
	} {
		var n int
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n != 0 {
			t.Errorf("%d %s", n, what)
		}
	}
}

func (v *Env) put(t *testing.T, bucket, key string, data []byte) store.ObjectInfo {
	t.Helper()
	info, err := v.Store.PutObject(context.Background(), bucket, key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	if err != nil {
		t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
	return info
}

// get reads an object whole (or the selected range).
func (v *Env) get(t *testing.T, bucket, key string, opts store.GetOptions) (store.ObjectInfo, *store.ByteRange, []byte) {
	t.Helper()
	info, rng, rd, err := v.Store.GetObject(context.Background(), bucket, key, opts, false)
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	b, err := io.ReadAll(rd)
	if cerr := rd.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return info, rng, b
}

// upload creates an upload of bucket/key with a part of each size and
// returns its id, the parts and their bytes.
func (v *Env) upload(t *testing.T, bucket, key string, meta store.ObjectMeta, alg, typ string, seed uint64, sizes ...int) (string, []store.PartInfo, [][]byte) {
	t.Helper()
	ctx := context.Background()
	u, err := v.Store.CreateMultipartUpload(ctx, bucket, key, meta, alg, typ)
	if err != nil {
		t.Fatal(err)
	}
	var parts []store.PartInfo
	var datas [][]byte
	for i, n := range sizes {
		d := Bytes(seed+uint64(i), n)
		pi, err := v.Store.UploadPart(ctx, bucket, key, u.UploadID, i+1, bytes.NewReader(d), store.PutOptions{Size: int64(n)})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", i+1, err)
		}
		if pi.ETag != MD5Hex(d) || pi.Size != int64(n) || (alg != "" && pi.Checksum.Algorithm != alg) {
			t.Errorf("part %d info %+v", i+1, pi)
		}
		parts = append(parts, pi)
		datas = append(datas, d)
	}
	return u.UploadID, parts, datas
}

// multipartObject writes bucket/key as a completed upload of parts of the
// given sizes (CRC32C, composite) and returns its bytes and info.
func (v *Env) multipartObject(t *testing.T, bucket, key string, seed uint64, sizes ...int) ([]byte, store.ObjectInfo) {
	t.Helper()
	id, parts, datas := v.upload(t, bucket, key, store.ObjectMeta{ContentType: "app/x"}, store.AlgCRC32C, "", seed, sizes...)
	info, err := v.Store.CompleteMultipartUpload(context.Background(), bucket, key, id, completeAll(parts), store.PutOptions{})
	if err != nil {
		t.Fatalf("complete %s/%s: %v", bucket, key, err)
	}
	return slices.Concat(datas...), info
}

// completeAll lists parts uploaded as numbers 1, 2, ... for Complete.
func completeAll(parts []store.PartInfo) []store.CompletePart {
	cps := make([]store.CompletePart, len(parts))
	for i, p := range parts {
		cps[i] = store.CompletePart{Number: i + 1, ETag: p.ETag}
	}
	return cps
}

// wantContent checks that the engine stores exactly one blob of each size
// given and nothing else: no stage, no orphan, no second copy.
func (v *Env) wantContent(t *testing.T, what string, sizes ...int) {
	t.Helper()
	want := map[string]int{"blobs": len(sizes)}
	for _, n := range sizes {
		if n > Knee {
			for k, c := range v.Units(n) {
				want[k] += c
			}
		}
	}
	got := map[string]int{}
	for k, ids := range v.Content(t) {
		if len(ids) > 0 {
			got[k] = len(ids)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s: content %v, want %v", what, got, want)
	}
}

// sameContent checks that the stored content is exactly before.
func (v *Env) sameContent(t *testing.T, what string, before map[string][]string) {
	t.Helper()
	if after := v.Content(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("%s: content %v, before %v", what, after, before)
	}
}

// failingReader returns r's data, then err: a client that goes away after
// the engine has started writing.
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

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
