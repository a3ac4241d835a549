package s3api

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/store"
)

// memStore is an in-memory store.ObjectStore for handler tests. It uses the
// store's own range and condition helpers so that those semantics are real.
type memStore struct {
	mu       sync.Mutex
	buckets  map[string]store.Bucket
	objects  map[string]map[string]*memObject
	uploads  map[string]*memUpload
	nextID   int
	lastPut  store.PutOptions
	lastCopy struct {
		src  store.CopySource
		opts store.CopyOptions
	}
	lastComplete []store.CompletePart
	lastList     store.ListParams
	// failKeys make DeleteObjects report these per-key errors.
	failKeys map[string]error
	// readErr, if set, makes opened readers fail after readErrAfter bytes.
	readErr      error
	readErrAfter int
	readers      []*memReader
	// injected is returned by every call when set.
	injected error
	// cors holds each bucket's CORS rules (cors_test.go).
	cors map[string][]store.CORSRule
	// versioning is each bucket's versioning state; listVersions, if set,
	// is every ListObjectVersions page; markerIDs are the version ids that
	// name delete markers (versions_test.go).
	versioning       map[string]string
	listVersions     *store.ListVersionsResult
	lastListVersions store.ListVersionsParams
	markerIDs        map[string]bool
}

type memObject struct {
	data []byte
	info store.ObjectInfo
}

type memUpload struct {
	up    store.Upload
	parts map[int]*memObject
}

var fixedTime = time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC)

func newMemStore() *memStore {
	return &memStore{
		buckets: map[string]store.Bucket{},
		objects: map[string]map[string]*memObject{},
		uploads: map[string]*memUpload{},
	}
}

func (m *memStore) ListBuckets(context.Context) ([]store.Bucket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.injected != nil {
		return nil, m.injected
	}
	var out []store.Bucket
	for _, b := range m.buckets {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *memStore) CreateBucket(_ context.Context, name, region string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.injected != nil {
		return m.injected
	}
	if strings.ToLower(name) != name {
		return fmt.Errorf("create %q: %w", name, store.ErrInvalidBucketName)
	}
	if _, ok := m.buckets[name]; ok {
		return fmt.Errorf("create %q: %w", name, store.ErrBucketExists)
	}
	m.buckets[name] = store.Bucket{Name: name, Region: region, CreatedAt: fixedTime}
	m.objects[name] = map[string]*memObject{}
	return nil
}

func (m *memStore) HeadBucket(_ context.Context, name string) (store.Bucket, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.injected != nil {
		return store.Bucket{}, m.injected
	}
	b, ok := m.buckets[name]
	if !ok {
		return b, fmt.Errorf("head %q: %w", name, store.ErrNoSuchBucket)
	}
	return b, nil
}

func (m *memStore) DeleteBucket(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.buckets[name]; !ok {
		return store.ErrNoSuchBucket
	}
	if len(m.objects[name]) > 0 {
		return fmt.Errorf("delete %q: %w", name, store.ErrBucketNotEmpty)
	}
	delete(m.buckets, name)
	delete(m.objects, name)
	return nil
}

// stage reads body like the real store: checks the signed payload hash, size, Content-MD5 and the
// declared checksum, then the trailer.
func (m *memStore) stage(body io.Reader, opts store.PutOptions) ([]byte, store.Checksum, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, store.Checksum{}, fmt.Errorf("stage: %w", err)
	}
	if w := opts.PayloadSHA256; w != nil && sha256.Sum256(data) != *w {
		return nil, store.Checksum{}, fmt.Errorf("stage: %w", store.ErrPayloadSHA256Mismatch)
	}
	if opts.Size >= 0 && int64(len(data)) < opts.Size {
		return nil, store.Checksum{}, store.ErrIncompleteBody
	}
	if opts.ContentMD5 != nil {
		sum := md5.Sum(data)
		if !bytes.Equal(sum[:], opts.ContentMD5) {
			return nil, store.Checksum{}, fmt.Errorf("stage: %w", store.ErrBadDigest)
		}
	}
	var ck store.Checksum
	for alg, v := range opts.Checksums {
		got, err := computeChecksum(alg, data)
		if err != nil {
			return nil, ck, err
		}
		if got != v {
			return nil, ck, fmt.Errorf("stage %s: %w", alg, store.ErrBadDigest)
		}
		ck = store.Checksum{Algorithm: alg, Value: v}
	}
	if opts.TrailerChecksum != nil {
		alg, v, err := opts.TrailerChecksum()
		if err != nil {
			return nil, ck, err
		}
		if got, _ := computeChecksum(alg, data); got != v {
			return nil, ck, store.ErrBadDigest
		}
		ck = store.Checksum{Algorithm: alg, Value: v}
	}
	if ck.Algorithm == "" && opts.ChecksumAlgorithm != "" {
		v, err := computeChecksum(opts.ChecksumAlgorithm, data)
		if err != nil {
			return nil, ck, err
		}
		ck = store.Checksum{Algorithm: opts.ChecksumAlgorithm, Value: v}
	}
	return data, ck, nil
}

func (m *memStore) PutObject(_ context.Context, bucket, key string, body io.Reader, opts store.PutOptions) (store.ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastPut = opts
	if m.injected != nil {
		return store.ObjectInfo{}, m.injected
	}
	objs, ok := m.objects[bucket]
	if !ok {
		return store.ObjectInfo{}, store.ErrNoSuchBucket
	}
	if len(key) > store.MaxKeyLength {
		return store.ObjectInfo{}, store.ErrKeyTooLong
	}
	data, ck, err := m.stage(body, opts)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	sum := md5.Sum(data)
	info := store.ObjectInfo{Bucket: bucket, Key: key, Size: int64(len(data)), ETag: hex.EncodeToString(sum[:]),
		LastModified: fixedTime, Meta: opts.Meta, Checksum: ck}
	objs[key] = &memObject{data: data, info: info}
	return info, nil
}

type memReader struct {
	r      io.Reader
	closed bool
}

func (r *memReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *memReader) Close() error               { r.closed = true; return nil }

type failingReader struct {
	data  []byte
	after int
	err   error
	pos   int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.pos >= f.after {
		return 0, f.err
	}
	n := copy(p, f.data[f.pos:f.after])
	f.pos += n
	return n, nil
}

func (m *memStore) GetObject(_ context.Context, bucket, key string, opts store.GetOptions, head bool) (store.ObjectInfo, *store.ByteRange, store.Reader, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.injected != nil {
		return store.ObjectInfo{}, nil, nil, m.injected
	}
	objs, ok := m.objects[bucket]
	if !ok {
		return store.ObjectInfo{}, nil, nil, store.ErrNoSuchBucket
	}
	o, ok := objs[key]
	if !ok {
		return store.ObjectInfo{}, nil, nil, fmt.Errorf("get %q: %w", key, store.ErrNoSuchKey)
	}
	info := o.info
	if err := store.EvalConditions(opts.Cond, info.ETag, info.LastModified); err != nil {
		return info, nil, nil, err
	}
	var rng *store.ByteRange
	if opts.PartNumber > 0 {
		if len(info.Parts) > 0 {
			if opts.PartNumber > len(info.Parts) {
				return info, nil, nil, store.ErrInvalidRange
			}
			var off int64
			for _, p := range info.Parts[:opts.PartNumber-1] {
				off += p.Size
			}
			rng = &store.ByteRange{Start: off, End: off + info.Parts[opts.PartNumber-1].Size - 1}
		} else if opts.PartNumber != 1 {
			return info, nil, nil, store.ErrInvalidRange
		}
	} else {
		var err error
		if rng, err = store.ParseRange(opts.RangeSpec, info.Size); err != nil {
			return info, nil, nil, err
		}
	}
	if head {
		return info, rng, nil, nil
	}
	data := o.data
	if rng != nil {
		data = data[rng.Start : rng.End+1]
	}
	var src io.Reader = bytes.NewReader(data)
	if m.readErr != nil {
		src = &failingReader{data: data, after: m.readErrAfter, err: m.readErr}
	}
	rd := &memReader{r: src}
	m.readers = append(m.readers, rd)
	return info, rng, rd, nil
}

func (m *memStore) DeleteObject(_ context.Context, bucket, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	objs, ok := m.objects[bucket]
	if !ok {
		return store.ErrNoSuchBucket
	}
	delete(objs, key)
	return nil
}

func (m *memStore) DeleteObjects(_ context.Context, bucket string, keys []string) ([]store.DeleteResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	objs, ok := m.objects[bucket]
	if !ok {
		return nil, store.ErrNoSuchBucket
	}
	var out []store.DeleteResult
	for _, k := range keys {
		if err := m.failKeys[k]; err != nil {
			out = append(out, store.DeleteResult{Key: k, Err: err})
			continue
		}
		delete(objs, k)
		out = append(out, store.DeleteResult{Key: k})
	}
	return out, nil
}

func (m *memStore) ListObjects(_ context.Context, bucket string, p store.ListParams) (store.ListResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastList = p
	objs, ok := m.objects[bucket]
	if !ok {
		return store.ListResult{}, store.ErrNoSuchBucket
	}
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var res store.ListResult
	seen := map[string]bool{}
	n := 0
	for _, k := range keys {
		if !strings.HasPrefix(k, p.Prefix) || k <= p.After {
			continue
		}
		entry := k
		isPrefix := false
		if p.Delimiter != "" {
			if i := strings.Index(k[len(p.Prefix):], p.Delimiter); i >= 0 {
				entry = k[:len(p.Prefix)+i+len(p.Delimiter)]
				isPrefix = true
				if seen[entry] || entry <= p.After {
					continue
				}
			}
		}
		if n == p.MaxKeys {
			res.Truncated = true
			break
		}
		n++
		res.NextAfter = entry
		if isPrefix {
			seen[entry] = true
			res.CommonPrefixes = append(res.CommonPrefixes, entry)
		} else {
			res.Objects = append(res.Objects, objs[k].info)
		}
	}
	return res, nil
}

func (m *memStore) CopyObject(_ context.Context, src store.CopySource, dstBucket, dstKey string, opts store.CopyOptions) (store.ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastCopy.src, m.lastCopy.opts = src, opts
	so, ok := m.objects[src.Bucket][src.Key]
	if !ok {
		return store.ObjectInfo{}, store.ErrNoSuchKey
	}
	if err := store.EvalConditions(src.Cond, so.info.ETag, so.info.LastModified); err != nil {
		if errors.Is(err, store.ErrNotModified) {
			err = store.ErrPreconditionFailed // copy conditions never answer 304
		}
		return store.ObjectInfo{}, err
	}
	dst, ok := m.objects[dstBucket]
	if !ok {
		return store.ObjectInfo{}, store.ErrNoSuchBucket
	}
	info := so.info
	info.Bucket, info.Key = dstBucket, dstKey
	if opts.ReplaceMeta {
		info.Meta = opts.Meta
	}
	dst[dstKey] = &memObject{data: so.data, info: info}
	return info, nil
}

func (m *memStore) CreateMultipartUpload(_ context.Context, bucket, key string, meta store.ObjectMeta, alg, typ string) (store.Upload, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.buckets[bucket]; !ok {
		return store.Upload{}, store.ErrNoSuchBucket
	}
	m.nextID++
	up := store.Upload{Bucket: bucket, Key: key, UploadID: fmt.Sprintf("up%d", m.nextID), Initiated: fixedTime, Meta: meta,
		ChecksumAlgorithm: alg, ChecksumType: typ}
	m.uploads[up.UploadID] = &memUpload{up: up, parts: map[int]*memObject{}}
	return up, nil
}

func (m *memStore) upload(bucket, key, id string) (*memUpload, error) {
	u, ok := m.uploads[id]
	if !ok || u.up.Bucket != bucket || u.up.Key != key {
		return nil, fmt.Errorf("upload %q: %w", id, store.ErrNoSuchUpload)
	}
	return u, nil
}

func (m *memStore) UploadPart(_ context.Context, bucket, key, uploadID string, n int, body io.Reader, opts store.PutOptions) (store.PartInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, err := m.upload(bucket, key, uploadID)
	if err != nil {
		return store.PartInfo{}, err
	}
	data, ck, err := m.stage(body, opts)
	if err != nil {
		return store.PartInfo{}, err
	}
	sum := md5.Sum(data)
	p := store.PartInfo{Number: n, Size: int64(len(data)), ETag: hex.EncodeToString(sum[:]), LastModified: fixedTime, Checksum: ck}
	u.parts[n] = &memObject{data: data, info: store.ObjectInfo{Size: p.Size, ETag: p.ETag, Checksum: ck}}
	return p, nil
}

func (m *memStore) UploadPartCopy(_ context.Context, src store.CopySource, bucket, key, uploadID string, n int) (store.PartInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastCopy.src = src
	u, err := m.upload(bucket, key, uploadID)
	if err != nil {
		return store.PartInfo{}, err
	}
	so, ok := m.objects[src.Bucket][src.Key]
	if !ok {
		return store.PartInfo{}, store.ErrNoSuchKey
	}
	data := so.data
	if src.Range != nil {
		if src.Range.End >= int64(len(data)) {
			return store.PartInfo{}, store.ErrInvalidRange
		}
		data = data[src.Range.Start : src.Range.End+1]
	}
	sum := md5.Sum(data)
	p := store.PartInfo{Number: n, Size: int64(len(data)), ETag: hex.EncodeToString(sum[:]), LastModified: fixedTime}
	u.parts[n] = &memObject{data: data, info: store.ObjectInfo{Size: p.Size, ETag: p.ETag}}
	return p, nil
}

func (m *memStore) CompleteMultipartUpload(_ context.Context, bucket, key, uploadID string, parts []store.CompletePart, _ store.PutOptions) (store.ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastComplete = parts
	u, err := m.upload(bucket, key, uploadID)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	var data, md5s []byte
	var infos []store.PartInfo
	for i := 1; i < len(parts); i++ {
		if parts[i].Number <= parts[i-1].Number {
			return store.ObjectInfo{}, store.ErrInvalidPartOrder
		}
	}
	for _, cp := range parts {
		p, ok := u.parts[cp.Number]
		if !ok || p.info.ETag != cp.ETag {
			return store.ObjectInfo{}, store.ErrInvalidPart
		}
		data = append(data, p.data...)
		raw, _ := hex.DecodeString(p.info.ETag)
		md5s = append(md5s, raw...)
		infos = append(infos, store.PartInfo{Number: cp.Number, Size: p.info.Size, ETag: p.info.ETag, Checksum: p.info.Checksum})
	}
	sum := md5.Sum(md5s)
	info := store.ObjectInfo{Bucket: bucket, Key: key, Size: int64(len(data)),
		ETag: fmt.Sprintf("%s-%d", hex.EncodeToString(sum[:]), len(parts)), LastModified: fixedTime,
		Meta: u.up.Meta, Parts: infos}
	m.objects[bucket][key] = &memObject{data: data, info: info}
	delete(m.uploads, uploadID)
	return info, nil
}

func (m *memStore) AbortMultipartUpload(_ context.Context, bucket, key, uploadID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.upload(bucket, key, uploadID); err != nil {
		return err
	}
	delete(m.uploads, uploadID)
	return nil
}

func (m *memStore) ListParts(_ context.Context, bucket, key, uploadID string, marker, maxParts int) (store.ListPartsResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, err := m.upload(bucket, key, uploadID)
	if err != nil {
		return store.ListPartsResult{}, err
	}
	res := store.ListPartsResult{Upload: u.up}
	var nums []int
	for n := range u.parts {
		if n > marker {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	for _, n := range nums {
		if len(res.Parts) == maxParts {
			res.Truncated = true
			break
		}
		p := u.parts[n]
		res.Parts = append(res.Parts, store.PartInfo{Number: n, Size: p.info.Size, ETag: p.info.ETag, LastModified: fixedTime, Checksum: p.info.Checksum})
		res.NextPartNumberMarker = n
	}
	return res, nil
}

func (m *memStore) ListMultipartUploads(_ context.Context, bucket string, p store.ListUploadsParams) (store.ListUploadsResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.buckets[bucket]; !ok {
		return store.ListUploadsResult{}, store.ErrNoSuchBucket
	}
	var res store.ListUploadsResult
	for _, u := range m.uploads {
		if u.up.Bucket == bucket && strings.HasPrefix(u.up.Key, p.Prefix) {
			res.Uploads = append(res.Uploads, u.up)
		}
	}
	sort.Slice(res.Uploads, func(i, j int) bool { return res.Uploads[i].Key < res.Uploads[j].Key })
	return res, nil
}

// fakeAuth accepts every request as access key "AKTEST" unless the test
// headers ask otherwise:
//
//	X-Fake-Auth: anonymous | <auth error code>
//	X-Fake-Body-Error: <auth error code>  (the body fails after its bytes)
//	X-Fake-Trailer: <ALG>=<value>          (a trailing checksum)
type fakeAuth struct{}

func (fakeAuth) Verify(r *http.Request) (*auth.Result, error) {
	switch v := r.Header.Get("X-Fake-Auth"); v {
	case "":
	case "anonymous":
		return &auth.Result{Anonymous: true, Body: r.Body, DecodedLength: r.ContentLength}, nil
	default:
		return nil, &auth.Error{Code: v, Message: "fake " + v}
	}
	res := &auth.Result{AccessKey: "AKTEST", Body: r.Body, DecodedLength: r.ContentLength}
	if code := r.Header.Get("X-Fake-Body-Error"); code != "" {
		res.Body = io.NopCloser(io.MultiReader(r.Body, &errReader{&auth.Error{Code: code, Message: "fake body " + code}}))
	}
	if tr := r.Header.Get("X-Fake-Trailer"); tr != "" {
		alg, val, _ := strings.Cut(tr, "=")
		res.Trailer = func() (string, string, error) { return alg, val, nil }
	}
	return res, nil
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

// env is a handler over a memStore with captured logs.
type env struct {
	t    *testing.T
	st   *memStore
	h    http.Handler
	logs *bytes.Buffer
	mu   *sync.Mutex
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	e := &env{t: t, st: newMemStore(), logs: &bytes.Buffer{}, mu: &sync.Mutex{}}
	log := slog.New(slog.NewTextHandler(lockedWriter{e.mu, e.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.h = New(cfg, e.st, fakeAuth{}, log)
	return e
}

// req is one test request.
type req struct {
	method, target, host, body string
	hdr                        map[string]string
}

func (e *env) do(r req) *httptest.ResponseRecorder {
	e.t.Helper()
	hr := httptest.NewRequest(r.method, r.target, strings.NewReader(r.body))
	if r.body == "" {
		hr = httptest.NewRequest(r.method, r.target, nil)
	}
	if r.host != "" {
		hr.Host = r.host
	}
	for k, v := range r.hdr {
		hr.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, hr)
	return w
}

// mustPut stores an object through the API.
func (e *env) mustPut(bucket, key, body string, hdr map[string]string) {
	e.t.Helper()
	w := e.do(req{method: "PUT", target: "/" + bucket + "/" + key, body: body, hdr: hdr})
	if w.Code != http.StatusOK {
		e.t.Fatalf("put %s/%s: %d %s", bucket, key, w.Code, w.Body.String())
	}
}

func (e *env) mustBucket(name string) {
	e.t.Helper()
	if w := e.do(req{method: "PUT", target: "/" + name}); w.Code != http.StatusOK {
		e.t.Fatalf("create bucket %s: %d %s", name, w.Code, w.Body.String())
	}
}

func (e *env) logText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.logs.String()
}

var errSlowDownForTest = store.ErrSlowDown

// objInfo is a listing entry for key with a recognisable ETag.
func objInfo(key string) store.ObjectInfo {
	return store.ObjectInfo{Bucket: "b", Key: key, Size: 1, ETag: "etag-" + key, LastModified: fixedTime}
}

// The versioning calls: the fake keeps one version per key, as a bucket
// without versioning does, and a versioning state per bucket. Tests script
// what a versioned store answers: listVersions is ListObjectVersions's
// page, and a deleted id in markerIDs was a delete marker; a delete without
// a version id in a versioned bucket creates marker newMarkerID.

// newMarkerID is the id of every delete marker the fake creates.
const newMarkerID = "MARKER0123456789abcdefghijklmnop"

func (m *memStore) SetBucketVersioning(_ context.Context, bucket, status string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.buckets[bucket]; !ok {
		return store.ErrNoSuchBucket
	}
	if m.versioning == nil {
		m.versioning = map[string]string{}
	}
	m.versioning[bucket] = status
	return nil
}

func (m *memStore) BucketVersioning(_ context.Context, bucket string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.buckets[bucket]; !ok {
		return "", store.ErrNoSuchBucket
	}
	return m.versioning[bucket], nil
}

func (m *memStore) DeleteObjectVersion(ctx context.Context, bucket, key string, opts store.DeleteOptions) (store.DeleteVersionResult, error) {
	res, err := m.DeleteObjectVersions(ctx, bucket, []store.ObjectID{{Key: key, VersionID: opts.VersionID}})
	if err != nil {
		return store.DeleteVersionResult{}, err
	}
	return res[0], res[0].Err
}

func (m *memStore) DeleteObjectVersions(ctx context.Context, bucket string, ids []store.ObjectID) ([]store.DeleteVersionResult, error) {
	state, err := m.BucketVersioning(ctx, bucket)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = id.Key
	}
	res, err := m.DeleteObjects(ctx, bucket, keys)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]store.DeleteVersionResult, len(res))
	for i, r := range res {
		d := store.DeleteVersionResult{Key: r.Key, Err: r.Err, VersionID: ids[i].VersionID}
		switch {
		case d.VersionID != "":
			d.DeleteMarker = m.markerIDs[d.VersionID]
		case state == store.VersioningEnabled:
			d.VersionID, d.DeleteMarker = newMarkerID, true
		case state == store.VersioningSuspended:
			d.VersionID, d.DeleteMarker = store.NullVersion, true
		}
		out[i] = d
	}
	return out, nil
}

func (m *memStore) ListObjectVersions(_ context.Context, bucket string, p store.ListVersionsParams) (store.ListVersionsResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.buckets[bucket]; !ok {
		return store.ListVersionsResult{}, store.ErrNoSuchBucket
	}
	m.lastListVersions = p
	if m.listVersions != nil {
		return *m.listVersions, nil
	}
	var res store.ListVersionsResult
	for _, o := range m.objects[bucket] {
		if strings.HasPrefix(o.info.Key, p.Prefix) && o.info.Key > p.KeyMarker {
			v := o.info
			v.VersionID, v.IsLatest = store.NullVersion, true
			res.Versions = append(res.Versions, v)
		}
	}
	sort.Slice(res.Versions, func(i, j int) bool { return res.Versions[i].Key < res.Versions[j].Key })
	if len(res.Versions) > p.MaxKeys {
		res.Versions, res.Truncated = res.Versions[:p.MaxKeys], true
		res.NextKeyMarker, res.NextVersionIDMarker = res.Versions[p.MaxKeys-1].Key, store.NullVersion
	}
	return res, nil
}

func (m *memStore) ReplaceObjectMeta(_ context.Context, bucket, key, versionID, etag string, meta store.ObjectMeta) (store.ObjectInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.injected != nil {
		return store.ObjectInfo{}, m.injected
	}
	o, ok := m.objects[bucket][key]
	switch {
	case !ok:
		return store.ObjectInfo{}, store.ErrNoSuchKey
	case versionID != "" && versionID != store.NullVersion && versionID != o.info.VersionID:
		return store.ObjectInfo{}, store.ErrNoSuchVersion
	case o.info.ETag != etag:
		return store.ObjectInfo{}, store.ErrPreconditionFailed
	}
	o.info.Meta = meta
	return o.info, nil
}
