package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

func testBuckets(t *testing.T, v *Env) {
	ctx := context.Background()
	s := v.Store
	if err := s.CreateBucket(ctx, "b", ""); !errors.Is(err, store.ErrBucketExists) {
		t.Errorf("CreateBucket twice: %v, want ErrBucketExists", err)
	}
	if err := s.CreateBucket(ctx, "a", "eu-west-1"); err != nil {
		t.Fatal(err)
	}
	bs, err := s.ListBuckets(ctx)
	if err != nil || len(bs) != 2 || bs[0].Name != "a" || bs[0].Region != "eu-west-1" || bs[1].Name != "b" || bs[1].Region != "us-east-1" {
		t.Fatalf("ListBuckets = %+v, %v", bs, err)
	}
	if _, err := s.HeadBucket(ctx, "nope"); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("HeadBucket(nope): %v", err)
	}
	v.put(t, "b", "k", []byte("x"))
	if err := s.DeleteBucket(ctx, "b"); !errors.Is(err, store.ErrBucketNotEmpty) {
		t.Errorf("DeleteBucket with object: %v", err)
	}
	if _, _, _, err := s.GetObject(ctx, "b", "none", store.GetOptions{}, true); !errors.Is(err, store.ErrNoSuchKey) {
		t.Errorf("head missing key: %v", err)
	}
	if err := s.DeleteObject(ctx, "b", "k"); err != nil {
		t.Fatal(err)
	}
	// Buckets with only in-progress uploads, "a" never held an object and
	// "b" held one: they go with their uploads, parts included.
	for _, bucket := range []string{"a", "b"} {
		u, err := s.CreateMultipartUpload(ctx, bucket, "m", store.ObjectMeta{}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.UploadPart(ctx, bucket, "m", u.UploadID, 1, bytes.NewReader([]byte("part")), store.PutOptions{Size: 4}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteBucket(ctx, bucket); err != nil {
			t.Errorf("DeleteBucket %s with only an upload: %v", bucket, err)
		}
		if r := v.Rows(t); r.Uploads != 0 || r.UploadParts != 0 {
			t.Errorf("upload rows left after DeleteBucket %s: %+v", bucket, r)
		}
		if err := s.AbortMultipartUpload(ctx, bucket, "m", u.UploadID); !errors.Is(err, store.ErrNoSuchUpload) {
			t.Errorf("abort of an upload dropped with its bucket: %v", err)
		}
		if err := s.DeleteBucket(ctx, bucket); !errors.Is(err, store.ErrNoSuchBucket) {
			t.Errorf("DeleteBucket %s gone: %v", bucket, err)
		}
		if _, err := s.PutObject(ctx, bucket, "k", bytes.NewReader(nil), store.PutOptions{Size: 0}); !errors.Is(err, store.ErrNoSuchBucket) {
			t.Errorf("put into deleted bucket: %v", err)
		}
		// A conditional put answers for the bucket, not for its condition.
		for _, o := range []store.PutOptions{{IfNoneMatch: "*"}, {IfMatch: `"x"`}, {IfNoneMatch: "x"}} {
			if _, err := s.PutObject(ctx, bucket, "k", bytes.NewReader([]byte("c")), store.PutOptions{Size: 1, IfMatch: o.IfMatch, IfNoneMatch: o.IfNoneMatch}); !errors.Is(err, store.ErrNoSuchBucket) {
				t.Errorf("put into deleted bucket with If-Match %q, If-None-Match %q: %v", o.IfMatch, o.IfNoneMatch, err)
			}
		}
		if _, _, _, err := s.GetObject(ctx, bucket, "k", store.GetOptions{}, false); !errors.Is(err, store.ErrNoSuchBucket) {
			t.Errorf("get from deleted bucket: %v", err)
		}
	}

	// Through store.New, the validating layer that s3api uses.
	vs := store.New(s)
	if err := vs.CreateBucket(ctx, "Bad_Name", ""); !errors.Is(err, store.ErrInvalidBucketName) {
		t.Errorf("bad bucket name = %v", err)
	}
	if err := vs.CreateBucket(ctx, "good", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := vs.PutObject(ctx, "good", "a//b/../c", bytes.NewReader([]byte("v")), store.PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := vs.ListObjects(ctx, "good", store.ListParams{MaxKeys: 1000})
	if err != nil || len(res.Objects) != 1 || res.Objects[0].Key != "a//b/../c" {
		t.Errorf("list = %+v, %v", res, err)
	}
}

// testPutGet covers sizes around the knee and across chunk boundaries, with
// the bytes read back compared, the tier each landed in, the metadata and
// checksum kept.
func testPutGet(t *testing.T, v *Env) {
	tests := []struct {
		name string
		size int
	}{
		{"empty", 0},
		{"one byte", 1},
		{"4KiB", 4 << 10},
		{"at knee", Knee},
		{"knee plus one", Knee + 1},
		{"3MiB", 3 << 20},
		{"3MiB+123", 3<<20 + 123},
	}
	var sizes []int
	for i, tc := range tests {
		sizes = append(sizes, tc.size)
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			data := Bytes(uint64(i+1), tc.size)
			key := "obj/" + tc.name
			meta := store.ObjectMeta{ContentType: "text/plain", CacheControl: "no-cache", User: map[string]string{"k": "v"}}
			info, err := v.Store.PutObject(ctx, "b", key, bytes.NewReader(data),
				store.PutOptions{Size: int64(tc.size), Meta: meta, ChecksumAlgorithm: store.AlgCRC32C})
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			if info.ETag != MD5Hex(data) || info.Size != int64(tc.size) || info.Checksum.Algorithm != store.AlgCRC32C {
				t.Errorf("put info %+v", info)
			}
			got, rng, b := v.get(t, "b", key, store.GetOptions{})
			SameBytes(t, key, b, data)
			if rng != nil || got.ETag != info.ETag || got.Size != info.Size || got.Meta.ContentType != "text/plain" ||
				got.Meta.CacheControl != "no-cache" || got.Meta.User["k"] != "v" || got.Checksum != info.Checksum || !got.LastModified.Equal(info.LastModified) {
				t.Errorf("get info %+v range %v, put said %+v", got, rng, info)
			}
			wantTier := v.LargeTier
			if tc.size <= Knee {
				wantTier = store.TierInline
			}
			if tier := v.Object(t, "b", key).Tier; tier != wantTier {
				t.Errorf("stored in tier %q, want %q", tier, wantTier)
			}
			// HEAD opens nothing but reports the same metadata.
			head, _, rd, err := v.Store.GetObject(ctx, "b", key, store.GetOptions{}, true)
			if err != nil || rd != nil || head.ETag != info.ETag || head.Size != int64(tc.size) {
				t.Errorf("head: %+v reader=%v err=%v", head, rd != nil, err)
			}
		})
	}
	// A known checksum value: CRC32 of "hello".
	if _, err := v.Store.PutObject(context.Background(), "b", "hello", bytes.NewReader([]byte("hello")),
		store.PutOptions{Size: 5, ChecksumAlgorithm: store.AlgCRC32}); err != nil {
		t.Fatal(err)
	}
	sizes = append(sizes, 5)
	if info, _, _ := v.get(t, "b", "hello", store.GetOptions{}); info.Checksum.Algorithm != store.AlgCRC32 || info.Checksum.Value != "NhCmhg==" {
		t.Errorf("checksum = %+v, want CRC32 NhCmhg==", info.Checksum)
	}
	v.Idle(t)
	v.wantContent(t, "after the puts", sizes...)
}

func testRangesAndConditions(t *testing.T, v *Env) {
	t.Run("ranges", func(t *testing.T) { testRanges(t, v) })
	t.Run("conditions", func(t *testing.T) { testConditions(t, v) })
}

func testRanges(t *testing.T, v *Env) {
	ctx := context.Background()
	small := Bytes(1, 1000)
	large := Bytes(2, 200<<10)
	big := Bytes(7, 3<<20+5)
	v.put(t, "b", "small", small)
	v.put(t, "b", "large", large)
	v.put(t, "b", "big", big)
	objs := map[string][]byte{"small": small, "large": large, "big": big}
	bigSize := int64(len(big))

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
		{"big", "bytes=0-0", 0, 0},
		{"big", "bytes=1048575-1048577", 1048575, 1048577}, // across a 1 MiB boundary
		{"big", "bytes=-10", bigSize - 10, bigSize - 1},
		{"big", "bytes=3000000-", 3000000, bigSize - 1},
		{"big", "bytes=100-99999999", 100, bigSize - 1},
	}
	for _, tc := range tests {
		t.Run(tc.key+" "+tc.spec, func(t *testing.T) {
			_, rng, b := v.get(t, "b", tc.key, store.GetOptions{RangeSpec: tc.spec})
			if rng == nil || rng.Start != tc.start || rng.End != tc.end {
				t.Fatalf("range = %+v, want %d-%d", rng, tc.start, tc.end)
			}
			SameBytes(t, tc.spec, b, objs[tc.key][tc.start:tc.end+1])
		})
	}

	invalid := []struct{ key, spec string }{
		{"small", "bytes=1000-"}, {"large", "bytes=-0"}, {"big", fmt.Sprintf("bytes=%d-", bigSize)},
	}
	for _, tc := range invalid {
		info, _, rd, err := v.Store.GetObject(ctx, "b", tc.key, store.GetOptions{RangeSpec: tc.spec}, false)
		if !errors.Is(err, store.ErrInvalidRange) || rd != nil || info.Size != int64(len(objs[tc.key])) {
			t.Errorf("%s %s: info.Size=%d rd=%v err=%v, want ErrInvalidRange with info", tc.key, tc.spec, info.Size, rd, err)
		}
	}

	// Ranges and partNumber of multipart objects: testMultipart.
	_, rng, b := v.get(t, "b", "small", store.GetOptions{PartNumber: 1})
	SameBytes(t, "part 1 of a single object", b, small)
	if rng == nil || rng.Start != 0 || rng.End != int64(len(small))-1 {
		t.Errorf("part 1 of a single object: range %+v", rng)
	}
}

// testConditions evaluates the read conditions on an inline and a large
// object, for GET and HEAD; a failed conditional write changes nothing.
func testConditions(t *testing.T, v *Env) {
	ctx := context.Background()
	for _, obj := range []struct {
		key  string
		data []byte
	}{{"cond-inline", []byte("abc")}, {"cond-large", Bytes(3, 2*Knee)}} {
		info := v.put(t, "b", obj.key, obj.data)
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
			for _, head := range []bool{false, true} {
				what := fmt.Sprintf("%s %s head=%v", obj.key, tc.name, head)
				got, _, rd, err := v.Store.GetObject(ctx, "b", obj.key, store.GetOptions{Cond: tc.cond}, head)
				if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
					t.Errorf("%s: err = %v, want %v", what, err, tc.want)
				}
				if got.ETag != info.ETag {
					t.Errorf("%s: no ObjectInfo with %v: %+v", what, err, got)
				}
				if (rd != nil) != (tc.want == nil && !head) {
					t.Errorf("%s: reader %v", what, rd != nil)
				}
				if rd != nil {
					b, err := io.ReadAll(rd)
					if cerr := rd.Close(); err == nil {
						err = cerr
					}
					if err != nil {
						t.Fatalf("%s: read: %v", what, err)
					}
					SameBytes(t, what, b, obj.data)
				}
			}
		}
		// Conditional writes that fail change nothing.
		for _, opts := range []store.PutOptions{{Size: 1, IfNoneMatch: "*"}, {Size: 1, IfMatch: "bad"}} {
			if _, err := v.Store.PutObject(ctx, "b", obj.key, bytes.NewReader([]byte("x")), opts); !errors.Is(err, store.ErrPreconditionFailed) {
				t.Errorf("%s: put %+v on existing = %v", obj.key, opts, err)
			}
		}
		_, _, b := v.get(t, "b", obj.key, store.GetOptions{})
		SameBytes(t, obj.key+" after failed conditional writes", b, obj.data)
	}
	v.Idle(t)
}

// testDedupOverwriteDelete: two keys with the same content share one blob;
// overwriting one leaves the other intact; deletes of present, missing and
// deleted keys succeed.
func testDedupOverwriteDelete(t *testing.T, v *Env) {
	ctx := context.Background()
	s := v.Store
	var sizes []int
	var keys []string // every key written, both of each pair
	var shared []byte
	for i, size := range []int{1000, 3 * Knee, 1<<20 + 17} {
		shared = Bytes(uint64(11+i), size)
		one, two := fmt.Sprintf("one/%d", size), fmt.Sprintf("two/%d", size)
		v.put(t, "b", one, shared)
		v.put(t, "b", two, shared)
		keys = append(keys, one, two)
		sizes = append(sizes, size)
		v.wantContent(t, fmt.Sprintf("after dedup put of %d bytes", size), sizes...)
		if a, b := v.Object(t, "b", one), v.Object(t, "b", two); a.Blob == 0 || a.Blob != b.Blob {
			t.Errorf("%d bytes: blobs %d and %d, want one", size, a.Blob, b.Blob)
		}
		for _, k := range []string{one, two} {
			_, _, b := v.get(t, "b", k, store.GetOptions{})
			SameBytes(t, k, b, shared)
		}
	}
	// Overwriting one of two keys sharing a blob leaves the other intact.
	one, two := keys[len(keys)-2], keys[len(keys)-1]
	other := Bytes(12, 2<<20)
	v.put(t, "b", one, other)
	_, _, b := v.get(t, "b", one, store.GetOptions{})
	SameBytes(t, "overwritten", b, other)
	_, _, b = v.get(t, "b", two, store.GetOptions{})
	SameBytes(t, "untouched", b, shared)

	v1, v2 := Bytes(1, 2*Knee), Bytes(2, 100)
	i1 := v.put(t, "b", "k", v1)
	i2 := v.put(t, "b", "k", v2)
	if i1.ETag == i2.ETag {
		t.Fatal("etags equal")
	}
	info, _, b := v.get(t, "b", "k", store.GetOptions{})
	SameBytes(t, "after overwrite", b, v2)
	if info.ETag != i2.ETag {
		t.Errorf("after overwrite: etag %s, want %s", info.ETag, i2.ETag)
	}
	// Overwriting a multipart object with a single put: testMultipart.

	// Deleting a missing key, or one deleted already, succeeds.
	for _, k := range []string{"k", one, one, "never-existed"} {
		if err := s.DeleteObject(ctx, "b", k); err != nil {
			t.Errorf("delete %s: %v", k, err)
		}
		if _, _, _, err := s.GetObject(ctx, "b", k, store.GetOptions{}, false); !errors.Is(err, store.ErrNoSuchKey) {
			t.Errorf("get %s after delete = %v", k, err)
		}
	}
	if err := s.DeleteObject(ctx, "nope", "k"); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("delete in missing bucket = %v", err)
	}

	keys = append(slices.DeleteFunc(keys, func(k string) bool { return k == one }), "missing")
	for i := range 150 {
		key := fmt.Sprintf("d/%03d", i)
		v.put(t, "b", key, []byte{byte(i)})
		keys = append(keys, key)
	}
	res, err := s.DeleteObjects(ctx, "b", keys)
	if err != nil || len(res) != len(keys) {
		t.Fatalf("DeleteObjects = %d results, %v", len(res), err)
	}
	for i, r := range res {
		if r.Key != keys[i] || r.Err != nil {
			t.Errorf("result %d = %+v", i, r)
		}
	}
	if n := v.Rows(t).Objects; n != 0 {
		t.Errorf("objects left: %d", n)
	}
}

func testCopy(t *testing.T, v *Env) {
	ctx := context.Background()
	if err := v.Store.CreateBucket(ctx, "c", ""); err != nil {
		t.Fatal(err)
	}
	large := Bytes(31, 2<<20+3)
	src := v.put(t, "b", "src", large)
	mp, mpInfo := v.multipartObject(t, "b", "mp", 20, store.MinPartSize, 100)
	before := v.Content(t)

	tests := []struct {
		name      string
		src       store.CopySource
		dstBucket string
		dst       string
		opts      store.CopyOptions
		want      []byte
		etag      string
		wantErr   error
	}{
		{"single", store.CopySource{Bucket: "b", Key: "src"}, "c", "copy1", store.CopyOptions{}, large, src.ETag, nil},
		{"same bucket", store.CopySource{Bucket: "b", Key: "src"}, "b", "dst", store.CopyOptions{}, large, src.ETag, nil},
		{"multipart", store.CopySource{Bucket: "b", Key: "mp"}, "c", "copy2", store.CopyOptions{}, mp, mpInfo.ETag, nil},
		{"replace meta", store.CopySource{Bucket: "b", Key: "src"}, "c", "copy3",
			store.CopyOptions{ReplaceMeta: true, Meta: store.ObjectMeta{ContentType: "x/y"}}, large, src.ETag, nil},
		{"onto itself", store.CopySource{Bucket: "b", Key: "src"}, "b", "src", store.CopyOptions{}, nil, "", store.ErrInvalidRequest},
		{"onto itself replacing meta", store.CopySource{Bucket: "b", Key: "src"}, "b", "src",
			store.CopyOptions{ReplaceMeta: true, Meta: store.ObjectMeta{ContentType: "image/png"}}, large, src.ETag, nil},
		{"missing source", store.CopySource{Bucket: "b", Key: "none"}, "c", "x", store.CopyOptions{}, nil, "", store.ErrNoSuchKey},
		{"missing source bucket", store.CopySource{Bucket: "nope", Key: "src"}, "c", "x", store.CopyOptions{}, nil, "", store.ErrNoSuchBucket},
		{"missing destination bucket", store.CopySource{Bucket: "b", Key: "src"}, "nobucket", "x", store.CopyOptions{}, nil, "", store.ErrNoSuchBucket},
		{"source if-none-match *", store.CopySource{Bucket: "b", Key: "src", Cond: store.Conditions{IfNoneMatch: "*"}}, "c", "x",
			store.CopyOptions{}, nil, "", store.ErrPreconditionFailed},
		{"source if-none-match etag", store.CopySource{Bucket: "b", Key: "src", Cond: store.Conditions{IfNoneMatch: src.ETag}}, "c", "x",
			store.CopyOptions{}, nil, "", store.ErrPreconditionFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := v.Store.CopyObject(ctx, tc.src, tc.dstBucket, tc.dst, tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _, b := v.get(t, tc.dstBucket, tc.dst, store.GetOptions{})
			SameBytes(t, tc.dst, b, tc.want)
			if got.ETag != tc.etag || info.ETag != tc.etag || info.Size != int64(len(tc.want)) {
				t.Errorf("copy: etag %s/%s size %d, want etag %s size %d", got.ETag, info.ETag, info.Size, tc.etag, len(tc.want))
			}
			if tc.opts.ReplaceMeta && got.Meta.ContentType != tc.opts.Meta.ContentType {
				t.Errorf("meta = %+v", got.Meta)
			}
		})
	}
	// Copies reference the source's blobs: they add no content.
	v.sameContent(t, "after copies", before)
	// The copy of a multipart object keeps its parts.
	info, _, b := v.get(t, "c", "copy2", store.GetOptions{PartNumber: 2})
	SameBytes(t, "part 2 of the copy", b, mp[store.MinPartSize:])
	if len(info.Parts) != 2 {
		t.Errorf("copied manifest: %d parts", len(info.Parts))
	}
	v.Idle(t)
}

func testList(t *testing.T, v *Env) {
	ctx := context.Background()
	// Byte order: "d" < "d/" < "z" < "z/" (0x7a) < "é" (0xc3 0xa9).
	sets := map[string][]string{
		"la": {"a/1", "a/2", "a/b/3", "b", "c/x/1", "c/y", "d", "d/", "z", "é/1"},
		"lb": {"a", "a/1", "a/2", "a/b/1", "b", "c/1", "c/2", "c/3", "d", "z/", "é"},
	}
	for bucket, keys := range sets {
		if err := v.Store.CreateBucket(ctx, bucket, ""); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			v.put(t, bucket, k, []byte(k))
		}
	}
	list := func(bucket string, p store.ListParams) (objs []string, res store.ListResult) {
		t.Helper()
		res, err := v.Store.ListObjects(ctx, bucket, p)
		if err != nil {
			t.Fatalf("list %s %+v: %v", bucket, p, err)
		}
		for _, o := range res.Objects {
			objs = append(objs, o.Key)
			if o.Size != int64(len(o.Key)) || o.ETag != MD5Hex([]byte(o.Key)) {
				t.Errorf("%s: size %d etag %s", o.Key, o.Size, o.ETag)
			}
		}
		return objs, res
	}
	type want struct {
		objs, prefixes []string
		truncated      bool
		next           string
	}
	tests := []struct {
		bucket, name string
		p            store.ListParams
		want         want
	}{
		{"la", "all", store.ListParams{}, want{objs: sets["la"]}},
		{"la", "delimiter", store.ListParams{Delimiter: "/"}, want{objs: []string{"b", "d", "z"}, prefixes: []string{"a/", "c/", "d/", "é/"}}},
		{"la", "prefix", store.ListParams{Prefix: "a/"}, want{objs: []string{"a/1", "a/2", "a/b/3"}}},
		{"la", "prefix+delimiter", store.ListParams{Prefix: "a/", Delimiter: "/"}, want{objs: []string{"a/1", "a/2"}, prefixes: []string{"a/b/"}}},
		{"la", "prefix+delimiter c", store.ListParams{Prefix: "c/", Delimiter: "/"}, want{objs: []string{"c/y"}, prefixes: []string{"c/x/"}}},
		{"la", "after", store.ListParams{After: "c/x/1"}, want{objs: []string{"c/y", "d", "d/", "z", "é/1"}}},
		{"la", "after a prefix", store.ListParams{After: "a/", Delimiter: "/"}, want{objs: []string{"b", "d", "z"}, prefixes: []string{"c/", "d/", "é/"}}},
		{"la", "multi-char delimiter", store.ListParams{Delimiter: "/1"},
			want{objs: []string{"a/2", "a/b/3", "b", "c/y", "d", "d/", "z"}, prefixes: []string{"a/1", "c/x/1", "é/1"}}},
		{"la", "no match", store.ListParams{Prefix: "q"}, want{}},
		{"la", "multibyte prefix", store.ListParams{Prefix: "é", Delimiter: "/"}, want{prefixes: []string{"é/"}}},
		{"la", "multibyte delimiter", store.ListParams{Delimiter: "é"}, want{objs: sets["la"][:9], prefixes: []string{"é"}}},
		{"lb", "all", store.ListParams{}, want{objs: sets["lb"]}},
		{"lb", "delimiter", store.ListParams{Delimiter: "/"}, want{objs: []string{"a", "b", "d", "é"}, prefixes: []string{"a/", "c/", "z/"}}},
		{"lb", "prefix+delimiter", store.ListParams{Prefix: "a/", Delimiter: "/"}, want{objs: []string{"a/1", "a/2"}, prefixes: []string{"a/b/"}}},
		{"lb", "prefix", store.ListParams{Prefix: "c/"}, want{objs: []string{"c/1", "c/2", "c/3"}}},
		{"lb", "max keys", store.ListParams{MaxKeys: 2}, want{objs: []string{"a", "a/1"}, truncated: true, next: "a/1"}},
		{"lb", "max keys with prefixes", store.ListParams{Delimiter: "/", MaxKeys: 3}, want{objs: []string{"a", "b"}, prefixes: []string{"a/"}, truncated: true, next: "b"}},
		{"lb", "after inside prefix", store.ListParams{Delimiter: "/", After: "a/1"}, want{objs: []string{"b", "d", "é"}, prefixes: []string{"c/", "z/"}}},
		{"lb", "after", store.ListParams{After: "c/3"}, want{objs: []string{"d", "z/", "é"}}},
		{"lb", "no match", store.ListParams{Prefix: "q"}, want{}},
	}
	for _, tc := range tests {
		t.Run(tc.bucket+" "+tc.name, func(t *testing.T) {
			objs, res := list(tc.bucket, tc.p)
			if !slices.Equal(objs, tc.want.objs) || !slices.Equal(res.CommonPrefixes, tc.want.prefixes) ||
				res.Truncated != tc.want.truncated || res.NextAfter != tc.want.next {
				t.Errorf("got objs %q prefixes %q truncated %v next %q; want %+v", objs, res.CommonPrefixes, res.Truncated, res.NextAfter, tc.want)
			}
		})
	}
	// Pages of every size reassemble into the unpaginated listing, each
	// entry exactly once.
	for bucket := range sets {
		for _, delim := range []string{"", "/"} {
			objs, res := list(bucket, store.ListParams{Delimiter: delim})
			full := slices.Sorted(slices.Values(append(objs, res.CommonPrefixes...)))
			for size := 1; size <= 4; size++ {
				var all []string
				after := ""
				for page := 0; ; page++ {
					if page > 20 {
						t.Fatalf("%s delimiter %q size %d: no end", bucket, delim, size)
					}
					objs, res := list(bucket, store.ListParams{Delimiter: delim, After: after, MaxKeys: size})
					got := append(objs, res.CommonPrefixes...)
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
				if slices.Sort(all); !slices.Equal(all, full) {
					t.Errorf("%s delimiter %q pages of %d: %q, want %q", bucket, delim, size, all, full)
				}
			}
		}
	}
	if _, err := v.Store.ListObjects(ctx, "nope", store.ListParams{}); !errors.Is(err, store.ErrNoSuchBucket) {
		t.Errorf("list missing bucket: %v", err)
	}
}
