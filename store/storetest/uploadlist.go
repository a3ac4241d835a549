package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// testUploadListing: ListMultipartUploads pages, with every combination of
// prefix, delimiter, markers and max-uploads, answer what a model of the S3
// listing computes from the whole set of uploads.
func testUploadListing(t *testing.T, v *Env) {
	ctx := context.Background()
	// Keys with several uploads, common prefixes of one and of many keys,
	// keys that are a prefix of others, and bytes a URL would encode.
	keys := []string{"a", "a/1", "a/2", "a/b/c", "ab", "d/x", "d/x/y", "d/y", "dd", "e f", "e%2F", "z/ü", "z/ü/1", "~"}
	var all []store.Upload
	for i, k := range keys {
		for j := range 1 + i%3 {
			u, err := v.Store.CreateMultipartUpload(ctx, "b", k, store.ObjectMeta{ContentType: fmt.Sprintf("t/%d", j)}, "", "")
			if err != nil {
				t.Fatalf("CreateMultipartUpload %s: %v", k, err)
			}
			all = append(all, u)
		}
	}
	slices.SortFunc(all, func(a, b store.Upload) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), cmp.Compare(a.Initiated.UnixMicro(), b.Initiated.UnixMicro()),
			strings.Compare(a.UploadID, b.UploadID))
	})
	// The pages of max-uploads 1 and 3 pass through every upload marker.
	starts := []store.ListUploadsParams{{}, {KeyMarker: "a/1"}, {KeyMarker: "b"}, {KeyMarker: "dd", UploadIDMarker: upload(all, "dd", 0)}}
	for _, prefix := range []string{"", "a", "d/", "z/ü/"} {
		for _, delim := range []string{"", "/", "b"} {
			for _, max := range []int{1, 3, 0} {
				for _, start := range starts {
					p := start
					p.Prefix, p.Delimiter, p.MaxUploads = prefix, delim, max
					for page := 0; ; page++ {
						name := fmt.Sprintf("%+v", p)
						if page > len(all)+1 {
							t.Fatalf("%s: no end after %d pages", name, page)
						}
						got, err := v.Store.ListMultipartUploads(ctx, "b", p)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if g, w := pageString(got), pageString(modelUploads(all, p)); g != w {
							t.Fatalf("%s:\n got %s\nwant %s", name, g, w)
						}
						if !got.Truncated {
							break
						}
						p.KeyMarker, p.UploadIDMarker = got.NextKeyMarker, got.NextUploadIDMarker
					}
				}
			}
		}
	}
	v.Idle(t)
}

// upload is the id of key's i-th upload in all.
func upload(all []store.Upload, key string, i int) string {
	for _, u := range all {
		if u.Key == key {
			if i == 0 {
				return u.UploadID
			}
			i--
		}
	}
	panic("no upload " + key)
}

// modelUploads is the ListMultipartUploads page of p over all (sorted by
// key, initiation and id), computed by one pass over every upload.
func modelUploads(all []store.Upload, p store.ListUploadsParams) store.ListUploadsResult {
	maxUploads := p.MaxUploads
	if maxUploads <= 0 {
		maxUploads = store.MaxListKeys
	}
	rollup := func(key string) string {
		if i := strings.Index(key[len(p.Prefix):], p.Delimiter); p.Delimiter != "" && i >= 0 {
			return key[:len(p.Prefix)+i+len(p.Delimiter)]
		}
		return ""
	}
	markerCP := ""
	if strings.HasPrefix(p.KeyMarker, p.Prefix) {
		markerCP = rollup(p.KeyMarker)
	}
	var res store.ListUploadsResult
	afterMarker := p.UploadIDMarker == "" || markerCP != ""
	n := 0
	for _, u := range all {
		if u.Key == p.KeyMarker && !afterMarker {
			afterMarker = u.UploadID == p.UploadIDMarker // the ones after it follow
			continue
		}
		if !strings.HasPrefix(u.Key, p.Prefix) || u.Key < p.KeyMarker || u.Key == p.KeyMarker && afterMarker && p.UploadIDMarker == "" ||
			markerCP != "" && strings.HasPrefix(u.Key, markerCP) {
			continue
		}
		cp := rollup(u.Key)
		if cp != "" && len(res.CommonPrefixes) > 0 && res.CommonPrefixes[len(res.CommonPrefixes)-1] == cp {
			continue
		}
		if n == maxUploads {
			res.Truncated = true
			break
		}
		n++
		if cp != "" {
			res.CommonPrefixes = append(res.CommonPrefixes, cp)
			res.NextKeyMarker, res.NextUploadIDMarker = cp, ""
			continue
		}
		res.Uploads = append(res.Uploads, u)
		res.NextKeyMarker, res.NextUploadIDMarker = u.Key, u.UploadID
	}
	if !res.Truncated {
		res.NextKeyMarker, res.NextUploadIDMarker = "", ""
	}
	return res
}

// pageString shows a page: its uploads with what a listing reports of them,
// its common prefixes and its continuation.
func pageString(r store.ListUploadsResult) string {
	var b strings.Builder
	for _, u := range r.Uploads {
		fmt.Fprintf(&b, "%q/%s@%d(%s) ", u.Key, u.UploadID, u.Initiated.UnixMicro(), u.Meta.ContentType)
	}
	fmt.Fprintf(&b, "prefixes %q truncated %v next %q/%q", r.CommonPrefixes, r.Truncated, r.NextKeyMarker, r.NextUploadIDMarker)
	return b.String()
}
