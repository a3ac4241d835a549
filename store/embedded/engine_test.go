package embedded

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // S3 ETags are MD5
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

// testKnee keeps test content small while still crossing the knee.
const testKnee = 64 << 10

func newEngine(t *testing.T) *Engine {
	t.Helper()
	return openAt(t, t.TempDir())
}

func openAt(t *testing.T, dir string) *Engine {
	t.Helper()
	e, err := Open(context.Background(), Config{Dir: dir, InlineMax: testKnee})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

func mkBucket(t *testing.T, e *Engine, name string) {
	t.Helper()
	if err := e.CreateBucket(context.Background(), name, ""); err != nil {
		t.Fatalf("CreateBucket %s: %v", name, err)
	}
}

// content returns n deterministic pseudo-random bytes for seed.
func content(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func md5hex(b []byte) string {
	s := md5.Sum(b) //nolint:gosec // see import
	return hex.EncodeToString(s[:])
}

func put(t *testing.T, e *Engine, bucket, key string, data []byte) store.ObjectInfo {
	t.Helper()
	info, err := e.PutObject(context.Background(), bucket, key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	if err != nil {
		t.Fatalf("PutObject %s/%s: %v", bucket, key, err)
	}
	return info
}

// get reads an object whole (or the selected range) and returns its bytes.
func get(t *testing.T, e *Engine, bucket, key string, opts store.GetOptions) (store.ObjectInfo, *store.ByteRange, []byte) {
	t.Helper()
	info, rng, rd, err := e.GetObject(context.Background(), bucket, key, opts, false)
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	defer func() {
		if err := rd.Close(); err != nil {
			t.Errorf("close reader: %v", err)
		}
	}()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return info, rng, b
}

func count(t *testing.T, e *Engine, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.rdb.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// files returns the published blob files and the stage files on disk.
func files(t *testing.T, e *Engine) (blobs []int64, stage []string) {
	t.Helper()
	blobs, err := e.media.BlobIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stage, err = e.media.StageFiles()
	if err != nil {
		t.Fatal(err)
	}
	return blobs, stage
}

func TestPutGetSizes(t *testing.T) {
	e := newEngine(t)
	mkBucket(t, e, "b")
	tests := []struct {
		name string
		size int
		tier string
	}{
		{"empty", 0, store.TierInline},
		{"one byte", 1, store.TierInline},
		{"4KiB", 4 << 10, store.TierInline},
		{"at knee", testKnee, store.TierInline},
		{"knee plus one", testKnee + 1, store.TierLocal},
		{"3MiB", 3 << 20, store.TierLocal},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := content(uint64(i+1), tc.size)
			key := "k/" + tc.name
			info := put(t, e, "b", key, data)
			if info.Size != int64(tc.size) || info.ETag != md5hex(data) {
				t.Fatalf("put info = %d %s, want %d %s", info.Size, info.ETag, tc.size, md5hex(data))
			}
			got, rng, b := get(t, e, "b", key, store.GetOptions{})
			if rng != nil {
				t.Errorf("range = %+v, want nil", rng)
			}
			if !bytes.Equal(b, data) {
				t.Fatalf("content differs: got %d bytes, want %d", len(b), len(data))
			}
			if got.ETag != info.ETag || got.Size != info.Size || !got.LastModified.Equal(info.LastModified) {
				t.Errorf("get info = %+v, put info = %+v", got, info)
			}
			sum := sha256.Sum256(data)
			var tier string
			if err := e.rdb.QueryRow(`SELECT tier FROM blobs WHERE sha256 = ?`, sum[:]).Scan(&tier); err != nil {
				t.Fatal(err)
			}
			if tier != tc.tier {
				t.Errorf("tier = %s, want %s", tier, tc.tier)
			}
			// HEAD opens nothing but reports the same metadata.
			hinfo, _, rd, err := e.GetObject(context.Background(), "b", key, store.GetOptions{}, true)
			if err != nil || rd != nil || hinfo.ETag != info.ETag {
				t.Errorf("HEAD = %v, %v, %v", hinfo.ETag, rd, err)
			}
		})
	}
	if n := e.PinCount(); n != 0 {
		t.Errorf("pins left after readers closed: %d", n)
	}
	if _, stage := files(t, e); len(stage) != 0 {
		t.Errorf("stage files left: %v", stage)
	}
}

func TestMetadataAndChecksumKept(t *testing.T) {
	e := newEngine(t)
	mkBucket(t, e, "b")
	meta := store.ObjectMeta{ContentType: "text/plain", CacheControl: "no-cache", User: map[string]string{"a": "1"}}
	data := []byte("hello")
	_, err := e.PutObject(context.Background(), "b", "k", bytes.NewReader(data),
		store.PutOptions{Size: 5, Meta: meta, ChecksumAlgorithm: store.AlgCRC32})
	if err != nil {
		t.Fatal(err)
	}
	info, _, _ := get(t, e, "b", "k", store.GetOptions{})
	if info.Meta.ContentType != "text/plain" || info.Meta.CacheControl != "no-cache" || info.Meta.User["a"] != "1" {
		t.Errorf("meta = %+v", info.Meta)
	}
	if info.Checksum.Algorithm != store.AlgCRC32 || info.Checksum.Value != "NhCmhg==" {
		t.Errorf("checksum = %+v, want CRC32 NhCmhg==", info.Checksum)
	}
}

func TestBuckets(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	mkBucket(t, e, "b1")
	mkBucket(t, e, "a0")
	if err := e.CreateBucket(ctx, "b1", ""); !errors.Is(err, store.ErrBucketExists) {
		t.Errorf("second create = %v, want ErrBucketExists", err)
	}
	bs, err := e.ListBuckets(ctx)
	if err != nil || len(bs) != 2 || bs[0].Name != "a0" || bs[1].Name != "b1" || bs[0].Region != "us-east-1" {
		t.Fatalf("ListBuckets = %+v, %v", bs, err)
	}
	if _, err := e.HeadBucket(ctx, "nope"); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("HeadBucket missing = %v", err)
	}
	put(t, e, "b1", "k", []byte("x"))
	if err := e.DeleteBucket(ctx, "b1"); !errors.Is(err, store.ErrBucketNotEmpty) {
		t.Errorf("delete non-empty = %v", err)
	}
	u, err := e.CreateMultipartUpload(ctx, "a0", "k", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.UploadPart(ctx, "a0", "k", u.UploadID, 1, bytes.NewReader([]byte("part")), store.PutOptions{Size: 4}); err != nil {
		t.Fatal(err)
	}
	// Only in-progress uploads: they go with the bucket, parts included.
	if err := e.DeleteBucket(ctx, "a0"); err != nil {
		t.Errorf("delete with only an upload = %v", err)
	}
	var left int
	if err := e.DB().QueryRowContext(ctx, `SELECT (SELECT count(*) FROM uploads WHERE upload_id = ?1) +
		(SELECT count(*) FROM upload_parts WHERE upload_id = ?1)`, u.UploadID).Scan(&left); err != nil || left != 0 {
		t.Errorf("upload rows left after DeleteBucket: %d, %v", left, err)
	}
	if err := e.AbortMultipartUpload(ctx, "a0", "k", u.UploadID); !errors.Is(err, store.ErrNoSuchUpload) {
		t.Errorf("abort of an upload dropped with its bucket = %v", err)
	}
	if err := e.DeleteBucket(ctx, "a0"); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("delete missing = %v", err)
	}
	if _, err := e.PutObject(ctx, "a0", "k", bytes.NewReader(nil), store.PutOptions{Size: 0}); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("put into missing bucket = %v", err)
	}
	if _, _, _, err := e.GetObject(ctx, "a0", "k", store.GetOptions{}, false); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("get from missing bucket = %v", err)
	}
	if _, _, _, err := e.GetObject(ctx, "b1", "none", store.GetOptions{}, true); !errors.Is(err, store.ErrNoSuchKey) {
		t.Errorf("head missing key = %v", err)
	}
}

// multipartObject uploads parts of the given sizes and completes them.
func multipartObject(t *testing.T, e *Engine, bucket, key string, sizes []int, seed uint64) ([]byte, store.ObjectInfo) {
	t.Helper()
	ctx := context.Background()
	u, err := e.CreateMultipartUpload(ctx, bucket, key, store.ObjectMeta{ContentType: "app/x"}, store.AlgCRC32C, "")
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	var cps []store.CompletePart
	for i, n := range sizes {
		data := content(seed+uint64(i), n)
		all = append(all, data...)
		pi, err := e.UploadPart(ctx, bucket, key, u.UploadID, i+1, bytes.NewReader(data), store.PutOptions{Size: int64(n)})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", i+1, err)
		}
		if pi.ETag != md5hex(data) || pi.Checksum.Algorithm != store.AlgCRC32C {
			t.Fatalf("part %d = %+v", i+1, pi)
		}
		cps = append(cps, store.CompletePart{Number: i + 1, ETag: pi.ETag})
	}
	info, err := e.CompleteMultipartUpload(ctx, bucket, key, u.UploadID, cps, store.PutOptions{})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	return all, info
}

func TestRanges(t *testing.T) {
	e := newEngine(t)
	mkBucket(t, e, "b")
	small := content(1, 1000)
	large := content(2, 200<<10)
	put(t, e, "b", "small", small)
	put(t, e, "b", "large", large)
	mp, _ := multipartObject(t, e, "b", "mp", []int{store.MinPartSize, store.MinPartSize, 1000}, 10)
	objs := map[string][]byte{"small": small, "large": large, "mp": mp}

	tests := []struct {
		key, spec  string
		start, end int64
	}{
		{"small", "bytes=0-0", 0, 0},
		{"small", "bytes=10-19", 10, 19},
		{"small", "bytes=990-", 990, 999},
		{"small", "bytes=-5", 995, 999},
		{"small", "bytes=500-100000", 500, 999},
		{"large", "bytes=65530-70000", 65530, 70000},
		{"large", "bytes=-1", 200<<10 - 1, 200<<10 - 1},
		{"mp", "bytes=5242870-5242890", 5242870, 5242890},                // across parts 1 and 2
		{"mp", "bytes=5242000-10486000", 5242000, 10486000},              // parts 1, 2 and 3
		{"mp", "bytes=-1500", int64(len(mp)) - 1500, int64(len(mp)) - 1}, // parts 2 and 3
		{"mp", "bytes=10485760-", 10485760, int64(len(mp)) - 1},          // exactly part 3
	}
	for _, tc := range tests {
		t.Run(tc.key+" "+tc.spec, func(t *testing.T) {
			_, rng, b := get(t, e, "b", tc.key, store.GetOptions{RangeSpec: tc.spec})
			if rng == nil || rng.Start != tc.start || rng.End != tc.end {
				t.Fatalf("range = %+v, want %d-%d", rng, tc.start, tc.end)
			}
			if want := objs[tc.key][tc.start : tc.end+1]; !bytes.Equal(b, want) {
				t.Fatalf("got %d bytes, want %d (content differs)", len(b), len(want))
			}
		})
	}

	invalid := []struct{ key, spec string }{{"small", "bytes=1000-"}, {"mp", "bytes=99999999-"}, {"large", "bytes=-0"}}
	for _, tc := range invalid {
		info, _, rd, err := e.GetObject(context.Background(), "b", tc.key, store.GetOptions{RangeSpec: tc.spec}, false)
		if !errors.Is(err, store.ErrInvalidRange) || rd != nil || info.Size != int64(len(objs[tc.key])) {
			t.Errorf("%s %s: info.Size=%d rd=%v err=%v, want ErrInvalidRange with info", tc.key, tc.spec, info.Size, rd, err)
		}
	}

	// partNumber selects one part; a missing part is InvalidRange.
	for n, want := range [][]byte{mp[:store.MinPartSize], mp[store.MinPartSize : 2*store.MinPartSize], mp[2*store.MinPartSize:]} {
		info, _, b := get(t, e, "b", "mp", store.GetOptions{PartNumber: n + 1})
		if !bytes.Equal(b, want) || len(info.Parts) != 3 {
			t.Errorf("part %d: got %d bytes (want %d), %d parts", n+1, len(b), len(want), len(info.Parts))
		}
	}
	if _, _, _, err := e.GetObject(context.Background(), "b", "mp", store.GetOptions{PartNumber: 4}, false); !errors.Is(err, store.ErrInvalidRange) {
		t.Errorf("part 4 = %v", err)
	}
	if _, _, b := get(t, e, "b", "small", store.GetOptions{PartNumber: 1}); !bytes.Equal(b, small) {
		t.Errorf("part 1 of single object differs")
	}
}

func TestConditions(t *testing.T) {
	e := newEngine(t)
	mkBucket(t, e, "b")
	info := put(t, e, "b", "k", []byte("abc"))
	past, future := info.LastModified.Add(-time.Hour), info.LastModified.Add(time.Hour)
	tests := []struct {
		name string
		cond store.Conditions
		want error
	}{
		{"if-match ok", store.Conditions{IfMatch: `"` + info.ETag + `"`}, nil},
		{"if-match fails", store.Conditions{IfMatch: `"nope"`}, store.ErrPreconditionFailed},
		{"if-none-match matches", store.Conditions{IfNoneMatch: info.ETag}, store.ErrNotModified},
		{"if-modified-since future", store.Conditions{IfModifiedSince: &future}, store.ErrNotModified},
		{"if-modified-since past", store.Conditions{IfModifiedSince: &past}, nil},
		{"if-unmodified-since past", store.Conditions{IfUnmodifiedSince: &past}, store.ErrPreconditionFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, head := range []bool{false, true} {
				got, _, rd, err := e.GetObject(context.Background(), "b", "k", store.GetOptions{Cond: tc.cond}, head)
				if rd != nil {
					defer func() { _ = rd.Close() }()
				}
				if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
					t.Fatalf("head=%v err = %v, want %v", head, err, tc.want)
				}
				if got.ETag != info.ETag {
					t.Errorf("head=%v: info not returned with %v", head, err)
				}
			}
		})
	}
	// Conditional writes.
	_, err := e.PutObject(context.Background(), "b", "k", bytes.NewReader([]byte("x")), store.PutOptions{Size: 1, IfNoneMatch: "*"})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("If-None-Match * on existing = %v", err)
	}
	_, err = e.PutObject(context.Background(), "b", "k", bytes.NewReader([]byte("x")), store.PutOptions{Size: 1, IfMatch: "bad"})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Errorf("If-Match mismatch = %v", err)
	}
	if _, _, b := get(t, e, "b", "k", store.GetOptions{}); string(b) != "abc" {
		t.Errorf("failed conditional writes changed the object: %q", b)
	}
}

func TestDedup(t *testing.T) {
	tests := []struct {
		name  string
		size  int
		files int
	}{
		{"inline", 1000, 0},
		{"local", testKnee * 3, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t)
			mkBucket(t, e, "b")
			data := content(7, tc.size)
			put(t, e, "b", "one", data)
			put(t, e, "b", "two", data)
			if n := count(t, e, `SELECT count(*) FROM blobs`); n != 1 {
				t.Errorf("blob rows = %d, want 1", n)
			}
			if n := count(t, e, `SELECT count(DISTINCT blob_id) FROM objects`); n != 1 {
				t.Errorf("distinct object blobs = %d, want 1", n)
			}
			blobs, stage := files(t, e)
			if len(blobs) != tc.files || len(stage) != 0 {
				t.Errorf("blob files %v, stage files %v; want %d blob files, no stage files", blobs, stage, tc.files)
			}
			for _, k := range []string{"one", "two"} {
				if _, _, b := get(t, e, "b", k, store.GetOptions{}); !bytes.Equal(b, data) {
					t.Errorf("%s: content differs", k)
				}
			}
		})
	}
}

func TestOverwriteAndDelete(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	mkBucket(t, e, "b")
	v1, v2 := content(1, testKnee*2), content(2, 100)
	i1 := put(t, e, "b", "k", v1)
	i2 := put(t, e, "b", "k", v2)
	if i1.ETag == i2.ETag {
		t.Fatal("etags equal")
	}
	info, _, b := get(t, e, "b", "k", store.GetOptions{})
	if !bytes.Equal(b, v2) || info.ETag != i2.ETag {
		t.Fatalf("after overwrite: got %d bytes etag %s", len(b), info.ETag)
	}
	// Overwriting a multipart object with a single put drops its manifest.
	multipartObject(t, e, "b", "m", []int{store.MinPartSize, 10}, 3)
	put(t, e, "b", "m", v2)
	if n := count(t, e, `SELECT count(*) FROM object_parts WHERE key = 'm'`); n != 0 {
		t.Errorf("manifest rows after overwrite: %d", n)
	}
	if info, _, _ := get(t, e, "b", "m", store.GetOptions{}); info.Parts != nil || info.ETag != i2.ETag {
		t.Errorf("overwritten multipart = %+v", info)
	}

	for _, k := range []string{"k", "m", "never-existed"} {
		if err := e.DeleteObject(ctx, "b", k); err != nil {
			t.Errorf("delete %s: %v", k, err)
		}
		if _, _, _, err := e.GetObject(ctx, "b", k, store.GetOptions{}, false); !errors.Is(err, store.ErrNoSuchKey) {
			t.Errorf("get %s after delete = %v", k, err)
		}
	}
	if err := e.DeleteObject(ctx, "nope", "k"); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("delete in missing bucket = %v", err)
	}

	for i := range 150 {
		put(t, e, "b", fmt.Sprintf("d/%03d", i), []byte{byte(i)})
	}
	keys := []string{"missing"}
	for i := range 150 {
		keys = append(keys, fmt.Sprintf("d/%03d", i))
	}
	res, err := e.DeleteObjects(ctx, "b", keys)
	if err != nil || len(res) != len(keys) {
		t.Fatalf("DeleteObjects = %d results, %v", len(res), err)
	}
	for i, r := range res {
		if r.Key != keys[i] || r.Err != nil {
			t.Errorf("result %d = %+v", i, r)
		}
	}
	if n := count(t, e, `SELECT count(*) FROM objects`); n != 0 {
		t.Errorf("objects left: %d", n)
	}
}

func TestList(t *testing.T) {
	e := newEngine(t)
	mkBucket(t, e, "b")
	// Byte order: "z/" (0x7a) sorts before "é" (0xc3 0xa9).
	keys := []string{"a", "a/1", "a/2", "a/b/1", "b", "c/1", "c/2", "c/3", "d", "z/", "é"}
	for _, k := range keys {
		put(t, e, "b", k, []byte(k))
	}
	type want struct {
		objs, prefixes []string
		truncated      bool
		next           string
	}
	tests := []struct {
		name string
		p    store.ListParams
		want want
	}{
		{"all", store.ListParams{}, want{objs: keys}},
		{"delimiter", store.ListParams{Delimiter: "/"}, want{objs: []string{"a", "b", "d", "é"}, prefixes: []string{"a/", "c/", "z/"}}},
		{"prefix+delimiter", store.ListParams{Prefix: "a/", Delimiter: "/"}, want{objs: []string{"a/1", "a/2"}, prefixes: []string{"a/b/"}}},
		{"prefix", store.ListParams{Prefix: "c/"}, want{objs: []string{"c/1", "c/2", "c/3"}}},
		{"max keys", store.ListParams{MaxKeys: 2}, want{objs: []string{"a", "a/1"}, truncated: true, next: "a/1"}},
		{"max keys with prefixes", store.ListParams{Delimiter: "/", MaxKeys: 3}, want{objs: []string{"a", "b"}, prefixes: []string{"a/"}, truncated: true, next: "b"}},
		{"after inside prefix", store.ListParams{Delimiter: "/", After: "a/1"}, want{objs: []string{"b", "d", "é"}, prefixes: []string{"c/", "z/"}}},
		{"after", store.ListParams{After: "c/3"}, want{objs: []string{"d", "z/", "é"}}},
		{"no match", store.ListParams{Prefix: "q"}, want{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.ListObjects(context.Background(), "b", tc.p)
			if err != nil {
				t.Fatal(err)
			}
			var objs []string
			for _, o := range res.Objects {
				objs = append(objs, o.Key)
				if o.Size != int64(len(o.Key)) || o.ETag != md5hex([]byte(o.Key)) {
					t.Errorf("%s: size %d etag %s", o.Key, o.Size, o.ETag)
				}
			}
			if !slices.Equal(objs, tc.want.objs) || !slices.Equal(res.CommonPrefixes, tc.want.prefixes) ||
				res.Truncated != tc.want.truncated || res.NextAfter != tc.want.next {
				t.Errorf("got objs %q prefixes %q truncated %v next %q; want %+v", objs, res.CommonPrefixes, res.Truncated, res.NextAfter, tc.want)
			}
		})
	}
	// Paging through with a delimiter visits every entry exactly once.
	var seen []string
	after := ""
	for range 20 {
		res, err := e.ListObjects(context.Background(), "b", store.ListParams{Delimiter: "/", MaxKeys: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			seen = append(seen, o.Key)
		}
		seen = append(seen, res.CommonPrefixes...)
		if !res.Truncated {
			break
		}
		after = res.NextAfter
	}
	slices.Sort(seen)
	if want := []string{"a", "a/", "b", "c/", "d", "z/", "é"}; !slices.Equal(seen, want) {
		t.Errorf("paged = %q, want %q", seen, want)
	}
	if _, err := e.ListObjects(context.Background(), "nope", store.ListParams{}); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("list missing bucket = %v", err)
	}
}

func TestCopy(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	mkBucket(t, e, "b")
	mkBucket(t, e, "c")
	large := content(5, testKnee*2)
	src := put(t, e, "b", "src", large)
	mp, mpInfo := multipartObject(t, e, "b", "mp", []int{store.MinPartSize, 100}, 20)
	blobsBefore := count(t, e, `SELECT count(*) FROM blobs`)
	filesBefore, _ := files(t, e)

	tests := []struct {
		name    string
		src     store.CopySource
		dst     string
		opts    store.CopyOptions
		want    []byte
		etag    string
		wantErr error
	}{
		{"single", store.CopySource{Bucket: "b", Key: "src"}, "copy1", store.CopyOptions{}, large, src.ETag, nil},
		{"multipart", store.CopySource{Bucket: "b", Key: "mp"}, "copy2", store.CopyOptions{}, mp, mpInfo.ETag, nil},
		{"replace meta", store.CopySource{Bucket: "b", Key: "src"}, "copy3",
			store.CopyOptions{ReplaceMeta: true, Meta: store.ObjectMeta{ContentType: "x/y"}}, large, src.ETag, nil},
		{"onto itself", store.CopySource{Bucket: "b", Key: "src"}, "src", store.CopyOptions{}, nil, "", store.ErrInvalidRequest},
		{"onto itself replacing meta", store.CopySource{Bucket: "b", Key: "src"}, "src",
			store.CopyOptions{ReplaceMeta: true, Meta: store.ObjectMeta{ContentType: "a/b"}}, large, src.ETag, nil},
		{"missing source", store.CopySource{Bucket: "b", Key: "none"}, "x", store.CopyOptions{}, nil, "", store.ErrNoSuchKey},
		{"missing source bucket", store.CopySource{Bucket: "nope", Key: "src"}, "x", store.CopyOptions{}, nil, "", store.ErrNoSuchBucket},
		{"source if-none-match", store.CopySource{Bucket: "b", Key: "src", Cond: store.Conditions{IfNoneMatch: "*"}}, "x",
			store.CopyOptions{}, nil, "", store.ErrPreconditionFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dstBucket := "c"
			if tc.dst == "src" {
				dstBucket = "b"
			}
			info, err := e.CopyObject(ctx, tc.src, dstBucket, tc.dst, tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _, b := get(t, e, dstBucket, tc.dst, store.GetOptions{})
			if !bytes.Equal(b, tc.want) || got.ETag != tc.etag || info.ETag != tc.etag {
				t.Errorf("copy: %d bytes etag %s/%s, want %d bytes etag %s", len(b), got.ETag, info.ETag, len(tc.want), tc.etag)
			}
			if tc.opts.ReplaceMeta && got.Meta.ContentType != tc.opts.Meta.ContentType {
				t.Errorf("meta = %+v", got.Meta)
			}
		})
	}
	if n := count(t, e, `SELECT count(*) FROM blobs`); n != blobsBefore {
		t.Errorf("blob rows %d after copies, want %d (copies must not add blobs)", n, blobsBefore)
	}
	if after, _ := files(t, e); !slices.Equal(after, filesBefore) {
		t.Errorf("blob files changed by copies: %v -> %v", filesBefore, after)
	}
	// The copy of a multipart object keeps its parts.
	if info, _, b := get(t, e, "c", "copy2", store.GetOptions{PartNumber: 2}); len(info.Parts) != 2 || !bytes.Equal(b, mp[store.MinPartSize:]) {
		t.Errorf("copied manifest: %d parts, part 2 %d bytes", len(info.Parts), len(b))
	}
}

func TestMultipart(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	mkBucket(t, e, "b")
	data, info := multipartObject(t, e, "b", "obj", []int{store.MinPartSize, store.MinPartSize + 3, 77}, 30)
	parts := []store.PartInfo{
		{ETag: md5hex(data[:store.MinPartSize])},
		{ETag: md5hex(data[store.MinPartSize : 2*store.MinPartSize+3])},
		{ETag: md5hex(data[2*store.MinPartSize+3:])},
	}
	if want := store.MultipartETag(parts); info.ETag != want || info.Size != int64(len(data)) {
		t.Errorf("complete = %s %d, want %s %d", info.ETag, info.Size, want, len(data))
	}
	if info.Checksum.Algorithm != store.AlgCRC32C || info.Checksum.Type != store.ChecksumComposite {
		t.Errorf("checksum = %+v", info.Checksum)
	}
	got, _, b := get(t, e, "b", "obj", store.GetOptions{})
	if !bytes.Equal(b, data) || got.ETag != info.ETag || got.Meta.ContentType != "app/x" || len(got.Parts) != 3 {
		t.Errorf("get: %d bytes, %+v", len(b), got)
	}
	if n := count(t, e, `SELECT count(*) FROM uploads`); n != 0 {
		t.Errorf("uploads left after complete: %d", n)
	}

	// Error cases, each on a fresh upload with parts 1 (5 MiB), 2 (small), 3 (small).
	newUpload := func(t *testing.T, key string) (string, []store.PartInfo) {
		u, err := e.CreateMultipartUpload(ctx, "b", key, store.ObjectMeta{}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		var ps []store.PartInfo
		for i, n := range []int{store.MinPartSize, 10, 10} {
			pi, err := e.UploadPart(ctx, "b", key, u.UploadID, i+1, bytes.NewReader(content(uint64(40+i), n)), store.PutOptions{Size: int64(n)})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, pi)
		}
		return u.UploadID, ps
	}
	tests := []struct {
		name  string
		parts func(ps []store.PartInfo) []store.CompletePart
		want  error
	}{
		{"wrong etag", func(ps []store.PartInfo) []store.CompletePart {
			return []store.CompletePart{{Number: 1, ETag: ps[0].ETag}, {Number: 2, ETag: "00000000000000000000000000000000"}}
		}, store.ErrInvalidPart},
		{"missing part", func(ps []store.PartInfo) []store.CompletePart {
			return []store.CompletePart{{Number: 1, ETag: ps[0].ETag}, {Number: 4, ETag: ps[1].ETag}}
		}, store.ErrInvalidPart},
		{"order", func(ps []store.PartInfo) []store.CompletePart {
			return []store.CompletePart{{Number: 2, ETag: ps[1].ETag}, {Number: 1, ETag: ps[0].ETag}}
		}, store.ErrInvalidPartOrder},
		{"too small", func(ps []store.PartInfo) []store.CompletePart {
			return []store.CompletePart{{Number: 1, ETag: ps[0].ETag}, {Number: 2, ETag: ps[1].ETag}, {Number: 3, ETag: ps[2].ETag}}
		}, store.ErrEntityTooSmall},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "err-" + tc.name
			id, ps := newUpload(t, key)
			_, err := e.CompleteMultipartUpload(ctx, "b", key, id, tc.parts(ps), store.PutOptions{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("complete = %v, want %v", err, tc.want)
			}
			if _, _, _, err := e.GetObject(ctx, "b", key, store.GetOptions{}, true); !errors.Is(err, store.ErrNoSuchKey) {
				t.Errorf("failed complete left an object: %v", err)
			}
			// The upload survives a failed complete, and a valid list then completes it.
			lp, err := e.ListParts(ctx, "b", key, id, 0, 0)
			if err != nil || len(lp.Parts) != 3 {
				t.Fatalf("ListParts after failed complete = %d, %v", len(lp.Parts), err)
			}
			if _, err := e.CompleteMultipartUpload(ctx, "b", key, id,
				[]store.CompletePart{{Number: 1, ETag: ps[0].ETag}, {Number: 3, ETag: ps[2].ETag}}, store.PutOptions{}); err != nil {
				t.Fatalf("valid complete after failure: %v", err)
			}
		})
	}

	// NoSuchUpload: unknown id, wrong key, after abort, after complete.
	u, err := e.CreateMultipartUpload(ctx, "b", "k", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	u2, err := e.CreateMultipartUpload(ctx, "b", "k", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	lu, err := e.ListMultipartUploads(ctx, "b", store.ListUploadsParams{})
	if err != nil || len(lu.Uploads) != 2 {
		t.Fatalf("ListMultipartUploads = %+v, %v", lu, err)
	}
	lu, err = e.ListMultipartUploads(ctx, "b", store.ListUploadsParams{MaxUploads: 1})
	if err != nil || len(lu.Uploads) != 1 || !lu.Truncated {
		t.Fatalf("ListMultipartUploads max 1 = %+v, %v", lu, err)
	}
	lu2, err := e.ListMultipartUploads(ctx, "b", store.ListUploadsParams{KeyMarker: lu.NextKeyMarker, UploadIDMarker: lu.NextUploadIDMarker})
	if err != nil || len(lu2.Uploads) != 1 || lu2.Uploads[0].UploadID == lu.Uploads[0].UploadID {
		t.Fatalf("second page = %+v, %v", lu2, err)
	}
	if err := e.AbortMultipartUpload(ctx, "b", "k", u.UploadID); err != nil {
		t.Fatal(err)
	}
	one := []store.CompletePart{{Number: 1, ETag: md5hex(nil)}}
	noSuch := []struct {
		name string
		fn   func() error
	}{
		{"part to unknown", func() error {
			_, err := e.UploadPart(ctx, "b", "k", "unknown", 1, bytes.NewReader(nil), store.PutOptions{Size: 0})
			return err
		}},
		{"part to wrong key", func() error {
			_, err := e.UploadPart(ctx, "b", "other", u2.UploadID, 1, bytes.NewReader(nil), store.PutOptions{Size: 0})
			return err
		}},
		{"part to aborted", func() error {
			_, err := e.UploadPart(ctx, "b", "k", u.UploadID, 1, bytes.NewReader(nil), store.PutOptions{Size: 0})
			return err
		}},
		{"complete aborted", func() error {
			_, err := e.CompleteMultipartUpload(ctx, "b", "k", u.UploadID, one, store.PutOptions{})
			return err
		}},
		{"abort twice", func() error { return e.AbortMultipartUpload(ctx, "b", "k", u.UploadID) }},
		{"list parts of aborted", func() error {
			_, err := e.ListParts(ctx, "b", "k", u.UploadID, 0, 0)
			return err
		}},
	}
	for _, tc := range noSuch {
		if err := tc.fn(); !errors.Is(err, store.ErrNoSuchUpload) {
			t.Errorf("%s = %v, want ErrNoSuchUpload", tc.name, err)
		}
	}
}

func TestUploadPartCopy(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	mkBucket(t, e, "b")
	big := content(50, store.MinPartSize)
	put(t, e, "b", "big", big)
	small := content(51, 1000)
	put(t, e, "b", "small", small)
	blobs := count(t, e, `SELECT count(*) FROM blobs`)

	u, err := e.CreateMultipartUpload(ctx, "b", "dst", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	p1, err := e.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: "big"}, "b", "dst", u.UploadID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, e, `SELECT count(*) FROM blobs`); n != blobs {
		t.Errorf("whole-object part copy added blobs: %d -> %d", blobs, n)
	}
	p2, err := e.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: "small", Range: &store.ByteRange{Start: 100, End: 199}}, "b", "dst", u.UploadID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: "small", Range: &store.ByteRange{Start: 100, End: 1000}}, "b", "dst", u.UploadID, 3); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("range beyond source = %v", err)
	}
	if _, err := e.CompleteMultipartUpload(ctx, "b", "dst", u.UploadID,
		[]store.CompletePart{{Number: 1, ETag: p1.ETag}, {Number: 2, ETag: p2.ETag}}, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _, b := get(t, e, "b", "dst", store.GetOptions{})
	if want := append(slices.Clone(big), small[100:200]...); !bytes.Equal(b, want) {
		t.Errorf("content differs: %d bytes, want %d", len(b), len(want))
	}
}

func TestBadBodyLeavesNothing(t *testing.T) {
	wrongMD5 := make([]byte, 16)
	tests := []struct {
		name string
		size int
		opts func(n int) store.PutOptions
		want error
	}{
		{"bad md5 inline", 100, func(n int) store.PutOptions { return store.PutOptions{Size: int64(n), ContentMD5: wrongMD5} }, store.ErrBadDigest},
		{"bad md5 local", testKnee * 3, func(n int) store.PutOptions { return store.PutOptions{Size: int64(n), ContentMD5: wrongMD5} }, store.ErrBadDigest},
		{"bad crc32 local", testKnee * 3, func(n int) store.PutOptions {
			return store.PutOptions{Size: int64(n), Checksums: map[string]string{"crc32": "AAAAAA=="}}
		}, store.ErrBadDigest},
		{"short body local", testKnee * 3, func(n int) store.PutOptions { return store.PutOptions{Size: int64(n) + 10} }, store.ErrIncompleteBody},
		{"long body inline", 100, func(n int) store.PutOptions { return store.PutOptions{Size: int64(n) - 1} }, store.ErrInvalidRequest},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEngine(t)
			mkBucket(t, e, "b")
			u, err := e.CreateMultipartUpload(ctx, "b", "mp", store.ObjectMeta{}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			data := content(uint64(60+i), tc.size)
			if _, err := e.PutObject(ctx, "b", "k", bytes.NewReader(data), tc.opts(tc.size)); !errors.Is(err, tc.want) {
				t.Fatalf("put = %v, want %v", err, tc.want)
			}
			if _, err := e.UploadPart(ctx, "b", "mp", u.UploadID, 1, bytes.NewReader(data), tc.opts(tc.size)); !errors.Is(err, tc.want) {
				t.Fatalf("upload part = %v, want %v", err, tc.want)
			}
			for _, q := range []string{`SELECT count(*) FROM blobs`, `SELECT count(*) FROM objects`, `SELECT count(*) FROM upload_parts`} {
				if n := count(t, e, q); n != 0 {
					t.Errorf("%s = %d, want 0", q, n)
				}
			}
			if blobs, stage := files(t, e); len(blobs) != 0 || len(stage) != 0 {
				t.Errorf("files left: blobs %v stage %v", blobs, stage)
			}
		})
	}
}

func TestConcurrentPutsOneKey(t *testing.T) {
	e := newEngine(t)
	mkBucket(t, e, "b")
	const writers = 8
	datas := make([][]byte, writers)
	etags := map[string][]byte{}
	for i := range datas {
		size := 1000
		if i%2 == 1 {
			size = testKnee * 2 // half inline, half in files
		}
		datas[i] = content(uint64(100+i), size)
		etags[md5hex(datas[i])] = datas[i]
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*3)
	for i := range writers {
		wg.Go(func() {
			for range 3 {
				if _, err := e.PutObject(context.Background(), "b", "hot", bytes.NewReader(datas[i]), store.PutOptions{Size: int64(len(datas[i]))}); err != nil {
					errs <- err
				}
			}
		})
		// Readers race the writers: every read sees one whole version.
		wg.Go(func() {
			for range 3 {
				info, _, rd, err := e.GetObject(context.Background(), "b", "hot", store.GetOptions{}, false)
				if errors.Is(err, store.ErrNoSuchKey) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(rd)
				_ = rd.Close()
				if err != nil {
					errs <- err
					return
				}
				if want, ok := etags[info.ETag]; !ok || !bytes.Equal(b, want) {
					errs <- fmt.Errorf("read %d bytes that match no version (etag %s)", len(b), info.ETag)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	info, _, b := get(t, e, "b", "hot", store.GetOptions{})
	if want, ok := etags[info.ETag]; !ok || !bytes.Equal(b, want) {
		t.Errorf("final object matches no writer")
	}
	if n := count(t, e, `SELECT count(*) FROM objects`); n != 1 {
		t.Errorf("objects = %d", n)
	}
	if n := count(t, e, `SELECT count(*) FROM blobs`); n != writers {
		t.Errorf("blobs = %d, want %d (one per distinct content)", n, writers)
	}
	if blobs, stage := files(t, e); len(blobs) != writers/2 || len(stage) != 0 {
		t.Errorf("blob files %d (want %d), stage files %v", len(blobs), writers/2, stage)
	}
}

func TestPinsAndReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	data := content(9, testKnee*2)
	{
		e, err := Open(ctx, Config{Dir: dir, InlineMax: testKnee})
		if err != nil {
			t.Fatal(err)
		}
		mkBucket(t, e, "b")
		put(t, e, "b", "k", data)
		_, _, rd, err := e.GetObject(ctx, "b", "k", store.GetOptions{}, false)
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := e.rdb.QueryRow(`SELECT blob_id FROM objects WHERE key = 'k'`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if !e.Pinned(id) {
			t.Error("blob of an open reader is not pinned")
		}
		if err := rd.Close(); err != nil {
			t.Fatal(err)
		}
		if e.Pinned(id) || e.PinCount() != 0 {
			t.Error("pin outlived its reader")
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Reopening applies no migration twice and serves the same bytes.
	e := openAt(t, dir)
	if _, _, b := get(t, e, "b", "k", store.GetOptions{}); !bytes.Equal(b, data) {
		t.Error("content differs after reopen")
	}
	applied, known, err := e.SchemaVersion(ctx)
	if err != nil || applied != known || known < 1 {
		t.Errorf("schema version %d/%d, %v", applied, known, err)
	}
	if err := e.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// TestOrphanFileReplaced: a file left at the next blob id (a publish whose
// transaction then rolled back, or a crash before COMMIT) is replaced by the
// next put, not served and not an error.
func TestOrphanFileReplaced(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	mkBucket(t, e, "b")
	put(t, e, "b", "first", content(1, testKnee*2))
	var last int64
	if err := e.rdb.QueryRow(`SELECT max(id) FROM blobs`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	sf, err := e.media.Stage(ctx, bytes.NewReader([]byte("orphan bytes")))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.media.Publish(ctx, sf, last+1); err != nil {
		t.Fatal(err)
	}
	data := content(2, testKnee*2)
	put(t, e, "b", "second", data)
	if _, _, b := get(t, e, "b", "second", store.GetOptions{}); !bytes.Equal(b, data) {
		t.Error("served the orphan's bytes")
	}
}

// TestThroughStore runs a few calls through store.New so that the engine
// works behind the validating layer that s3api uses.
func TestThroughStore(t *testing.T) {
	ctx := context.Background()
	s := store.New(newEngine(t))
	if err := s.CreateBucket(ctx, "Bad_Name", ""); !errors.Is(err, store.ErrInvalidBucketName) {
		t.Errorf("bad bucket name = %v", err)
	}
	if err := s.CreateBucket(ctx, "good", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutObject(ctx, "good", "a//b/../c", bytes.NewReader([]byte("v")), store.PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := s.ListObjects(ctx, "good", store.ListParams{MaxKeys: 1000})
	if err != nil || len(res.Objects) != 1 || res.Objects[0].Key != "a//b/../c" {
		t.Errorf("list = %+v, %v", res, err)
	}
}

// TestFailedWriteLeavesWriterClean: an error or a panic after BEGIN rolls the
// transaction back and the single writer connection serves the next write.
func TestFailedWriteLeavesWriterClean(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	boom := errors.New("boom")
	insert := func(tx *sql.Tx, name string) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO buckets (name, region, created_at) VALUES (?, 'r', 0)`, name)
		return err
	}
	tests := []struct {
		name string
		fn   func(tx *sql.Tx) error
	}{
		{"error", func(tx *sql.Tx) error {
			if err := insert(tx, "err"); err != nil {
				return err
			}
			return boom
		}},
		{"panic", func(tx *sql.Tx) error {
			if err := insert(tx, "panic"); err != nil {
				return err
			}
			panic(boom)
		}},
		{"constraint", func(tx *sql.Tx) error {
			if err := insert(tx, "dup"); err != nil {
				return err
			}
			return insert(tx, "dup")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return e.withWrite(ctx, tc.fn)
			}()
			if err == nil {
				t.Fatal("failed transaction reported success")
			}
			if n := count(t, e, `SELECT count(*) FROM buckets`); n != 0 {
				t.Fatalf("rolled-back rows visible: %d", n)
			}
			// The next write begins a fresh transaction on the same connection
			// (BEGIN inside a leaked transaction would fail) and commits.
			if err := e.CreateBucket(ctx, "after-"+tc.name, ""); err != nil {
				t.Fatalf("write after failure: %v", err)
			}
			if err := e.DeleteBucket(ctx, "after-"+tc.name); err != nil {
				t.Fatal(err)
			}
		})
	}
}
