package s3api

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/store"
)

func TestMetaValueEncoding(t *testing.T) {
	tests := []struct {
		name, in, stored, out string
	}{
		{"ascii unchanged", "plain value", "plain value", "plain value"},
		{"raw utf-8 kept, sent B-encoded", "Grüße", "Grüße", "=?UTF-8?B?" + base64.StdEncoding.EncodeToString([]byte("Grüße")) + "?="},
		{"B word decoded", "=?UTF-8?B?" + base64.StdEncoding.EncodeToString([]byte("✓")) + "?=", "✓", "=?UTF-8?B?4pyT?="},
		{"Q word decoded", "=?utf-8?q?caf=C3=A9?=", "café", "=?UTF-8?B?Y2Fmw6k=?="},
		{"invalid utf-8 read as latin-1", "caf\xe9", "café", "=?UTF-8?B?Y2Fmw6k=?="},
		{"not a word stays", "a =? b", "a =? b", "a =? b"},
		{"tab is fine", "a\tb", "a\tb", "a\tb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decodeMetaValue(tt.in); got != tt.stored {
				t.Fatalf("decodeMetaValue(%q) = %q, want %q", tt.in, got, tt.stored)
			}
			if got := encodeMetaValue(tt.stored); got != tt.out {
				t.Fatalf("encodeMetaValue(%q) = %q, want %q", tt.stored, got, tt.out)
			}
		})
	}
	// Through the handler: stored decoded, returned encoded.
	e := newEnv(t, Config{})
	e.mustBucket("b")
	e.mustPut("b", "k", "x", map[string]string{"x-amz-meta-title": "=?UTF-8?B?4pyT?="})
	if got := e.st.objects["b"]["k"].info.Meta.User["title"]; got != "✓" {
		t.Fatalf("stored %q, want ✓", got)
	}
	w := e.do(req{method: "HEAD", target: "/b/k"})
	//lint:ignore SA1008 the gateway sets this name in lower case on purpose (as AWS sends it)
	if got := w.Header()["x-amz-meta-title"]; len(got) != 1 || got[0] != "=?UTF-8?B?4pyT?=" {
		t.Fatalf("HEAD x-amz-meta-title = %q", got)
	}
}

func TestCannedACLs(t *testing.T) {
	tests := []struct {
		acl    string
		status int
		code   string
	}{
		{"private", 200, ""},
		{"bucket-owner-read", 200, ""},
		{"bucket-owner-full-control", 200, ""},
		{"public-read", 501, "NotImplemented"},
		{"public-read-write", 501, "NotImplemented"},
		{"authenticated-read", 501, "NotImplemented"},
		{"aws-exec-read", 501, "NotImplemented"},
		{"log-delivery-write", 501, "NotImplemented"},
		{"everyone-please", 400, "InvalidArgument"},
	}
	for _, tt := range tests {
		t.Run(tt.acl, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("b")
			for _, r := range []req{
				{method: "PUT", target: "/nb", hdr: map[string]string{"x-amz-acl": tt.acl}},
				{method: "PUT", target: "/b/k", body: "x", hdr: map[string]string{"x-amz-acl": tt.acl}},
				{method: "PUT", target: "/b?acl", hdr: map[string]string{"x-amz-acl": tt.acl}},
			} {
				w := e.do(r)
				if tt.code != "" {
					expectError(t, w, tt.status, tt.code)
					continue
				}
				if w.Code != tt.status {
					t.Fatalf("%s %s: %d %s", r.method, r.target, w.Code, w.Body.String())
				}
			}
			if _, ok := e.st.objects["b"]["k"]; ok != (tt.code == "") {
				t.Fatalf("object stored = %v with ACL %s", ok, tt.acl)
			}
		})
	}
}

func aclBody(grants ...string) string {
	return `<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>AKTEST</ID></Owner><AccessControlList>` +
		strings.Join(grants, "") + `</AccessControlList></AccessControlPolicy>`
}

func grantXML(typ, idOrURI, perm string) string {
	inner := "<ID>" + idOrURI + "</ID>"
	if typ == "Group" {
		inner = "<URI>" + idOrURI + "</URI>"
	}
	return `<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="` + typ + `">` + inner +
		`</Grantee><Permission>` + perm + `</Permission></Grant>`
}

func TestPutACLBody(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		code   string
	}{
		{"owner full control", aclBody(grantXML("CanonicalUser", "AKTEST", "FULL_CONTROL")), nil, 200, ""},
		{"no grants", aclBody(), nil, 200, ""},
		{"other user", aclBody(grantXML("CanonicalUser", "someone", "READ")), nil, 501, "NotImplemented"},
		{"all users", aclBody(grantXML("CanonicalUser", "AKTEST", "FULL_CONTROL"), grantXML("Group", "http://acs.amazonaws.com/groups/global/AllUsers", "READ")), nil, 501, "NotImplemented"},
		{"bad permission", aclBody(grantXML("CanonicalUser", "AKTEST", "ALL")), nil, 400, "MalformedACLError"},
		{"not xml", "<AccessControlPolicy", nil, 400, "MalformedACLError"},
		{"header and body", aclBody(), map[string]string{"x-amz-acl": "private"}, 400, "InvalidRequest"},
		{"grant header", "", map[string]string{"x-amz-grant-read": "uri=http://acs.amazonaws.com/groups/global/AllUsers"}, 501, "NotImplemented"},
		{"nothing", "", nil, 400, "MissingSecurityHeader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("b")
			e.mustPut("b", "k", "x", nil)
			for _, target := range []string{"/b?acl", "/b/k?acl"} {
				w := e.do(req{method: "PUT", target: target, body: tt.body, hdr: tt.hdr})
				if tt.code != "" {
					expectError(t, w, tt.status, tt.code)
				} else if w.Code != tt.status {
					t.Fatalf("PUT %s: %d %s", target, w.Code, w.Body.String())
				}
			}
		})
	}
}

type attrsResult struct {
	XMLName  xml.Name `xml:"GetObjectAttributesResponse"`
	ETag     *string
	Checksum *struct {
		ChecksumCRC32 string
		ChecksumSHA1  string
		ChecksumType  string
	}
	ObjectParts *struct {
		PartsCount           int
		PartNumberMarker     int
		NextPartNumberMarker int
		MaxParts             int
		IsTruncated          bool
		Part                 []struct {
			PartNumber    int
			Size          int64
			ChecksumCRC32 string
		}
	}
	StorageClass *string
	ObjectSize   *int64
}

func TestGetObjectAttributes(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("b")
	e.mustPut("b", "single", "hello", nil)
	parts := make([]store.PartInfo, 5)
	for i := range parts {
		parts[i] = store.PartInfo{Number: i + 1, Size: int64(10 + i), ETag: fmt.Sprintf("%032d", i),
			Checksum: store.Checksum{Algorithm: store.AlgCRC32, Value: fmt.Sprintf("AAAAA%d==", i)}}
	}
	e.st.objects["b"]["multi"] = &memObject{data: []byte("x"), info: store.ObjectInfo{Bucket: "b", Key: "multi", Size: 60,
		ETag: "abc-5", LastModified: fixedTime, Parts: parts,
		Checksum: store.Checksum{Algorithm: store.AlgCRC32, Value: "ZZZZZZ==-5", Type: store.ChecksumComposite}}}

	get := func(key string, hdr map[string]string) (attrsResult, string) {
		t.Helper()
		w := e.do(req{method: "GET", target: "/b/" + key + "?attributes", hdr: hdr})
		if w.Code != http.StatusOK {
			t.Fatalf("GetObjectAttributes %s %v: %d %s", key, hdr, w.Code, w.Body.String())
		}
		if w.Header().Get("Last-Modified") == "" || w.Header().Get("ETag") != "" {
			t.Fatalf("headers: Last-Modified %q ETag %q", w.Header().Get("Last-Modified"), w.Header().Get("ETag"))
		}
		var r attrsResult
		if err := xml.Unmarshal(w.Body.Bytes(), &r); err != nil {
			t.Fatalf("parse: %v: %s", err, w.Body.String())
		}
		return r, w.Body.String()
	}

	r, raw := get("single", map[string]string{"x-amz-object-attributes": "ETag,StorageClass,ObjectSize,ObjectParts,Checksum"})
	if r.ETag == nil || *r.ETag != "5d41402abc4b2a76b9719d911017c592" || r.StorageClass == nil || *r.StorageClass != "STANDARD" ||
		r.ObjectSize == nil || *r.ObjectSize != 5 || r.ObjectParts != nil || r.Checksum != nil {
		t.Fatalf("single: %s", raw)
	}
	r, raw = get("single", map[string]string{"x-amz-object-attributes": "ObjectSize"})
	if r.ETag != nil || r.StorageClass != nil || r.ObjectSize == nil {
		t.Fatalf("only ObjectSize asked: %s", raw)
	}

	// Parts in pages of 2: markers chain, the last page is not truncated.
	var seen []int
	marker := ""
	for page := 0; page < 4; page++ {
		hdr := map[string]string{"x-amz-object-attributes": "ObjectParts,Checksum", "x-amz-max-parts": "2"}
		if marker != "" {
			hdr["x-amz-part-number-marker"] = marker
		}
		r, raw = get("multi", hdr)
		op := r.ObjectParts
		if op == nil || op.PartsCount != 5 || op.MaxParts != 2 || r.Checksum == nil {
			t.Fatalf("multi page %d: %s", page, raw)
		}
		if r.Checksum.ChecksumCRC32 != "ZZZZZZ==" || r.Checksum.ChecksumType != "COMPOSITE" {
			t.Fatalf("composite checksum %+v, want the value without -N and type COMPOSITE", *r.Checksum)
		}
		for _, p := range op.Part {
			seen = append(seen, p.PartNumber)
			if p.ChecksumCRC32 != parts[p.PartNumber-1].Checksum.Value || p.Size != parts[p.PartNumber-1].Size {
				t.Fatalf("part %+v", p)
			}
		}
		if !op.IsTruncated {
			break
		}
		marker = fmt.Sprint(op.NextPartNumberMarker)
	}
	if fmt.Sprint(seen) != "[1 2 3 4 5]" {
		t.Fatalf("paged parts %v", seen)
	}

	for _, tt := range []struct {
		name string
		hdr  map[string]string
		key  string
		st   int
		code string
	}{
		{"missing header", nil, "single", 400, "InvalidArgument"},
		{"unknown attribute", map[string]string{"x-amz-object-attributes": "ETag,Owner"}, "single", 400, "InvalidArgument"},
		{"lower case name", map[string]string{"x-amz-object-attributes": "etag"}, "single", 400, "InvalidArgument"},
		{"bad max-parts", map[string]string{"x-amz-object-attributes": "ETag", "x-amz-max-parts": "-1"}, "single", 400, "InvalidArgument"},
		{"no such key", map[string]string{"x-amz-object-attributes": "ETag"}, "nope", 404, "NoSuchKey"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			expectError(t, e.do(req{method: "GET", target: "/b/" + tt.key + "?attributes", hdr: tt.hdr}), tt.st, tt.code)
		})
	}
}

func TestListGivenElements(t *testing.T) {
	e := listEnv(t, "a", "b/c")
	for _, tt := range []struct {
		query      string
		want, dont []string
	}{
		// An empty delimiter is not echoed (AWS); an empty start-after is.
		{"list-type=2&delimiter=", []string{"<Prefix></Prefix>", "<KeyCount>2</KeyCount>"}, []string{"<StartAfter>", "<Delimiter>"}},
		{"list-type=2&start-after=", []string{"<StartAfter></StartAfter>"}, []string{"<Delimiter>"}},
		{"list-type=2&encoding-type=url&start-after=a%20b&delimiter=%2B", []string{"<StartAfter>a%20b</StartAfter>", "<Delimiter>%2B</Delimiter>"}, nil},
		{"delimiter=", []string{"<Marker></Marker>"}, []string{"<Delimiter>"}},
		// An empty continuation token lists from the start and is echoed.
		{"list-type=2&continuation-token=", []string{"<ContinuationToken></ContinuationToken>", "<KeyCount>2</KeyCount>"}, nil},
		{"", []string{"<Marker></Marker>", "<Prefix></Prefix>"}, []string{"<Delimiter>"}},
	} {
		w := e.do(req{method: "GET", target: "/b?" + tt.query})
		body := w.Body.String()
		for _, s := range tt.want {
			if !strings.Contains(body, s) {
				t.Errorf("?%s: no %s in %s", tt.query, s, body)
			}
		}
		for _, s := range tt.dont {
			if strings.Contains(body, s) {
				t.Errorf("?%s: unexpected %s in %s", tt.query, s, body)
			}
		}
	}
}

// TestConditionalPutPrecheck: a conditional PutObject whose condition already
// fails is answered before the store reads its body; conditions that hold
// reach the store with the headers (where the engine re-checks atomically).
func TestConditionalPutPrecheck(t *testing.T) {
	const etag = `"5d41402abc4b2a76b9719d911017c592"` // MD5 of "hello"
	tests := []struct {
		name     string
		key      string
		hdr      map[string]string
		status   int
		code     string
		reachPut bool
	}{
		{"if-none-match on existing", "k", map[string]string{"If-None-Match": "*"}, 412, "PreconditionFailed", false},
		{"if-none-match on new", "new", map[string]string{"If-None-Match": "*"}, 200, "", true},
		{"if-match wrong", "k", map[string]string{"If-Match": `"00000000000000000000000000000000"`}, 412, "PreconditionFailed", false},
		{"if-match missing key", "new", map[string]string{"If-Match": etag}, 404, "NoSuchKey", false},
		{"if-match right", "k", map[string]string{"If-Match": etag}, 200, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("b")
			e.mustPut("b", "k", "hello", nil)
			e.st.lastPut = store.PutOptions{}
			w := e.do(req{method: "PUT", target: "/b/" + tt.key, body: "world", hdr: tt.hdr})
			if tt.code != "" {
				expectError(t, w, tt.status, tt.code)
			} else if w.Code != tt.status {
				t.Fatalf("%d %s", w.Code, w.Body.String())
			}
			reached := e.st.lastPut.Size != 0
			if reached != tt.reachPut {
				t.Fatalf("store PutObject called = %v, want %v", reached, tt.reachPut)
			}
			if reached && (e.st.lastPut.IfMatch != tt.hdr["If-Match"] || e.st.lastPut.IfNoneMatch != tt.hdr["If-None-Match"]) {
				t.Fatalf("conditions not passed to the store: %+v", e.st.lastPut)
			}
		})
	}
	e := newEnv(t, Config{})
	e.mustBucket("b")
	e.mustPut("b", "k", "hello", nil)
	// CopyObject passes its destination's conditions to the store, which
	// judges them with the copy; an If-None-Match other than * is refused.
	w := e.do(req{method: "PUT", target: "/b/copy", hdr: map[string]string{"x-amz-copy-source": "/b/k", "If-None-Match": "*"}})
	if w.Code != 200 || e.st.lastCopy.opts.IfNoneMatch != "*" {
		t.Fatalf("conditional copy: %d %s, store saw %+v", w.Code, w.Body.String(), e.st.lastCopy.opts)
	}
	w = e.do(req{method: "PUT", target: "/b/copy", hdr: map[string]string{"x-amz-copy-source": "/b/k", "If-None-Match": `"abc"`}})
	expectError(t, w, 501, "NotImplemented")
}
