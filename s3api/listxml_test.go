package s3api

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http/httptest"
	"testing"
)

// BenchmarkListPage1000 serves one ListObjectsV2 page of 1,000 keys from the
// in-memory store: the gateway's per-key CPU of a listing (encoding included).
func BenchmarkListPage1000(b *testing.B) {
	for _, q := range []string{"list-type=2", "list-type=2&encoding-type=url&fetch-owner=true"} {
		b.Run(q, func(b *testing.B) {
			e := newEnv(&testing.T{}, Config{})
			e.mustBucket("b")
			for i := range 1000 {
				k := fmt.Sprintf("p%02d/%06d", i%50, i)
				o := objInfo(k)
				o.ETag = "0123456789abcdef0123456789abcdef"
				e.st.objects["b"][k] = &memObject{data: []byte("x"), info: o}
			}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				e.h.ServeHTTP(w, httptest.NewRequest("GET", "/b?"+q, nil))
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}

// awkwardText are strings whose escaping differs between careless encoders:
// markup, the control characters XML escapes or cannot hold, invalid UTF-8,
// surrogates, the noncharacters at the edges of XML's range.
var awkwardText = []string{"", "plain/key", `a&b<c>d"e'f`, "tab\tnl\ncr\r", "nul\x00bel\x07del\x7f", "bad\xffutf8\xc3",
	"\xed\xa0\x80surrogate", "\uFFFD\uFFFE\uFFFF", "\U0010FFFF\U00010000", "é/ü/日本/🙂", "]]>", "&amp;", "%2F+ ",
	"\u0085\u2028", "x\xe2\x82"}

// listResults are listing pages of every kind (ListObjects V2 and V1,
// ListObjectVersions, ListMultipartUploads) with s and next in every text
// field, n in every number, and, if full, every optional element set and
// entries of every shape.
func listResults(n int, s, next string, full bool) []xmlAppender {
	size := int64(n) - 1
	objs := []objectElem{
		{Key: s, LastModified: "2024-05-06T07:08:09.123Z", ETag: `"` + next + `"`, Size: size, StorageClass: s},
		{Key: next, Size: 1 << 40, Owner: &owner{ID: s, DisplayName: next}, ChecksumAlgorithm: s, ChecksumType: next},
	}
	versions := []versionEntry{
		{XMLName: xml.Name{Local: "Version"}, Key: s, VersionID: next, IsLatest: true, LastModified: s, ETag: next,
			Size: &size, StorageClass: s, Owner: &owner{ID: next, DisplayName: s}, ChecksumAlgorithm: next, ChecksumType: s},
		{XMLName: xml.Name{Local: "DeleteMarker"}, Key: next, VersionID: s, LastModified: next, Owner: &owner{ID: s}},
		{XMLName: xml.Name{Local: "Version"}, Key: s},
	}
	uploads := []uploadElem{
		{Key: s, UploadID: next, Initiator: &owner{ID: s, DisplayName: next}, Owner: &owner{ID: next, DisplayName: s},
			StorageClass: s, Initiated: next, ChecksumAlgorithm: s, ChecksumType: next},
		{Key: next, UploadID: s},
	}
	prefixes := []prefixElem{{Prefix: s}, {Prefix: next}}
	var ptr *string
	var objsIn []objectElem
	var versionsIn []versionEntry
	var uploadsIn []uploadElem
	var prefixesIn []prefixElem
	nextIn := ""
	if full {
		ptr, objsIn, versionsIn, uploadsIn, prefixesIn, nextIn = &s, objs, versions, uploads, prefixes, next
	}
	return []xmlAppender{
		&listBucketResultV2{NS: s3NS, Name: s, Prefix: next, Delimiter: ptr, MaxKeys: n, EncodingType: s,
			KeyCount: -n, IsTruncated: full, ContinuationToken: ptr, NextContinuationToken: next, StartAfter: ptr,
			Contents: objsIn, CommonPrefixes: prefixesIn},
		&listBucketResultV1{NS: s3NS, Name: s, Prefix: next, Marker: s, NextMarker: next, MaxKeys: n,
			Delimiter: ptr, EncodingType: next, IsTruncated: full, Contents: objsIn, CommonPrefixes: prefixesIn},
		&listVersionsResult{NS: s3NS, Name: s, Prefix: next, KeyMarker: s, VersionIDMarker: next,
			NextKeyMarker: nextIn, NextVersionIDMarker: nextIn, MaxKeys: n, Delimiter: ptr, EncodingType: nextIn,
			IsTruncated: full, Entries: versionsIn, CommonPrefixes: prefixesIn},
		&listMultipartUploadsResult{NS: s3NS, Bucket: s, KeyMarker: next, UploadIDMarker: s, NextKeyMarker: next,
			NextUploadIDMarker: s, Prefix: next, Delimiter: nextIn, MaxUploads: -n, EncodingType: nextIn,
			IsTruncated: full, Uploads: uploadsIn, CommonPrefixes: prefixesIn},
	}
}

// matchMarshal reports where v's hand-written XML differs from xml.Marshal's.
func matchMarshal(t *testing.T, v xmlAppender, name string) {
	t.Helper()
	want, err := xml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.appendXML(nil); !bytes.Equal(got, want) {
		t.Errorf("%s %T:\n got %q\nwant %q", name, v, got, want)
	}
}

// TestListXMLMatchesMarshal holds the hand-written listing encoders to
// xml.Marshal's bytes, over every optional element set and unset and
// awkward text in every text field.
func TestListXMLMatchesMarshal(t *testing.T) {
	for i, s := range awkwardText {
		next := awkwardText[(i+1)%len(awkwardText)]
		for _, full := range []bool{false, true} {
			for _, v := range listResults(i, s, next, full) {
				matchMarshal(t, v, fmt.Sprintf("%q (full %v)", s, full))
			}
		}
	}
}

// FuzzListXML compares every listing encoder with xml.Marshal on any text
// in its text fields (the default test run tries awkwardText).
func FuzzListXML(f *testing.F) {
	for i, s := range awkwardText {
		f.Add(s, awkwardText[(i+1)%len(awkwardText)], i)
	}
	f.Fuzz(func(t *testing.T, s, next string, n int) {
		for _, full := range []bool{false, true} {
			for _, v := range listResults(n, s, next, full) {
				matchMarshal(t, v, fmt.Sprintf("%q, %q (full %v)", s, next, full))
			}
		}
	})
}

// FuzzListXMLEscape compares xmlEscape with encoding/xml's on any text.
func FuzzListXMLEscape(f *testing.F) {
	for _, s := range awkwardText {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := prefixElem{Prefix: s}
		want, err := xml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got := append(xmlElem([]byte("<prefixElem>"), "Prefix", s), "</prefixElem>"...)
		if !bytes.Equal(got, want) {
			t.Errorf("%q:\n got %q\nwant %q", s, got, want)
		}
	})
}
