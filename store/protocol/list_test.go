package protocol

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/store"
)

func TestSuccessor(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"a/", "a0", true},
		{"a", "b", true},
		{"", "", false},
		{"a\U0010FFFF", "b", true},
		{"\U0010FFFF", "", false},
		{"x\uD7FF", "x\uE000", true},
		{"é", "ê", true},
	}
	for _, tc := range tests {
		got, ok := Successor(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Successor(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRollup(t *testing.T) {
	tests := []struct {
		key, prefix, delim, want string
	}{
		{"a/b/c", "", "/", "a/"},
		{"a/b/c", "a/", "/", "a/b/"},
		{"a/b", "a/", "/", ""},
		{"a/b/c", "", "", ""},
		{"b/c", "a/", "/", ""},
		{"a--b--c", "a", "--", "a--"},
	}
	for _, tc := range tests {
		if got := Rollup(tc.key, tc.prefix, tc.delim); got != tc.want {
			t.Errorf("Rollup(%q, %q, %q) = %q, want %q", tc.key, tc.prefix, tc.delim, got, tc.want)
		}
	}
}

func TestNewListCursor(t *testing.T) {
	tests := []struct {
		prefix, delim, after string
		want                 KeyRange
		done                 bool
	}{
		// No key is empty, so an exclusive lower bound of "" selects them all.
		{"", "", "", KeyRange{From: ""}, false},
		{"p/", "", "", KeyRange{From: "p/", Inclusive: true, To: "p0", Bounded: true}, false},
		{"p/", "", "p/x", KeyRange{From: "p/x", To: "p0", Bounded: true}, false},
		{"p/", "", "a", KeyRange{From: "p/", Inclusive: true, To: "p0", Bounded: true}, false},
		// A marker inside a common prefix resumes after the whole prefix.
		{"p/", "/", "p/d/x", KeyRange{From: "p/d0", Inclusive: true, To: "p0", Bounded: true}, false},
		// A marker past the prefix leaves nothing.
		{"p/", "", "q", KeyRange{From: "q", To: "p0", Bounded: true}, true},
	}
	for _, tc := range tests {
		c := NewListCursor(tc.prefix, tc.delim, tc.after)
		if c.Range != tc.want || c.Done != tc.done {
			t.Errorf("NewListCursor(%q, %q, %q) = %+v done=%v, want %+v done=%v", tc.prefix, tc.delim, tc.after, c.Range, c.Done, tc.want, tc.done)
		}
	}
}

// fakeFetch serves sorted keys the way an engine's statement does, counting
// the statements.
func fakeFetch(keys []string, calls *int) FetchObjects {
	return func(c *ListCursor, limit int) ([]store.ObjectInfo, error) {
		*calls++
		var out []store.ObjectInfo
		for _, k := range keys {
			if k < c.Range.From || (k == c.Range.From && !c.Range.Inclusive) || (c.Range.Bounded && k >= c.Range.To) {
				continue
			}
			if len(out) == limit {
				break
			}
			out = append(out, store.ObjectInfo{Key: k})
		}
		return out, nil
	}
}

// naiveList is the listing by definition: every key in order, rolled up.
func naiveList(keys []string, prefix, delim string) []string {
	var out []string
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if cp := Rollup(k, prefix, delim); cp != "" {
			if len(out) == 0 || out[len(out)-1] != cp {
				out = append(out, cp)
			}
			continue
		}
		out = append(out, k)
	}
	return out
}

func TestListObjectsPages(t *testing.T) {
	keys := []string{"a", "d/1", "d/2", "d/3", "d/e/1", "e", "f/1", "f/2", "g", "é/1", "é/2"}
	slices.Sort(keys)
	tests := []struct {
		prefix, delim string
		maxKeys       int
	}{
		{"", "", 1}, {"", "", 3}, {"", "", 0},
		{"", "/", 1}, {"", "/", 2}, {"", "/", 1000},
		{"d/", "/", 1}, {"d/", "/", 2}, {"d/", "", 2},
		{"é", "/", 1}, {"zz", "/", 5},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q/%q/%d", tc.prefix, tc.delim, tc.maxKeys), func(t *testing.T) {
			want := naiveList(keys, tc.prefix, tc.delim)
			var got []string
			after := ""
			for page := 0; ; page++ {
				if page > len(keys)+1 {
					t.Fatalf("no end after %d pages", page)
				}
				calls := 0
				res, err := ListObjects(store.ListParams{Prefix: tc.prefix, Delimiter: tc.delim, After: after, MaxKeys: tc.maxKeys}, fakeFetch(keys, &calls))
				if err != nil {
					t.Fatal(err)
				}
				n := len(res.Objects) + len(res.CommonPrefixes)
				if tc.maxKeys > 0 && n > tc.maxKeys {
					t.Fatalf("page of %d entries, MaxKeys %d", n, tc.maxKeys)
				}
				for _, o := range res.Objects {
					got = append(got, o.Key)
				}
				got = append(got, res.CommonPrefixes...)
				if !res.Truncated {
					if res.NextAfter != "" {
						t.Errorf("NextAfter %q on the last page", res.NextAfter)
					}
					break
				}
				after = res.NextAfter
			}
			slices.Sort(got)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("listed %q, want %q", got, want)
			}
		})
	}
}

func TestListObjectsSkipsPrefixes(t *testing.T) {
	// 5000 keys under one common prefix cost one seek, not five batches.
	keys := []string{"a"}
	for i := range 5000 {
		keys = append(keys, fmt.Sprintf("b/%05d", i))
	}
	keys = append(keys, "c")
	calls := 0
	res, err := ListObjects(store.ListParams{Delimiter: "/"}, fakeFetch(keys, &calls))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res.CommonPrefixes) != "[b/]" || len(res.Objects) != 2 || res.Truncated {
		t.Errorf("got %+v", res)
	}
	if calls != 2 {
		t.Errorf("%d statements, want 2", calls)
	}
}

// skipFetch serves sorted keys the way an engine's one-statement delimiter
// listing does: past each key under a common prefix it seeks past the prefix.
func skipFetch(keys []string, calls *int) FetchObjects {
	return func(c *ListCursor, limit int) ([]store.ObjectInfo, error) {
		*calls++
		var out []store.ObjectInfo
		from, incl := c.Range.From, c.Range.Inclusive
		for _, k := range keys {
			if len(out) == limit {
				break
			}
			if k < from || (k == from && !incl) || (c.Range.Bounded && k >= c.Range.To) {
				continue
			}
			out = append(out, store.ObjectInfo{Key: k})
			from, incl = k, false
			if cp := Rollup(k, c.Prefix, c.Delim); cp != "" && c.DelimNext != "" {
				from, incl = cp[:len(cp)-len(c.Delim)]+c.DelimNext, true
			}
		}
		return out, nil
	}
}

func TestListObjectsOneStatement(t *testing.T) {
	// 50 prefixes of 200 keys each and objects between them: one statement.
	var keys []string
	for i := range 10_000 {
		keys = append(keys, fmt.Sprintf("d/p%02d/k%05d", i%50, i))
	}
	for i := range 50 {
		keys = append(keys, fmt.Sprintf("d/p%02d", i))
	}
	slices.Sort(keys)
	calls := 0
	res, err := ListObjects(store.ListParams{Prefix: "d/", Delimiter: "/"}, skipFetch(keys, &calls))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.CommonPrefixes) != 50 || len(res.Objects) != 50 || res.Truncated || calls != 1 {
		t.Errorf("%d prefixes, %d objects, truncated %v, %d statements; want 50, 50, false, 1", len(res.CommonPrefixes), len(res.Objects), res.Truncated, calls)
	}
	// Pages of every size, with a skipping fetch, reassemble the listing.
	for _, size := range []int{1, 2, 3, 7, 100} {
		var got []string
		after := ""
		for page := 0; ; page++ {
			if page > 200 {
				t.Fatalf("size %d: no end", size)
			}
			res, err := ListObjects(store.ListParams{Prefix: "d/", Delimiter: "/", After: after, MaxKeys: size}, skipFetch(keys, &calls))
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range res.Objects {
				got = append(got, o.Key)
			}
			got = append(got, res.CommonPrefixes...)
			if !res.Truncated {
				break
			}
			after = res.NextAfter
		}
		slices.Sort(got)
		if want := naiveList(keys, "d/", "/"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("size %d: listed %d entries, want %d", size, len(got), len(want))
		}
	}
}

func TestListObjectsFetchError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ListObjects(store.ListParams{}, func(*ListCursor, int) ([]store.ObjectInfo, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}

// fakeUploads serves uploads sorted by key then id (standing in for
// initiation time) the way an engine's statement does.
func fakeUploads(ups []store.Upload) FetchUploads {
	return func(c *ListCursor, tail *Marker, limit int) ([]store.Upload, error) {
		var out []store.Upload
		for _, u := range ups {
			inRange := u.Key > c.Range.From || (u.Key == c.Range.From && c.Range.Inclusive)
			inRange = inRange && (!c.Range.Bounded || u.Key < c.Range.To)
			inTail := tail != nil && u.Key == tail.Key && u.UploadID > tail.ID
			if !inRange && !inTail {
				continue
			}
			if len(out) == limit {
				break
			}
			out = append(out, u)
		}
		return out, nil
	}
}

func TestListUploadsPages(t *testing.T) {
	var ups []store.Upload
	for _, k := range []string{"a", "b", "d/1", "d/2", "e"} {
		for i := range 3 {
			ups = append(ups, store.Upload{Key: k, UploadID: fmt.Sprintf("%s#%d", k, i)})
		}
	}
	tests := []struct {
		delim, prefix string
		max           int
		want          string
	}{
		{"", "", 1, "[a#0 a#1 a#2 b#0 b#1 b#2 d/1#0 d/1#1 d/1#2 d/2#0 d/2#1 d/2#2 e#0 e#1 e#2]"},
		{"", "", 2, "[a#0 a#1 a#2 b#0 b#1 b#2 d/1#0 d/1#1 d/1#2 d/2#0 d/2#1 d/2#2 e#0 e#1 e#2]"},
		{"/", "", 1, "[a#0 a#1 a#2 b#0 b#1 b#2 d/ e#0 e#1 e#2]"},
		{"/", "", 4, "[a#0 a#1 a#2 b#0 b#1 b#2 d/ e#0 e#1 e#2]"},
		{"/", "d/", 2, "[d/1#0 d/1#1 d/1#2 d/2#0 d/2#1 d/2#2]"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q/%q/%d", tc.prefix, tc.delim, tc.max), func(t *testing.T) {
			var got []string
			p := store.ListUploadsParams{Prefix: tc.prefix, Delimiter: tc.delim, MaxUploads: tc.max}
			for page := 0; ; page++ {
				if page > len(ups)+1 {
					t.Fatalf("no end after %d pages", page)
				}
				res, err := ListUploads(p, fakeUploads(ups))
				if err != nil {
					t.Fatal(err)
				}
				if n := len(res.Uploads) + len(res.CommonPrefixes); n > tc.max {
					t.Fatalf("page of %d entries, MaxUploads %d", n, tc.max)
				}
				for _, u := range res.Uploads {
					got = append(got, u.UploadID)
				}
				got = append(got, res.CommonPrefixes...)
				if !res.Truncated {
					break
				}
				p.KeyMarker, p.UploadIDMarker = res.NextKeyMarker, res.NextUploadIDMarker
			}
			slices.Sort(got)
			if fmt.Sprint(got) != tc.want {
				t.Errorf("listed %v, want %s", got, tc.want)
			}
		})
	}
}
