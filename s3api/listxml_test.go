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

// TestListXMLMatchesMarshal holds the hand-written listing encoders to
// xml.Marshal's bytes, over every optional element set and unset and
// awkward text in every text field.
func TestListXMLMatchesMarshal(t *testing.T) {
	for i, s := range awkwardText {
		next := awkwardText[(i+1)%len(awkwardText)]
		objs := []objectElem{
			{Key: s, LastModified: "2024-05-06T07:08:09.123Z", ETag: `"` + next + `"`, Size: int64(i) - 1, StorageClass: s},
			{Key: next, Size: 1 << 40, Owner: &owner{ID: s, DisplayName: next}, ChecksumAlgorithm: s, ChecksumType: next},
		}
		prefixes := []prefixElem{{Prefix: s}, {Prefix: next}}
		for _, full := range []bool{false, true} {
			var ptr *string
			var objsIn []objectElem
			var prefixesIn []prefixElem
			if full {
				ptr, objsIn, prefixesIn = &awkwardText[i], objs, prefixes
			}
			v2 := listBucketResultV2{NS: s3NS, Name: s, Prefix: next, Delimiter: ptr, MaxKeys: i, EncodingType: s,
				KeyCount: -i, IsTruncated: full, ContinuationToken: ptr, NextContinuationToken: next, StartAfter: ptr,
				Contents: objsIn, CommonPrefixes: prefixesIn}
			v1 := listBucketResultV1{NS: s3NS, Name: s, Prefix: next, Marker: s, NextMarker: next, MaxKeys: i,
				Delimiter: ptr, EncodingType: next, IsTruncated: full, Contents: objsIn, CommonPrefixes: prefixesIn}
			for _, v := range []xmlAppender{&v2, &v1} {
				want, err := xml.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				if got := v.appendXML(nil); !bytes.Equal(got, want) {
					t.Errorf("%q (full %v) %T:\n got %q\nwant %q", s, full, v, got, want)
				}
			}
		}
	}
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
