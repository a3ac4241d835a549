package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

// fakeStore is an in-memory model of the store calls the runner makes,
// with S3's versioning semantics. Resuming a version listing from a version
// that no longer exists is an error, so that a runner deleting its own
// cursor fails the test.
type fakeStore struct {
	mu         sync.Mutex
	cfg        string
	versioning string
	keys       map[string][]store.ObjectInfo // newest first
	uploads    []store.Upload
	refuse     map[string]bool // key@version whose deletion is refused
	seq        int
}

var errLocked = errors.New("object is locked")

func newFake(t *testing.T, versioning, rules string) *fakeStore {
	t.Helper()
	c, err := parse(t, rules)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return &fakeStore{cfg: doc, versioning: versioning, keys: map[string][]store.ObjectInfo{}, refuse: map[string]bool{}}
}

func (f *fakeStore) put(key string, size int64, lm time.Time, tags ...store.Tag) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	id := store.NullVersion
	if f.versioning != "" {
		id = fmt.Sprintf("v%d", f.seq)
	}
	o := store.ObjectInfo{Key: key, Size: size, ETag: fmt.Sprintf("etag%d", f.seq), LastModified: lm, VersionID: id, Meta: store.ObjectMeta{Tags: tags}}
	if f.versioning == "" {
		f.keys[key] = nil
	}
	f.keys[key] = append([]store.ObjectInfo{o}, f.keys[key]...)
	return id
}

func (f *fakeStore) marker(key string, lm time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	m := store.ObjectInfo{Key: key, DeleteMarker: true, LastModified: lm, VersionID: fmt.Sprintf("v%d", f.seq)}
	f.keys[key] = append([]store.ObjectInfo{m}, f.keys[key]...)
}

// ids lists each key's version ids, newest first ("*" marks a delete marker).
func (f *fakeStore) ids() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, vs := range f.keys {
		var s []string
		for _, v := range vs {
			if v.DeleteMarker {
				s = append(s, "*"+v.VersionID)
			} else {
				s = append(s, v.VersionID)
			}
		}
		if len(s) > 0 {
			out[k] = strings.Join(s, " ")
		}
	}
	return out
}

func (f *fakeStore) sorted() []string {
	var ks []string
	for k, vs := range f.keys {
		if len(vs) > 0 {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	return ks
}

func (f *fakeStore) ListBuckets(context.Context) ([]store.Bucket, error) {
	return []store.Bucket{{Name: "b"}}, nil
}

func (f *fakeStore) BucketConfigs(context.Context, string) (map[string]string, error) {
	return map[string]string{ConfigName: f.cfg}, nil
}

func (f *fakeStore) BucketVersioning(context.Context, string) (string, error) {
	return f.versioning, nil
}

func (f *fakeStore) ListObjects(_ context.Context, _ string, p store.ListParams) (store.ListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var res store.ListResult
	for _, k := range f.sorted() {
		if k <= p.After || !strings.HasPrefix(k, p.Prefix) || f.keys[k][0].DeleteMarker {
			continue
		}
		if len(res.Objects) == p.MaxKeys {
			res.Truncated, res.NextAfter = true, res.Objects[len(res.Objects)-1].Key
			break
		}
		o := f.keys[k][0]
		o.Meta = store.ObjectMeta{} // listings carry no tags
		res.Objects = append(res.Objects, o)
	}
	return res, nil
}

func (f *fakeStore) GetObject(_ context.Context, _, key string, opts store.GetOptions, head bool) (store.ObjectInfo, *store.ByteRange, store.Reader, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs := f.keys[key]
	for i, v := range vs {
		if (opts.VersionID == "" && i == 0) || v.VersionID == opts.VersionID {
			if v.DeleteMarker {
				return v, nil, nil, store.ErrNoSuchKey
			}
			return v, nil, nil, nil
		}
	}
	return store.ObjectInfo{}, nil, nil, store.ErrNoSuchKey
}

func (f *fakeStore) ListObjectVersions(_ context.Context, _ string, p store.ListVersionsParams) (store.ListVersionsResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []store.ObjectInfo
	resume := -1
	for _, k := range f.sorted() {
		if !strings.HasPrefix(k, p.Prefix) {
			continue
		}
		for i, v := range f.keys[k] {
			v.IsLatest = i == 0
			if k == p.KeyMarker && v.VersionID == p.VersionIDMarker {
				resume = len(all)
			}
			all = append(all, v)
		}
	}
	var res store.ListVersionsResult
	start := 0
	switch {
	case p.VersionIDMarker != "" && resume < 0:
		return res, fmt.Errorf("version-id-marker %s/%s names no version", p.KeyMarker, p.VersionIDMarker)
	case p.VersionIDMarker != "":
		start = resume + 1
	case p.KeyMarker != "":
		for start < len(all) && all[start].Key <= p.KeyMarker {
			start++
		}
	}
	for _, v := range all[start:] {
		if len(res.Versions) == p.MaxKeys {
			last := res.Versions[len(res.Versions)-1]
			res.Truncated, res.NextKeyMarker, res.NextVersionIDMarker = true, last.Key, last.VersionID
			break
		}
		v.Meta = store.ObjectMeta{}
		res.Versions = append(res.Versions, v)
	}
	return res, nil
}

func (f *fakeStore) DeleteObjectVersion(_ context.Context, _, key string, opts store.DeleteOptions) (store.DeleteVersionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vs := f.keys[key]
	if opts.VersionID != "" {
		return store.DeleteVersionResult{}, errors.New("the runner deletes single versions in batches")
	}
	if len(vs) == 0 || vs[0].DeleteMarker {
		return store.DeleteVersionResult{Key: key}, nil
	}
	if (opts.IfMatch != "" && vs[0].ETag != opts.IfMatch) ||
		(opts.IfMatchLastModified != nil && !vs[0].LastModified.Equal(*opts.IfMatchLastModified)) {
		return store.DeleteVersionResult{}, store.ErrPreconditionFailed
	}
	if f.refuse[key+"@"+vs[0].VersionID] {
		return store.DeleteVersionResult{}, errLocked
	}
	if f.versioning == "" {
		delete(f.keys, key)
		return store.DeleteVersionResult{Key: key}, nil
	}
	f.seq++
	m := store.ObjectInfo{Key: key, DeleteMarker: true, VersionID: fmt.Sprintf("v%d", f.seq), LastModified: vs[0].LastModified.Add(time.Millisecond)}
	f.keys[key] = append([]store.ObjectInfo{m}, vs...)
	return store.DeleteVersionResult{Key: key, VersionID: m.VersionID, DeleteMarker: true}, nil
}

func (f *fakeStore) DeleteObjectVersions(_ context.Context, _ string, ids []store.ObjectID) ([]store.DeleteVersionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(ids) > store.MaxDeleteObjects {
		return nil, store.ErrInvalidRequest
	}
	var out []store.DeleteVersionResult
	for _, id := range ids {
		r := store.DeleteVersionResult{Key: id.Key, VersionID: id.VersionID}
		if f.refuse[id.Key+"@"+id.VersionID] {
			r.Err = errLocked
		} else {
			f.keys[id.Key] = slices.DeleteFunc(f.keys[id.Key], func(v store.ObjectInfo) bool { return v.VersionID == id.VersionID })
		}
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeStore) ListMultipartUploads(_ context.Context, _ string, p store.ListUploadsParams) (store.ListUploadsResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var res store.ListUploadsResult
	for _, u := range f.uploads {
		if !strings.HasPrefix(u.Key, p.Prefix) || u.Key+"\x00"+u.UploadID <= p.KeyMarker+"\x00"+p.UploadIDMarker {
			continue
		}
		if len(res.Uploads) == p.MaxUploads {
			last := res.Uploads[len(res.Uploads)-1]
			res.Truncated, res.NextKeyMarker, res.NextUploadIDMarker = true, last.Key, last.UploadID
			break
		}
		res.Uploads = append(res.Uploads, u)
	}
	return res, nil
}

func (f *fakeStore) AbortMultipartUpload(_ context.Context, _, key, uploadID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.uploads)
	f.uploads = slices.DeleteFunc(f.uploads, func(u store.Upload) bool { return u.Key == key && u.UploadID == uploadID })
	if len(f.uploads) == n {
		return store.ErrNoSuchUpload
	}
	return nil
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func clock(at time.Time) func(context.Context) (time.Time, error) {
	return func(context.Context) (time.Time, error) { return at, nil }
}

func day(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

// TestRunCurrent: Expiration removes the current versions whose day has
// come (prefix, tags, size), leaves the others, and on a versioned bucket
// makes a delete marker; a refused deletion is counted and skipped.
func TestRunCurrent(t *testing.T) {
	for _, versioning := range []string{"", store.VersioningEnabled} {
		t.Run("versioning="+versioning, func(t *testing.T) {
			f := newFake(t, versioning, `<Rule><ID>a</ID><Filter><Prefix>a/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`+
				`<Rule><ID>t</ID><Filter><And><Prefix>t/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag><ObjectSizeLessThan>10</ObjectSizeLessThan></And></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`+
				`<Rule><ID>off</ID><Filter/><Status>Disabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)
			for i := range 5 {
				f.put(fmt.Sprintf("a/%d", i), 1, t0)
			}
			f.put("a/young", 1, t0.Add(day(1)))
			f.put("b/old", 1, t0)
			f.put("t/tagged", 1, t0, store.Tag{Key: "k", Value: "v"})
			f.put("t/big", 10, t0, store.Tag{Key: "k", Value: "v"})
			f.put("t/untagged", 1, t0)
			locked := f.put("a/locked", 1, t0)
			f.refuse["a/locked@"+locked] = true
			// Due: the midnight after t0 + 1 day.
			st, err := RunOnce(context.Background(), f, Options{Now: clock(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)), Batch: 2})
			if err != nil {
				t.Fatal(err)
			}
			if st.Expired != 6 || st.Refused != 1 || st.Changed != 0 {
				t.Errorf("stats %+v, want 6 expired, 1 refused", st)
			}
			got := f.ids()
			for _, k := range []string{"a/young", "b/old", "t/big", "t/untagged", "a/locked"} {
				if strings.HasPrefix(got[k], "*") || got[k] == "" {
					t.Errorf("%s was expired: %q", k, got[k])
				}
			}
			for _, k := range []string{"a/0", "a/4", "t/tagged"} {
				switch {
				case versioning == "" && got[k] != "":
					t.Errorf("%s not removed: %q", k, got[k])
				case versioning != "" && (!strings.HasPrefix(got[k], "*") || strings.Count(got[k], " ") != 1):
					t.Errorf("%s: %q, want a delete marker over the version", k, got[k])
				}
			}
			// A day earlier nothing was due.
			g := newFake(t, versioning, `<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)
			g.put("x", 1, t0)
			if st, err := RunOnce(context.Background(), g, Options{Now: clock(time.Date(2026, 12, 2, 23, 59, 59, 0, time.UTC))}); err != nil || st.Expired != 0 {
				t.Errorf("before the midnight: %+v %v", st, err)
			}
		})
	}
}

// TestRunOverwriteRace: an object rewritten between the runner's judgement
// and its deletion survives (the deletion names the ETag and last-modified
// time it judged).
func TestRunOverwriteRace(t *testing.T) {
	f := newFake(t, "", `<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)
	f.put("k", 1, t0)
	now := t0.Add(day(3))
	var rewritten string
	opts := Options{Now: clock(now), beforeExpire: func(_, key string) {
		f.put(key, 2, now) // a new object, written after the judgement
		rewritten = f.keys[key][0].ETag
	}}
	st, err := RunOnce(context.Background(), f, opts)
	if err != nil {
		t.Fatal(err)
	}
	info, _, _, err := f.GetObject(context.Background(), "b", "k", store.GetOptions{}, true)
	if err != nil || info.ETag != rewritten {
		t.Fatalf("the rewritten object did not survive: %+v %v", info, err)
	}
	if st.Expired != 0 || st.Changed != 1 {
		t.Errorf("stats %+v, want 0 expired, 1 changed", st)
	}
}

// TestRunVersions: noncurrent versions expire NoncurrentDays after their
// successor was written, the NewerNoncurrentVersions newest are kept,
// expired delete markers go, markers with versions stay; small pages.
func TestRunVersions(t *testing.T) {
	f := newFake(t, store.VersioningEnabled, `<Rule><ID>nc</ID><Filter><Prefix>k</Prefix></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays><NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>`+
		`<Rule><ID>m</ID><Filter><Prefix>m</Prefix></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`+
		`<Rule><ID>all</ID><Filter><Prefix>z</Prefix></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>`)
	// k1: v1..v5, each noncurrent from its successor's write, one day apart.
	for i := range 5 {
		f.put("k1", 1, t0.Add(day(i)))
	}
	f.put("k2", 1, t0) // current only
	f.marker("m1", t0) // a lone marker: expired
	f.put("m2", 1, t0)
	f.marker("m2", t0) // a marker over a version: kept
	f.put("z", 1, t0)
	f.put("z", 1, t0)
	f.put("z", 1, t0)
	zLocked := f.keys["z"][2].VersionID
	f.refuse["z@"+zLocked] = true
	// now: t0+5d+1h. k1's v1 (successor v2 at t0+1d) is due at t0+3d's
	// midnight, v2 at t0+4d's, v3 at t0+5d's (=Dec 7 00:00 > now? no:
	// Due(t0+2d,2) = Dec 6 00:00 + ... see below); v4 is the newest
	// noncurrent and kept by NewerNoncurrentVersions.
	now := time.Date(2026, 12, 6, 11, 0, 0, 0, time.UTC)
	before := f.ids()
	st, err := RunOnce(context.Background(), f, Options{Now: clock(now), Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := f.ids()
	// Due(successor, 2 days): v1 (succ Dec 2 10:00) → Dec 5; v2 (succ Dec 3)
	// → Dec 6 00:00 ≤ now; v3 (succ Dec 4) → Dec 7: kept; v4 kept (newest
	// noncurrent).
	want := map[string]string{
		"k1": strings.Join(strings.Fields(before["k1"])[:3], " "),
		"k2": before["k2"],
		"m2": before["m2"],
		"z":  strings.Fields(before["z"])[0] + " " + zLocked,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q (before %q)", k, got[k], w, before[k])
		}
	}
	if _, ok := got["m1"]; ok {
		t.Errorf("the expired delete marker m1 was kept: %q", got["m1"])
	}
	if st.Noncurrent != 3 || st.Markers != 1 || st.Refused != 1 {
		t.Errorf("stats %+v, want 3 noncurrent, 1 marker, 1 refused", st)
	}
}

// TestRunUploads: AbortIncompleteMultipartUpload aborts the uploads begun
// DaysAfterInitiation ago, under its prefix only.
func TestRunUploads(t *testing.T) {
	f := newFake(t, "", `<Rule><Filter><Prefix>up/</Prefix></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`)
	for i := range 5 {
		f.uploads = append(f.uploads, store.Upload{Key: "up/k", UploadID: fmt.Sprintf("u%d", i), Initiated: t0})
	}
	f.uploads = append(f.uploads, store.Upload{Key: "up/new", UploadID: "n", Initiated: t0.Add(day(2))},
		store.Upload{Key: "zz", UploadID: "z", Initiated: t0})
	st, err := RunOnce(context.Background(), f, Options{Now: clock(t0.Add(day(2))), Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, u := range f.uploads {
		left = append(left, u.Key+"/"+u.UploadID)
	}
	if st.Aborted != 5 || !slices.Equal(left, []string{"up/new/n", "zz/z"}) {
		t.Errorf("aborted %d, left %v", st.Aborted, left)
	}
}

// TestRunGuard: a lost lease stops the run before its next deletion.
func TestRunGuard(t *testing.T) {
	f := newFake(t, "", `<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)
	f.put("a", 1, t0)
	f.put("b", 1, t0)
	lost := errors.New("lease lost")
	calls := 0
	_, err := RunOnce(context.Background(), f, Options{Now: clock(t0.Add(day(3))), Guard: func() error {
		if calls++; calls > 1 {
			return lost
		}
		return nil
	}})
	if !errors.Is(err, lost) || len(f.ids()) != 1 {
		t.Errorf("err %v, keys left %v: want the lease's error after one deletion", err, f.ids())
	}
}

// TestCommonPrefix: the listing prefix is the rules' longest common prefix,
// cut back to a whole character.
func TestCommonPrefix(t *testing.T) {
	p := func(s string) *string { return &s }
	for _, tt := range []struct {
		prefixes []string
		want     string
	}{
		{[]string{"logs/a", "logs/b"}, "logs/"},
		{[]string{"é1", "é2"}, "é"},
		{[]string{"\u00e9", "\u00e8"}, ""}, // é and è share their first byte only
		{[]string{"a", ""}, ""},
	} {
		r := &run{}
		for _, x := range tt.prefixes {
			r.rules = append(r.rules, &Rule{Filter: &Filter{Prefix: p(x)}})
		}
		if got, ok := r.commonPrefix(func(*Rule) bool { return true }); !ok || got != tt.want {
			t.Errorf("%q: %q, want %q", tt.prefixes, got, tt.want)
		}
	}
}
