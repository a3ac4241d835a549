package s3api

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/s3gate/s3gate/store"
)

// Fuzz targets for every parser of client input in s3api. Run one with
// `go test -run '^$' -fuzz '^FuzzCompleteRequest$' -fuzztime 10s ./s3api/`;
// the seed corpora under testdata/fuzz run with every plain `go test`.

// wantClientError fails unless err is a 4xx/5xx S3 answer decided by s3api
// (never an internal error, which would mean an unexpected parse failure).
func wantClientError(t *testing.T, err error) {
	t.Helper()
	e, internal := toAPIError(err)
	if internal || e.Status < 400 || e.Status >= 600 || e.Status == http.StatusInternalServerError {
		t.Fatalf("parse error %v maps to %d %s (internal %v), want a client error", err, e.Status, e.Code, internal)
	}
}

func FuzzCompleteRequest(f *testing.F) {
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"abc"</ETag></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><ChecksumCRC32>AAAAAA==</ChecksumCRC32><ETag>e</ETag><PartNumber>2</PartNumber></Part><Part><PartNumber>10000</PartNumber><ETag>f</ETag></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CompleteMultipartUpload><Part><PartNumber>0</PartNumber></Part></CompleteMultipartUpload>`))
	f.Add([]byte(`<CompleteMultipartUpload/>`))
	f.Add([]byte(`<CompleteMultipartUpload><Part>`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		parts, err := parseCompleteRequest(body)
		if err != nil {
			wantClientError(t, err)
			return
		}
		if len(parts) == 0 || len(parts) > store.MaxPartNumber {
			t.Fatalf("accepted %d parts", len(parts))
		}
		for _, p := range parts {
			if p.Number < 1 || p.Number > store.MaxPartNumber {
				t.Fatalf("accepted part number %d", p.Number)
			}
			if strings.HasPrefix(p.ETag, `"`) || strings.HasSuffix(p.ETag, `"`) {
				t.Fatalf("ETag %q kept its quotes", p.ETag)
			}
		}
		// The store's check runs on whatever parsed, without panicking.
		_, _ = store.CheckCompleteParts(parts, map[int]store.PartInfo{1: {Number: 1, Size: store.MinPartSize, ETag: "abc"}})
	})
}

func FuzzDeleteRequest(f *testing.F) {
	f.Add([]byte(`<Delete><Quiet>true</Quiet><Object><Key>a</Key></Object><Object><Key>b/c</Key><VersionId>null</VersionId></Object></Delete>`))
	f.Add([]byte(`<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Object><Key>&lt;x&amp;y&gt;</Key></Object></Delete>`))
	f.Add([]byte(`<Delete/>`))
	f.Add([]byte(`<Delete><Quiet>maybe</Quiet><Object><Key>a</Key></Object></Delete>`))
	f.Add([]byte(`<Remove><Object><Key>a</Key></Object></Remove>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseDeleteRequest(body)
		if err != nil {
			wantClientError(t, err)
			return
		}
		if len(req.Objects) == 0 || len(req.Objects) > maxDeleteKeys {
			t.Fatalf("accepted %d objects", len(req.Objects))
		}
	})
}

func FuzzCreateBucketConfiguration(f *testing.F) {
	f.Add([]byte(`<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>`))
	f.Add([]byte(`<CreateBucketConfiguration/>`))
	f.Add([]byte(`  `))
	f.Add([]byte(`<CreateBucketConfiguration><Loc`))
	f.Fuzz(func(t *testing.T, body []byte) {
		lc, err := parseCreateBucketConfiguration(body)
		if err != nil {
			wantClientError(t, err)
			return
		}
		if lc != strings.TrimSpace(lc) {
			t.Fatalf("constraint %q not trimmed", lc)
		}
		a := &api{cfg: Config{Region: "eu-west-1"}}
		if err := a.checkLocation(lc); err != nil {
			wantClientError(t, err)
		}
	})
}

func FuzzACLBody(f *testing.F) {
	f.Add([]byte(`<AccessControlPolicy><Owner><ID>o</ID></Owner><AccessControlList><Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser"><ID>o</ID></Grantee><Permission>FULL_CONTROL</Permission></Grant></AccessControlList></AccessControlPolicy>`))
	f.Add([]byte(`<AccessControlPolicy><AccessControlList><Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group"><URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee><Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>`))
	f.Add([]byte(`<AccessControlPolicy><AccessControlList><Grant><Permission>EVERYTHING</Permission></Grant></AccessControlList></AccessControlPolicy>`))
	f.Add([]byte(`<AccessControlPolicy>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		acl, err := parseACLBody(body, "o")
		if err == nil {
			// Accepted: the owner is the one given, and every grant names a
			// canonical id or a group that grants here, with a permission.
			if acl.Owner != "o" {
				t.Fatalf("accepted owner %q", acl.Owner)
			}
			for _, g := range acl.Grants {
				if (g.ID == "") == (g.URI == "") || (g.URI != "" && checkGroup(g.URI) != nil) || !slices.Contains(aclPermissions, g.Permission) {
					t.Fatalf("accepted a grant %+v", g)
				}
			}
			return
		}
		wantClientError(t, err)
	})
}

func FuzzObjectAttributesHeader(f *testing.F) {
	f.Add("ETag,Checksum,ObjectParts,StorageClass,ObjectSize")
	f.Add(" ETag , ObjectSize ")
	f.Add("")
	f.Add("etag")
	f.Add(",,,")
	f.Fuzz(func(t *testing.T, v string) {
		got, err := parseObjectAttributes([]string{v})
		if err != nil {
			wantClientError(t, err)
			return
		}
		if len(got) == 0 {
			t.Fatal("accepted no attributes")
		}
		for name := range got {
			switch name {
			case attrETag, attrChecksum, attrObjectParts, attrStorageClass, attrObjectSize:
			default:
				t.Fatalf("accepted attribute %q", name)
			}
		}
	})
}

func FuzzCopySource(f *testing.F) {
	f.Add("/bucket/key")
	f.Add("bucket/a%2Fb%20c?versionId=null")
	f.Add("bucket/key?versionId=3")
	f.Add("bucket")
	f.Add("/%zz/k")
	f.Add("b/k?%")
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h.Set("x-amz-copy-source", v)
		src, err := parseCopySource(h)
		if err != nil {
			wantClientError(t, err)
			return
		}
		if src.Bucket == "" || src.Key == "" || strings.Contains(src.Bucket, "/") {
			t.Fatalf("%q parsed to bucket %q key %q", v, src.Bucket, src.Key)
		}
	})
}

func FuzzCopyRange(f *testing.F) {
	f.Add("bytes=0-9")
	f.Add("bytes=5-")
	f.Add("bytes=-5")
	f.Add("bytes=9-0")
	f.Add("bytes=99999999999999999999-1")
	f.Fuzz(func(t *testing.T, v string) {
		r, err := parseCopyRange(v)
		if err != nil {
			wantClientError(t, err)
			return
		}
		if v == "" && r != nil || v != "" && (r == nil || r.Start < 0 || r.End < r.Start) {
			t.Fatalf("%q parsed to %+v", v, r)
		}
	})
}

// FuzzMetaValue: what encodeMetaValue sends is always a valid header value,
// and decodeMetaValue reads it back to the stored text.
func FuzzMetaValue(f *testing.F) {
	f.Add("plain")
	f.Add("Grüße ✓")
	f.Add("=?UTF-8?B?w6k=?=")
	f.Add("tab\there")
	f.Add("\x00\xff")
	f.Fuzz(func(t *testing.T, raw string) {
		stored := decodeMetaValue(raw)
		if !utf8.ValidString(stored) {
			t.Fatalf("decodeMetaValue(%q) = %q is not UTF-8", raw, stored)
		}
		sent := encodeMetaValue(stored)
		for i := 0; i < len(sent); i++ {
			if c := sent[i]; (c < 0x20 && c != '\t') || c > 0x7e {
				t.Fatalf("encodeMetaValue(%q) = %q is not a printable ASCII header value", stored, sent)
			}
		}
		if sent != stored && decodeMetaValue(sent) != stored {
			t.Fatalf("round trip of %q: sent %q, read back %q", stored, sent, decodeMetaValue(sent))
		}
	})
}

// errorsAreClientErrors keeps the helper honest: an unknown error is internal.
func TestWantClientErrorDetectsInternal(t *testing.T) {
	if _, internal := toAPIError(errors.New("boom")); !internal {
		t.Fatal("an unknown error must map to an internal error")
	}
}
