package storetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// versionTests are the versioning cases of the suite.
var versionTests = []test{
	{"VersionModel", testVersionModel},
	{"VersionSuspendedNull", testVersionSuspendedNull},
	{"VersionPromotion", testVersionPromotion},
	{"VersionPaging", testVersionPaging},
	{"VersionDelimiter", testVersionDelimiter},
	{"VersionCopy", testVersionCopy},
	{"VersionMultipart", testVersionMultipart},
	{"VersionReplaceMeta", testVersionReplaceMeta},
	{"VersionDeleteBucket", testVersionDeleteBucket},
	{"VersionConcurrentPuts", testVersionConcurrentPuts},
	{"BucketUsage", testBucketUsage},
}

// versionScale reads the size of the long versioning cases from the
// environment (make test-versions sets them), else def: the default run
// stays short, under the race detector on every engine too.
func versionScale(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// mver is one version in the model: newest first in its key's list.
type mver struct {
	id     string
	marker bool
	data   []byte
}

// vmodel is the expected state of a bucket's versions.
type vmodel struct {
	state string
	keys  map[string][]mver
}

// setVersioning sets the bucket's versioning state.
func (v *Env) setVersioning(t *testing.T, bucket, status string) {
	t.Helper()
	if err := v.Store.SetBucketVersioning(context.Background(), bucket, status); err != nil {
		t.Fatalf("SetBucketVersioning %s: %v", status, err)
	}
	got, err := v.Store.BucketVersioning(context.Background(), bucket)
	if err != nil || got != status {
		t.Fatalf("BucketVersioning = %q, %v; want %s", got, err, status)
	}
}

// listAllVersions pages ListObjectVersions with pages of size (and the
// delimiter), checking each page's markers, and returns every entry.
func (v *Env) listAllVersions(t *testing.T, bucket string, p store.ListVersionsParams) ([]store.ObjectInfo, []string) {
	t.Helper()
	var all []store.ObjectInfo
	var cps []string
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("ListObjectVersions does not end")
		}
		res, err := v.Store.ListObjectVersions(context.Background(), bucket, p)
		if err != nil {
			t.Fatalf("ListObjectVersions %+v: %v", p, err)
		}
		if n := len(res.Versions) + len(res.CommonPrefixes); n > max(p.MaxKeys, 0) && p.MaxKeys > 0 || res.Truncated && n == 0 {
			t.Fatalf("page of %d entries for max-keys %d (truncated %v)", n, p.MaxKeys, res.Truncated)
		}
		all = append(all, res.Versions...)
		cps = append(cps, res.CommonPrefixes...)
		if !res.Truncated {
			return all, cps
		}
		p.KeyMarker, p.VersionIDMarker = res.NextKeyMarker, res.NextVersionIDMarker
	}
}

// want lists the model's versions as ListObjectVersions must.
func (m *vmodel) want(bucket string) []store.ObjectInfo {
	var out []store.ObjectInfo
	keys := mapKeys(m.keys)
	slices.Sort(keys)
	for _, k := range keys {
		for i, mv := range m.keys[k] {
			o := store.ObjectInfo{Bucket: bucket, Key: k, VersionID: mv.id, DeleteMarker: mv.marker, IsLatest: i == 0}
			if !mv.marker {
				o.Size, o.ETag = int64(len(mv.data)), MD5Hex(mv.data)
			}
			out = append(out, o)
		}
	}
	return out
}

func mapKeys(m map[string][]mver) []string {
	out := make([]string, 0, len(m))
	for k, vs := range m {
		if len(vs) > 0 {
			out = append(out, k)
		}
	}
	return out
}

// sameVersions compares a listing with the expected one, field by field.
func sameVersions(t *testing.T, what string, got, want []store.ObjectInfo) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d versions, want %d:\ngot  %s\nwant %s", what, len(got), len(want), brief(got), brief(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.VersionID != w.VersionID || g.DeleteMarker != w.DeleteMarker || g.IsLatest != w.IsLatest ||
			g.Size != w.Size || g.ETag != w.ETag {
			t.Fatalf("%s: entry %d is %s, want %s\ngot  %s\nwant %s", what, i, brief(got[i:i+1]), brief(want[i:i+1]), brief(got), brief(want))
		}
	}
}

func brief(vs []store.ObjectInfo) string {
	var b bytes.Buffer
	for _, o := range vs {
		id := o.VersionID
		if len(id) > 6 {
			id = id[:6]
		}
		fmt.Fprintf(&b, "[%s %s m=%v l=%v %d] ", o.Key, id, o.DeleteMarker, o.IsLatest, o.Size)
	}
	return b.String()
}

// checkVersionReads reads every version of key by id (bytes, or
// ErrDeleteMarker) and the key without an id.
func (v *Env) checkVersionReads(t *testing.T, bucket, key string, vs []mver) {
	t.Helper()
	ctx := context.Background()
	for _, mv := range vs {
		info, _, rd, err := v.Store.GetObject(ctx, bucket, key, store.GetOptions{VersionID: mv.id}, false)
		if mv.marker {
			if !errors.Is(err, store.ErrDeleteMarker) || !info.DeleteMarker || info.VersionID != mv.id {
				t.Fatalf("GET %s?versionId=%s of a delete marker: %+v, %v", key, mv.id, info, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("GET %s?versionId=%s: %v", key, mv.id, err)
		}
		got, err := io.ReadAll(rd)
		_ = rd.Close()
		if err != nil {
			t.Fatalf("read %s?versionId=%s: %v", key, mv.id, err)
		}
		SameBytes(t, fmt.Sprintf("GET %s?versionId=%s", key, mv.id), got, mv.data)
		if info.VersionID != mv.id {
			t.Fatalf("GET %s?versionId=%s answered version %s", key, mv.id, info.VersionID)
		}
	}
	info, _, rd, err := v.Store.GetObject(ctx, bucket, key, store.GetOptions{}, false)
	switch {
	case len(vs) == 0:
		if !errors.Is(err, store.ErrNoSuchKey) || info.DeleteMarker {
			t.Fatalf("GET %s without versions: %+v, %v", key, info, err)
		}
	case vs[0].marker:
		if !errors.Is(err, store.ErrNoSuchKey) || !info.DeleteMarker || info.VersionID != vs[0].id {
			t.Fatalf("GET %s whose latest is a delete marker: %+v, %v", key, info, err)
		}
	default:
		if err != nil {
			t.Fatalf("GET %s: %v", key, err)
		}
		got, err := io.ReadAll(rd)
		_ = rd.Close()
		if err != nil {
			t.Fatal(err)
		}
		SameBytes(t, "GET "+key, got, vs[0].data)
		if info.VersionID != vs[0].id {
			t.Fatalf("GET %s answered version %s, want %s", key, info.VersionID, vs[0].id)
		}
	}
}

// testVersionModel drives random sequences of PUT, DELETE, DELETE by id,
// copies from versions and versioning changes on a few keys against a model,
// and after every step compares ListObjectVersions (in pages of several
// sizes) and the reads by id of the key it touched.
func testVersionModel(t *testing.T, v *Env) {
	ctx := context.Background()
	steps := versionScale(t, "S3GATE_VERSION_STEPS", 40)
	keys := []string{"a", "a/b", "c", "d/e/f"}
	r := rand.New(rand.NewPCG(14, 12))
	m := &vmodel{keys: map[string][]mver{}}
	removeNull := func(vs []mver) []mver {
		return slices.DeleteFunc(vs, func(mv mver) bool { return mv.id == store.NullVersion })
	}
	for step := range steps {
		key := keys[r.IntN(len(keys))]
		vs := m.keys[key]
		var what string
		switch op := r.IntN(20); {
		case op == 0 || step == 5 && m.state == "":
			st := store.VersioningEnabled
			if m.state == store.VersioningEnabled {
				st = store.VersioningSuspended
			}
			what = "versioning " + st
			v.setVersioning(t, "b", st)
			m.state = st
		case op < 8:
			size := 1 + r.IntN(300)
			if r.IntN(8) == 0 {
				size = Knee + 1 + r.IntN(1000) // the large engine
			}
			data := Bytes(uint64(step)<<8|uint64(r.IntN(3)), size) // some repeat: dedup across versions
			what = fmt.Sprintf("put %d bytes", size)
			info := v.put(t, "b", key, data)
			switch m.state {
			case "":
				vs = []mver{{id: store.NullVersion, data: data}}
			case store.VersioningEnabled:
				vs = append([]mver{{id: info.VersionID, data: data}}, vs...)
			default:
				vs = append([]mver{{id: store.NullVersion, data: data}}, removeNull(vs)...)
			}
			if info.VersionID != vs[0].id && m.state != store.VersioningEnabled || info.VersionID == store.NullVersion && m.state == store.VersioningEnabled {
				t.Fatalf("step %d: put in state %q wrote version %q", step, m.state, info.VersionID)
			}
		case op < 10 && len(vs) > 0:
			src := vs[r.IntN(len(vs))]
			if src.marker {
				continue
			}
			dst := keys[r.IntN(len(keys))]
			what = fmt.Sprintf("copy version %s to %s", src.id, dst)
			info, err := v.Store.CopyObject(ctx, store.CopySource{Bucket: "b", Key: key, VersionID: src.id}, "b", dst,
				store.CopyOptions{ReplaceMeta: true, Meta: store.ObjectMeta{ContentType: fmt.Sprintf("t/%d", step)}})
			if err != nil {
				t.Fatalf("step %d: %s: %v", step, what, err)
			}
			if info.CopySourceVersionID != src.id {
				t.Fatalf("step %d: copy reports source version %q, want %q", step, info.CopySourceVersionID, src.id)
			}
			dvs := m.keys[dst]
			switch m.state {
			case "":
				dvs = []mver{{id: store.NullVersion, data: src.data}}
			case store.VersioningEnabled:
				dvs = append([]mver{{id: info.VersionID, data: src.data}}, dvs...)
			default:
				dvs = append([]mver{{id: store.NullVersion, data: src.data}}, removeNull(dvs)...)
			}
			m.keys[dst] = dvs
			key, vs = dst, dvs
		case op < 14:
			what = "delete"
			res, err := v.Store.DeleteObjectVersion(ctx, "b", key, store.DeleteOptions{})
			if err != nil {
				t.Fatalf("step %d: delete %s: %v", step, key, err)
			}
			switch m.state {
			case "":
				vs = nil
			case store.VersioningEnabled:
				vs = append([]mver{{id: res.VersionID, marker: true}}, vs...)
			default:
				vs = append([]mver{{id: store.NullVersion, marker: true}}, removeNull(vs)...)
			}
			if m.state != "" && (!res.DeleteMarker || res.VersionID != vs[0].id || res.VersionID == "") {
				t.Fatalf("step %d: delete in state %q answered %+v", step, m.state, res)
			}
		default:
			id := store.NewVersionID() // names nothing: a success
			if len(vs) > 0 && r.IntN(6) != 0 {
				id = vs[r.IntN(len(vs))].id
			}
			what = "delete version " + id
			res, err := v.Store.DeleteObjectVersion(ctx, "b", key, store.DeleteOptions{VersionID: id})
			if err != nil {
				t.Fatalf("step %d: delete %s?versionId=%s: %v", step, key, id, err)
			}
			i := slices.IndexFunc(vs, func(mv mver) bool { return mv.id == id })
			if res.VersionID != id || i >= 0 && res.DeleteMarker != vs[i].marker {
				t.Fatalf("step %d: %s answered %+v", step, what, res)
			}
			if i >= 0 {
				vs = slices.Delete(slices.Clone(vs), i, i+1)
			}
		}
		m.keys[key] = vs
		want := m.want("b")
		for _, size := range []int{1000, 1 + r.IntN(7)} {
			got, _ := v.listAllVersions(t, "b", store.ListVersionsParams{MaxKeys: size})
			sameVersions(t, fmt.Sprintf("step %d (%s on %s), pages of %d", step, what, key, size), got, want)
		}
		v.checkVersionReads(t, "b", key, vs)
		if step%50 == 49 {
			for k, kvs := range m.keys {
				v.checkVersionReads(t, "b", k, kvs)
			}
		}
	}
}

// testVersionSuspendedNull: a suspended bucket writes the null version,
// which replaces the previous null version (current or noncurrent) and
// leaves the versions with ids alone; DELETE writes a null delete marker.
func testVersionSuspendedNull(t *testing.T, v *Env) {
	ctx := context.Background()
	n0 := v.put(t, "b", "k", []byte("unversioned")) // written before versioning: null
	if n0.VersionID != store.NullVersion {
		t.Fatalf("unversioned put wrote version %q", n0.VersionID)
	}
	v.setVersioning(t, "b", store.VersioningEnabled)
	e1 := v.put(t, "b", "k", []byte("enabled"))
	v.setVersioning(t, "b", store.VersioningSuspended)
	s1 := v.put(t, "b", "k", []byte("suspended one"))
	if s1.VersionID != store.NullVersion {
		t.Fatalf("suspended put wrote version %q", s1.VersionID)
	}
	// The noncurrent null version (the unversioned one) is gone for good.
	got, _ := v.listAllVersions(t, "b", store.ListVersionsParams{})
	want := []store.ObjectInfo{
		{Key: "k", VersionID: store.NullVersion, IsLatest: true, Size: 13, ETag: MD5Hex([]byte("suspended one"))},
		{Key: "k", VersionID: e1.VersionID, Size: 7, ETag: MD5Hex([]byte("enabled"))},
	}
	sameVersions(t, "after the suspended put", got, want)
	// Again: the current null version is replaced in place.
	v.put(t, "b", "k", []byte("suspended two"))
	want[0].ETag = MD5Hex([]byte("suspended two"))
	got, _ = v.listAllVersions(t, "b", store.ListVersionsParams{})
	sameVersions(t, "after the second suspended put", got, want)
	// DELETE: the null version goes, a null delete marker comes.
	res, err := v.Store.DeleteObjectVersion(ctx, "b", "k", store.DeleteOptions{})
	if err != nil || !res.DeleteMarker || res.VersionID != store.NullVersion {
		t.Fatalf("suspended delete: %+v, %v", res, err)
	}
	got, _ = v.listAllVersions(t, "b", store.ListVersionsParams{})
	sameVersions(t, "after the suspended delete", got, []store.ObjectInfo{
		{Key: "k", VersionID: store.NullVersion, DeleteMarker: true, IsLatest: true},
		{Key: "k", VersionID: e1.VersionID, Size: 7, ETag: MD5Hex([]byte("enabled"))},
	})
	// A put replaces the null delete marker.
	v.put(t, "b", "k", []byte("suspended three"))
	got, _ = v.listAllVersions(t, "b", store.ListVersionsParams{})
	sameVersions(t, "after the put over the null marker", got, []store.ObjectInfo{
		{Key: "k", VersionID: store.NullVersion, IsLatest: true, Size: 15, ETag: MD5Hex([]byte("suspended three"))},
		{Key: "k", VersionID: e1.VersionID, Size: 7, ETag: MD5Hex([]byte("enabled"))},
	})
	v.checkVersionReads(t, "b", "k", []mver{{id: store.NullVersion, data: []byte("suspended three")}, {id: e1.VersionID, data: []byte("enabled")}})
	// A version that names nothing deletes nothing; a malformed one is refused.
	if _, err := v.Store.DeleteObjectVersion(ctx, "b", "k", store.DeleteOptions{VersionID: "nope"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("malformed version id: %v", err)
	}
	if _, _, _, err := v.Store.GetObject(ctx, "b", "k", store.GetOptions{VersionID: store.NewVersionID()}, true); !errors.Is(err, store.ErrNoSuchVersion) {
		t.Fatalf("HEAD of an unknown version: %v", err)
	}
}

// testVersionPromotion: deleting the latest version by id makes the next
// newest the latest, an object (readable without an id) or a delete marker.
func testVersionPromotion(t *testing.T, v *Env) {
	ctx := context.Background()
	v.setVersioning(t, "b", store.VersioningEnabled)
	one := v.put(t, "b", "k", []byte("one"))
	del, err := v.Store.DeleteObjectVersion(ctx, "b", "k", store.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	big := Bytes(7, Knee+10)
	two := v.put(t, "b", "k", big)
	three := v.put(t, "b", "k", []byte("three"))
	steps := []struct {
		drop string
		want []mver
	}{
		{three.VersionID, []mver{{id: two.VersionID, data: big}, {id: del.VersionID, marker: true}, {id: one.VersionID, data: []byte("one")}}},
		{two.VersionID, []mver{{id: del.VersionID, marker: true}, {id: one.VersionID, data: []byte("one")}}},
		{del.VersionID, []mver{{id: one.VersionID, data: []byte("one")}}},
		{one.VersionID, nil},
	}
	for _, s := range steps {
		res, err := v.Store.DeleteObjectVersion(ctx, "b", "k", store.DeleteOptions{VersionID: s.drop})
		if err != nil || res.VersionID != s.drop {
			t.Fatalf("delete version %s: %+v, %v", s.drop, res, err)
		}
		got, _ := v.listAllVersions(t, "b", store.ListVersionsParams{})
		sameVersions(t, "after deleting "+s.drop, got, (&vmodel{keys: map[string][]mver{"k": s.want}}).want("b"))
		v.checkVersionReads(t, "b", "k", s.want)
	}
	if rows := v.Rows(t); rows.Objects != 0 {
		t.Fatalf("%d object rows left", rows.Objects)
	}
	// Conditional deletes: a changed ETag or time is refused.
	four := v.put(t, "b", "k", []byte("four"))
	lm := four.LastModified.Add(1)
	for _, opts := range []store.DeleteOptions{
		{VersionID: four.VersionID, IfMatch: "0123"},
		{VersionID: four.VersionID, IfMatchLastModified: &lm},
		{IfMatch: "0123"},
		{VersionID: store.NewVersionID(), IfMatch: "*"},
	} {
		if _, err := v.Store.DeleteObjectVersion(ctx, "b", "k", opts); !errors.Is(err, store.ErrPreconditionFailed) {
			t.Fatalf("delete %+v: %v, want a failed precondition", opts, err)
		}
	}
	// A condition on a key with no current object is ErrNoSuchKey, as S3
	// answers a conditional delete.
	if _, err := v.Store.DeleteObjectVersion(ctx, "b", "none", store.DeleteOptions{IfMatch: "*"}); !errors.Is(err, store.ErrNoSuchKey) {
		t.Fatalf("conditional delete of a missing key: %v, want ErrNoSuchKey", err)
	}
	// DeleteObjects' ETag elements: each entry judged on its own, the
	// failed ones changing nothing.
	five := v.put(t, "b", "k5", []byte("five"))
	six := v.put(t, "b", "k6", []byte("six"))
	rs, err := v.Store.DeleteObjectVersions(ctx, "b", []store.ObjectID{
		{Key: "k5", IfMatch: six.ETag}, {Key: "k6", IfMatch: `"` + six.ETag + `"`}, {Key: "none", IfMatch: "*"},
	})
	if err != nil || len(rs) != 3 || !errors.Is(rs[0].Err, store.ErrPreconditionFailed) || rs[1].Err != nil || !errors.Is(rs[2].Err, store.ErrNoSuchKey) {
		t.Fatalf("conditional batch: %+v, %v", rs, err)
	}
	v.checkVersionReads(t, "b", "k5", []mver{{id: five.VersionID, data: []byte("five")}})
	res, err := v.Store.DeleteObjectVersion(ctx, "b", "k", store.DeleteOptions{VersionID: four.VersionID, IfMatch: four.ETag, IfMatchLastModified: &four.LastModified})
	if err != nil || res.DeleteMarker {
		t.Fatalf("conditional delete that matches: %+v, %v", res, err)
	}
}

// testVersionPaging: versions of a few keys (2,500 in make test-versions)
// page exactly in pages of 1000 and of 7, markers within a key included.
func testVersionPaging(t *testing.T, v *Env) {
	ctx := context.Background()
	v.setVersioning(t, "b", store.VersioningEnabled)
	m := &vmodel{keys: map[string][]mver{}}
	total := versionScale(t, "S3GATE_VERSION_COUNT", 200) / 5 * 5
	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range total / len(keys) {
				if i%10 == 9 {
					res, err := v.Store.DeleteObjectVersion(ctx, "b", k, store.DeleteOptions{})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					m.keys[k] = append([]mver{{id: res.VersionID, marker: true}}, m.keys[k]...)
					mu.Unlock()
					continue
				}
				data := []byte(fmt.Sprintf("%s-%d", k, i))
				info, err := v.Store.PutObject(ctx, "b", k, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				m.keys[k] = append([]mver{{id: info.VersionID, data: data}}, m.keys[k]...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := m.want("b")
	if len(want) != total {
		t.Fatalf("model holds %d versions", len(want))
	}
	for _, size := range []int{1000, 7} {
		got, _ := v.listAllVersions(t, "b", store.ListVersionsParams{MaxKeys: size})
		sameVersions(t, fmt.Sprintf("pages of %d", size), got, want)
	}
	// A key marker alone resumes after all of that key; with a version id,
	// after that version.
	got, _ := v.listAllVersions(t, "b", store.ListVersionsParams{KeyMarker: "k2", MaxKeys: 333})
	sameVersions(t, "after key k2", got, want[2*total/len(keys):])
	at := total/len(keys) + 17
	got, _ = v.listAllVersions(t, "b", store.ListVersionsParams{KeyMarker: want[at].Key, VersionIDMarker: want[at].VersionID, MaxKeys: 500})
	sameVersions(t, "after a version marker", got, want[at+1:])
}

// testVersionDelimiter: common prefixes over versions count once each, and
// a prefix selects the versions under it.
func testVersionDelimiter(t *testing.T, v *Env) {
	ctx := context.Background()
	v.setVersioning(t, "b", store.VersioningEnabled)
	m := &vmodel{keys: map[string][]mver{}}
	for i, k := range []string{"a", "d/1", "d/2", "d/2", "e/x/1", "e/y", "f", "f", "g/1"} {
		data := []byte(fmt.Sprintf("%s %d", k, i))
		info := v.put(t, "b", k, data)
		m.keys[k] = append([]mver{{id: info.VersionID, data: data}}, m.keys[k]...)
	}
	res, err := v.Store.DeleteObjectVersion(ctx, "b", "f", store.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.keys["f"] = append([]mver{{id: res.VersionID, marker: true}}, m.keys["f"]...)
	all := m.want("b")
	var top []store.ObjectInfo
	for _, o := range all {
		if o.Key == "a" || o.Key == "f" {
			top = append(top, o)
		}
	}
	for _, size := range []int{1000, 1, 2, 3} {
		got, cps := v.listAllVersions(t, "b", store.ListVersionsParams{Delimiter: "/", MaxKeys: size})
		sameVersions(t, fmt.Sprintf("delimiter, pages of %d", size), got, top)
		if !slices.Equal(cps, []string{"d/", "e/", "g/"}) {
			t.Fatalf("delimiter, pages of %d: common prefixes %q", size, cps)
		}
		got, cps = v.listAllVersions(t, "b", store.ListVersionsParams{Prefix: "e/", Delimiter: "/", MaxKeys: size})
		sameVersions(t, fmt.Sprintf("prefix e/, pages of %d", size), got, (&vmodel{keys: map[string][]mver{"e/y": m.keys["e/y"]}}).want("b"))
		if !slices.Equal(cps, []string{"e/x/"}) {
			t.Fatalf("prefix e/, pages of %d: common prefixes %q", size, cps)
		}
		got, _ = v.listAllVersions(t, "b", store.ListVersionsParams{Prefix: "d/", MaxKeys: size})
		sameVersions(t, fmt.Sprintf("prefix d/, pages of %d", size), got, (&vmodel{keys: map[string][]mver{"d/1": m.keys["d/1"], "d/2": m.keys["d/2"]}}).want("b"))
	}
}

// testVersionCopy: a copy from a noncurrent version (single blob and
// multipart) writes that version's bytes as a new version.
func testVersionCopy(t *testing.T, v *Env) {
	ctx := context.Background()
	v.setVersioning(t, "b", store.VersioningEnabled)
	mp, mpInfo := v.multipartObject(t, "b", "src", 40, store.MinPartSize, 100)
	v.put(t, "b", "src", []byte("newer"))
	cp, err := v.Store.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src", VersionID: mpInfo.VersionID}, "b", "dst", store.CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cp.CopySourceVersionID != mpInfo.VersionID || cp.VersionID == "" || cp.VersionID == store.NullVersion || cp.ETag != mpInfo.ETag {
		t.Fatalf("copy info %+v", cp)
	}
	// Onto its own key: the old version becomes the latest again, as a new
	// version, and the old one stays.
	back, err := v.Store.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src", VersionID: mpInfo.VersionID}, "b", "src", store.CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v.checkVersionReads(t, "b", "dst", []mver{{id: cp.VersionID, data: mp}})
	// Through store.Store, whose copy checksum reads the source's bytes
	// when the algorithm asked for is not the source's: the version's bytes,
	// not the latest's.
	ck, err := store.New(v.Store).CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src", VersionID: mpInfo.VersionID}, "b", "dst-crc",
		store.CopyOptions{ChecksumAlgorithm: store.AlgCRC32})
	if err != nil {
		t.Fatal(err)
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE(mp))
	if want := base64.StdEncoding.EncodeToString(sum[:]); ck.Checksum.Algorithm != store.AlgCRC32 || ck.Checksum.Value != want {
		t.Fatalf("checksum of a copy from a version: %+v, want CRC32 %s", ck.Checksum, want)
	}
	v.checkVersionReads(t, "b", "dst-crc", []mver{{id: ck.VersionID, data: mp}})
	listed, _ := v.listAllVersions(t, "b", store.ListVersionsParams{Prefix: "src"})
	if len(listed) != 3 || listed[0].VersionID != back.VersionID || listed[2].VersionID != mpInfo.VersionID {
		t.Fatalf("versions of src: %s", brief(listed))
	}
	v.checkVersionReads(t, "b", "src", []mver{{id: back.VersionID, data: mp}, {id: listed[1].VersionID, data: []byte("newer")}, {id: mpInfo.VersionID, data: mp}})
	var got []byte
	// A copy of the current version onto its own key (metadata replaced)
	// makes a new version on a versioned bucket.
	self, err := v.Store.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src"}, "b", "src",
		store.CopyOptions{ReplaceMeta: true, Meta: store.ObjectMeta{ContentType: "x/y"}})
	if err != nil || self.VersionID == back.VersionID {
		t.Fatalf("self copy: %+v, %v", self, err)
	}
	v.checkVersionReads(t, "b", "src", []mver{{id: self.VersionID, data: mp}, {id: back.VersionID, data: mp}})
	// UploadPartCopy from a noncurrent version: by reference (the whole of
	// a single blob) and by bytes (a range of it).
	old := Bytes(41, store.MinPartSize+100)
	oldInfo := v.put(t, "b", "parts-src", old)
	v.put(t, "b", "parts-src", []byte("newer"))
	u, err := v.Store.CreateMultipartUpload(ctx, "b", "parts", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	src := store.CopySource{Bucket: "b", Key: "parts-src", VersionID: oldInfo.VersionID}
	p1, err := v.Store.UploadPartCopy(ctx, src, "b", "parts", u.UploadID, 1)
	if err != nil {
		t.Fatal(err)
	}
	src.Range = &store.ByteRange{Start: 10, End: 99}
	p2, err := v.Store.UploadPartCopy(ctx, src, "b", "parts", u.UploadID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Store.CompleteMultipartUpload(ctx, "b", "parts", u.UploadID, completeAll([]store.PartInfo{p1, p2}), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _, got = v.get(t, "b", "parts", store.GetOptions{})
	SameBytes(t, "parts copied from a noncurrent version", got, slices.Concat(old, old[10:100]))
	// A delete marker cannot be a copy source.
	del, err := v.Store.DeleteObjectVersion(ctx, "b", "src", store.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Store.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src", VersionID: del.VersionID}, "b", "x", store.CopyOptions{}); !errors.Is(err, store.ErrInvalidRequest) {
		t.Fatalf("copy of a delete marker: %v", err)
	}
	if _, err := store.New(v.Store).CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src", VersionID: del.VersionID}, "b", "x",
		store.CopyOptions{ChecksumAlgorithm: store.AlgCRC32}); !errors.Is(err, store.ErrInvalidRequest) {
		t.Fatalf("copy of a delete marker with a checksum to compute: %v", err)
	}
	if _, err := v.Store.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "src"}, "b", "x", store.CopyOptions{}); !errors.Is(err, store.ErrNoSuchKey) {
		t.Fatalf("copy of a key whose latest is a delete marker: %v", err)
	}
}

// testVersionMultipart: Complete makes a new version; the one it replaced
// (a multipart object) keeps its manifest as a noncurrent version and reads
// byte-exact by id, ranges included, after more versions come.
func testVersionMultipart(t *testing.T, v *Env) {
	v.setVersioning(t, "b", store.VersioningEnabled)
	first, firstInfo := v.multipartObject(t, "b", "mp", 50, store.MinPartSize, 300)
	second, secondInfo := v.multipartObject(t, "b", "mp", 60, store.MinPartSize+1, 20)
	if firstInfo.VersionID == secondInfo.VersionID {
		t.Fatal("two Completes wrote one version")
	}
	third := v.put(t, "b", "mp", []byte("small"))
	v.checkVersionReads(t, "b", "mp", []mver{{id: third.VersionID, data: []byte("small")},
		{id: secondInfo.VersionID, data: second}, {id: firstInfo.VersionID, data: first}})
	info, rng, got := v.get(t, "b", "mp", store.GetOptions{VersionID: firstInfo.VersionID, RangeSpec: fmt.Sprintf("bytes=%d-", store.MinPartSize-5)})
	if rng == nil || len(info.Parts) != 2 {
		t.Fatalf("range of a noncurrent multipart version: %+v %+v", rng, info)
	}
	SameBytes(t, "range across the parts of a noncurrent version", got, first[store.MinPartSize-5:])
	if rows := v.Rows(t); rows.Objects != 1 {
		t.Fatalf("%d object rows", rows.Objects)
	}
}

// testVersionReplaceMeta: replacing a version's metadata keeps its id, its
// last-modified time and its content, current or not, and makes no version.
func testVersionReplaceMeta(t *testing.T, v *Env) {
	ctx := context.Background()
	v.setVersioning(t, "b", store.VersioningEnabled)
	old := v.put(t, "b", "k", []byte("old"))
	cur := v.put(t, "b", "k", []byte("current"))
	for _, w := range []store.ObjectInfo{old, cur} {
		meta := store.ObjectMeta{ContentType: "text/" + w.VersionID[:4], User: map[string]string{"v": w.VersionID}}
		id := w.VersionID
		if w.VersionID == cur.VersionID {
			id = "" // the latest
		}
		got, err := v.Store.ReplaceObjectMeta(ctx, "b", "k", id, w.ETag, meta)
		if err != nil {
			t.Fatal(err)
		}
		if got.VersionID != w.VersionID || !got.LastModified.Equal(w.LastModified) || got.Meta.ContentType != meta.ContentType {
			t.Fatalf("ReplaceObjectMeta answered %+v, want version %s at %v", got, w.VersionID, w.LastModified)
		}
		h, _, _, err := v.Store.GetObject(ctx, "b", "k", store.GetOptions{VersionID: w.VersionID}, true)
		if err != nil || h.Meta.ContentType != meta.ContentType || h.Meta.User["v"] != w.VersionID || !h.LastModified.Equal(w.LastModified) || h.ETag != w.ETag {
			t.Fatalf("HEAD after ReplaceObjectMeta: %+v, %v", h, err)
		}
	}
	if _, err := v.Store.ReplaceObjectMeta(ctx, "b", "k", old.VersionID, cur.ETag, store.ObjectMeta{}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("ReplaceObjectMeta with another ETag: %v", err)
	}
	if _, err := v.Store.ReplaceObjectMeta(ctx, "b", "k", store.NewVersionID(), "", store.ObjectMeta{}); !errors.Is(err, store.ErrNoSuchVersion) {
		t.Fatalf("ReplaceObjectMeta of an unknown version: %v", err)
	}
	got, _ := v.listAllVersions(t, "b", store.ListVersionsParams{})
	if len(got) != 2 {
		t.Fatalf("ReplaceObjectMeta made versions: %s", brief(got))
	}
	v.checkVersionReads(t, "b", "k", []mver{{id: cur.VersionID, data: []byte("current")}, {id: old.VersionID, data: []byte("old")}})
}

// testVersionDeleteBucket: a bucket that holds only a delete marker is not
// empty; once the marker is deleted by id, the bucket can go.
func testVersionDeleteBucket(t *testing.T, v *Env) {
	ctx := context.Background()
	v.setVersioning(t, "b", store.VersioningEnabled)
	res, err := v.Store.DeleteObjectVersion(ctx, "b", "never-written", store.DeleteOptions{})
	if err != nil || !res.DeleteMarker {
		t.Fatalf("delete marker for a missing key: %+v, %v", res, err)
	}
	if err := v.Store.DeleteBucket(ctx, "b"); !errors.Is(err, store.ErrBucketNotEmpty) {
		t.Fatalf("DeleteBucket with a delete marker: %v", err)
	}
	if _, err := v.Store.DeleteObjectVersion(ctx, "b", "never-written", store.DeleteOptions{VersionID: res.VersionID}); err != nil {
		t.Fatal(err)
	}
	if err := v.Store.DeleteBucket(ctx, "b"); err != nil {
		t.Fatalf("DeleteBucket once empty: %v", err)
	}
}

// testVersionConcurrentPuts: concurrent PUTs of one key in a versioned
// bucket never lose a version: every acknowledged PUT is a version listed
// and readable by id, byte-exact. Each round races writers on a fresh key,
// where two writers that both find no current row would otherwise both
// write it (the object lock orders them).
func testVersionConcurrentPuts(t *testing.T, v *Env) {
	ctx := context.Background()
	v.setVersioning(t, "b", store.VersioningEnabled)
	const rounds, writers = 12, 6
	for round := range rounds {
		key := fmt.Sprintf("race-%d", round)
		ids := make([]mver, writers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				data := Bytes(uint64(round*writers+w), 100+w)
				<-start
				info, err := v.Store.PutObject(ctx, "b", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
				ids[w], errs[w] = mver{id: info.VersionID, data: data}, err
			}()
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		got, _ := v.listAllVersions(t, "b", store.ListVersionsParams{Prefix: key})
		if len(got) != writers {
			t.Fatalf("round %d: %d acknowledged PUTs, %d versions listed: %s", round, writers, len(got), brief(got))
		}
		// Newest first: the listing's order, each id once.
		byID := map[string]mver{}
		for _, mv := range ids {
			byID[mv.id] = mv
		}
		var vs []mver
		for _, o := range got {
			mv, ok := byID[o.VersionID]
			if !ok {
				t.Fatalf("round %d: listed version %s was never acknowledged", round, o.VersionID)
			}
			vs = append(vs, mv)
		}
		v.checkVersionReads(t, "b", key, vs)
	}
}
