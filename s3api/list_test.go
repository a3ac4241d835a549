package s3api

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

type v2Result struct {
	XMLName               xml.Name `xml:"ListBucketResult"`
	Name                  string
	Prefix                string
	Delimiter             string
	MaxKeys               int
	EncodingType          string
	KeyCount              int
	IsTruncated           bool
	ContinuationToken     string
	NextContinuationToken string
	StartAfter            string
	Marker                string
	NextMarker            string
	Contents              []struct {
		Key          string
		ETag         string
		LastModified string
		Size         int64
		StorageClass string
		Owner        *owner
	}
	CommonPrefixes []struct{ Prefix string }
}

func listEnv(t *testing.T, keys ...string) *env {
	t.Helper()
	e := newEnv(t, Config{})
	e.mustBucket("b")
	for _, k := range keys {
		e.st.objects["b"][k] = &memObject{data: []byte("x"), info: objInfo(k)}
	}
	return e
}

func TestListObjectsV2(t *testing.T) {
	keys := []string{"a b/c+d&e", "a b/f", "dir/x", "dir/y", "top", "é/1"}
	tests := []struct {
		name   string
		query  string
		check  func(t *testing.T, r v2Result, raw string)
		status int
		code   string
	}{
		{name: "empty prefix element", query: "list-type=2", check: func(t *testing.T, r v2Result, raw string) {
			if !strings.Contains(raw, "<Prefix></Prefix>") {
				t.Errorf("no empty <Prefix></Prefix>: %s", raw)
			}
			if r.KeyCount != 6 || len(r.Contents) != 6 || r.IsTruncated || r.MaxKeys != 1000 || r.Name != "b" {
				t.Errorf("result %+v", r)
			}
			c := r.Contents[0]
			if c.ETag != `"etag-a b/c+d&e"` || c.LastModified != "2024-05-06T07:08:09.123Z" || c.StorageClass != "STANDARD" || c.Size != 1 || c.Owner != nil {
				t.Errorf("entry %+v", c)
			}
			if strings.Contains(raw, "<Delimiter>") || strings.Contains(raw, "<StartAfter>") || strings.Contains(raw, "<EncodingType>") {
				t.Errorf("optional elements present: %s", raw)
			}
		}},
		{name: "url encoding", query: "list-type=2&encoding-type=url&delimiter=/&prefix=", check: func(t *testing.T, r v2Result, raw string) {
			if r.EncodingType != "url" || r.Delimiter != "/" {
				t.Errorf("EncodingType %q Delimiter %q", r.EncodingType, r.Delimiter)
			}
			var cps []string
			for _, p := range r.CommonPrefixes {
				cps = append(cps, p.Prefix)
			}
			if strings.Join(cps, ",") != "a%20b/,dir/,%C3%A9/" {
				t.Errorf("CommonPrefixes %v", cps)
			}
			if len(r.Contents) != 1 || r.Contents[0].Key != "top" || r.KeyCount != 4 {
				t.Errorf("contents %+v", r.Contents)
			}
		}},
		{name: "url encoding of keys", query: "list-type=2&encoding-type=url&prefix=a%20b/&start-after=a%20b/", check: func(t *testing.T, r v2Result, _ string) {
			if r.Prefix != "a%20b/" || r.StartAfter != "a%20b/" || len(r.Contents) != 2 || r.Contents[0].Key != "a%20b/c%2Bd%26e" {
				t.Errorf("result %+v", r)
			}
		}},
		{name: "pagination", query: "list-type=2&max-keys=2&fetch-owner=true", check: func(t *testing.T, r v2Result, _ string) {
			if !r.IsTruncated || r.KeyCount != 2 || r.NextContinuationToken == "" || r.Contents[0].Owner == nil || r.Contents[0].Owner.ID != "AKTEST" {
				t.Fatalf("page %+v", r)
			}
			raw, err := base64.StdEncoding.DecodeString(r.NextContinuationToken)
			if err != nil || string(raw) != "a b/f" {
				t.Errorf("token %q -> %q %v", r.NextContinuationToken, raw, err)
			}
		}},
		{name: "continuation", query: "list-type=2&max-keys=2&continuation-token=" + base64.StdEncoding.EncodeToString([]byte("a b/f")), check: func(t *testing.T, r v2Result, _ string) {
			if len(r.Contents) != 2 || r.Contents[0].Key != "dir/x" || r.ContinuationToken == "" {
				t.Errorf("page %+v", r)
			}
		}},
		{name: "start-after", query: "list-type=2&start-after=dir/y", check: func(t *testing.T, r v2Result, _ string) {
			if len(r.Contents) != 2 || r.Contents[0].Key != "top" || r.StartAfter != "dir/y" {
				t.Errorf("page %+v", r)
			}
		}},
		{name: "max-keys 0", query: "list-type=2&max-keys=0", check: func(t *testing.T, r v2Result, _ string) {
			if r.KeyCount != 0 || len(r.Contents) != 0 || r.MaxKeys != 0 {
				t.Errorf("page %+v", r)
			}
		}},
		{name: "max-keys clamped", query: "list-type=2&max-keys=5000", check: func(t *testing.T, r v2Result, _ string) {
			if r.MaxKeys != 1000 {
				t.Errorf("MaxKeys %d", r.MaxKeys)
			}
		}},
		{name: "max-keys negative", query: "list-type=2&max-keys=-1", status: 400, code: "InvalidArgument"},
		{name: "max-keys text", query: "list-type=2&max-keys=ten", status: 400, code: "InvalidArgument"},
		{name: "bad token", query: "list-type=2&continuation-token=%25%25", status: 400, code: "InvalidArgument"},
		{name: "bad encoding type", query: "list-type=2&encoding-type=base64", status: 400, code: "InvalidArgument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := listEnv(t, keys...)
			w := e.do(req{method: "GET", target: "/b?" + tt.query})
			if tt.code != "" {
				expectError(t, w, tt.status, tt.code)
				return
			}
			if w.Code != http.StatusOK {
				t.Fatalf("status %d %s", w.Code, w.Body.String())
			}
			var r v2Result
			if err := xml.Unmarshal(w.Body.Bytes(), &r); err != nil {
				t.Fatalf("xml: %v", err)
			}
			if !strings.Contains(w.Body.String(), `<ListBucketResult xmlns="`+s3NS+`">`) {
				t.Errorf("namespace: %s", w.Body.String())
			}
			tt.check(t, r, w.Body.String())
		})
	}
}

func TestListObjectsV1(t *testing.T) {
	keys := []string{"a/1", "a/2", "b", "c"}
	tests := []struct {
		name  string
		query string
		check func(t *testing.T, r v2Result, raw string)
	}{
		{"marker element always", "", func(t *testing.T, r v2Result, raw string) {
			if !strings.Contains(raw, "<Marker></Marker>") || !strings.Contains(raw, "<Prefix></Prefix>") {
				t.Errorf("empty elements missing: %s", raw)
			}
			if len(r.Contents) != 4 || r.Contents[0].Owner == nil {
				t.Errorf("contents %+v", r.Contents)
			}
		}},
		{"no NextMarker without delimiter", "max-keys=1", func(t *testing.T, r v2Result, raw string) {
			if !r.IsTruncated || strings.Contains(raw, "NextMarker") {
				t.Errorf("truncated=%v raw %s", r.IsTruncated, raw)
			}
		}},
		{"NextMarker with delimiter", "max-keys=1&delimiter=/", func(t *testing.T, r v2Result, _ string) {
			if !r.IsTruncated || r.NextMarker != "a/" || len(r.CommonPrefixes) != 1 {
				t.Errorf("page %+v", r)
			}
		}},
		{"marker", "marker=a/2", func(t *testing.T, r v2Result, _ string) {
			if r.Marker != "a/2" || len(r.Contents) != 2 || r.Contents[0].Key != "b" {
				t.Errorf("page %+v", r)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := listEnv(t, keys...)
			w := e.do(req{method: "GET", target: "/b?" + tt.query})
			if w.Code != 200 {
				t.Fatalf("status %d %s", w.Code, w.Body.String())
			}
			var r v2Result
			if err := xml.Unmarshal(w.Body.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			tt.check(t, r, w.Body.String())
		})
	}
}

func TestListBuckets(t *testing.T) {
	e := newEnv(t, Config{Region: "eu-west-1"})
	e.mustBucket("zeta")
	e.mustBucket("alpha")
	// S3 names the region only when the request has a parameter.
	for _, tt := range []struct{ target, region string }{{"/", ""}, {"/?max-buckets=10", "eu-west-1"}, {"/?prefix=", "eu-west-1"}} {
		w := e.do(req{method: "GET", target: tt.target})
		var r struct {
			XMLName xml.Name `xml:"ListAllMyBucketsResult"`
			Owner   owner
			Buckets []struct {
				Name, CreationDate, BucketRegion string
			} `xml:"Buckets>Bucket"`
		}
		if err := xml.Unmarshal(w.Body.Bytes(), &r); err != nil || w.Code != 200 {
			t.Fatalf("%s: %d %v %s", tt.target, w.Code, err, w.Body.String())
		}
		if len(r.Buckets) != 2 || r.Buckets[0].Name != "alpha" || r.Buckets[0].CreationDate != "2024-05-06T07:08:09.123Z" ||
			r.Buckets[0].BucketRegion != tt.region || r.Owner.ID != "AKTEST" {
			t.Errorf("%s: result %+v", tt.target, r)
		}
	}
}

func deleteBody(quiet bool, keys ...string) string {
	var b strings.Builder
	b.WriteString(`<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	if quiet {
		b.WriteString("<Quiet>true</Quiet>")
	}
	for _, k := range keys {
		fmt.Fprintf(&b, "<Object><Key>%s</Key></Object>", k)
	}
	b.WriteString("</Delete>")
	return b.String()
}

func TestDeleteObjects(t *testing.T) {
	body := deleteBody(false, "k1", "k2", "missing")
	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprintf("k%d", i)
	}
	manyBody := deleteBody(false, many...)
	tests := []struct {
		name    string
		body    string
		hdr     map[string]string
		status  int
		code    string
		deleted []string
		errKeys []string
	}{
		{name: "content-md5", body: body, hdr: map[string]string{"Content-MD5": b64md5(body)}, status: 200, deleted: []string{"k1", "k2", "missing"}},
		{name: "crc32 instead of md5", body: body, hdr: map[string]string{"x-amz-checksum-crc32": mustChecksum(t, "CRC32", body)}, status: 200, deleted: []string{"k1", "k2", "missing"}},
		{name: "crc64nvme instead of md5", body: body, hdr: map[string]string{"x-amz-checksum-crc64nvme": mustChecksum(t, "CRC64NVME", body)}, status: 200, deleted: []string{"k1", "k2", "missing"}},
		{name: "trailer checksum", body: body, hdr: map[string]string{"X-Fake-Trailer": "CRC32C=" + mustChecksum(t, "CRC32C", body)}, status: 200, deleted: []string{"k1", "k2", "missing"}},
		{name: "neither", body: body, status: 400, code: "InvalidRequest"},
		{name: "md5 mismatch", body: body, hdr: map[string]string{"Content-MD5": b64md5("other")}, status: 400, code: "BadDigest"},
		{name: "md5 malformed", body: body, hdr: map[string]string{"Content-MD5": "zz"}, status: 400, code: "InvalidDigest"},
		{name: "crc32 mismatch", body: body, hdr: map[string]string{"x-amz-checksum-crc32": mustChecksum(t, "CRC32", "other")}, status: 400, code: "BadDigest"},
		{name: "over 1000 keys", body: manyBody, hdr: map[string]string{"Content-MD5": b64md5(manyBody)}, status: 400, code: "MalformedXML"},
		{name: "malformed", body: "<Delete><Object>", hdr: map[string]string{"Content-MD5": b64md5("<Delete><Object>")}, status: 400, code: "MalformedXML"},
		{name: "wrong root", body: "<Remove/>", hdr: map[string]string{"Content-MD5": b64md5("<Remove/>")}, status: 400, code: "MalformedXML"},
		{name: "no objects", body: "<Delete/>", hdr: map[string]string{"Content-MD5": b64md5("<Delete/>")}, status: 400, code: "MalformedXML"},
		{name: "quiet with a per-key error", body: deleteBody(true, "k1", "locked"), hdr: map[string]string{"Content-MD5": b64md5(deleteBody(true, "k1", "locked"))}, status: 200, errKeys: []string{"locked"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := listEnv(t, "k1", "k2", "keep")
			e.st.failKeys = map[string]error{"locked": fmt.Errorf("lock: %w", errSlowDownForTest)}
			w := e.do(req{method: "POST", target: "/b?delete", body: tt.body, hdr: tt.hdr})
			if tt.code != "" {
				expectError(t, w, tt.status, tt.code)
				if len(e.st.objects["b"]) != 3 {
					t.Error("objects deleted despite the error")
				}
				if tt.name == "neither" && !strings.Contains(w.Body.String(), "Missing required header for this request: Content-MD5") {
					t.Errorf("message: %s", w.Body.String())
				}
				return
			}
			if w.Code != tt.status {
				t.Fatalf("status %d %s", w.Code, w.Body.String())
			}
			var r struct {
				XMLName xml.Name `xml:"DeleteResult"`
				Deleted []struct{ Key string }
				Error   []struct{ Key, Code, Message string }
			}
			if err := xml.Unmarshal(w.Body.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			var got, gotErr []string
			for _, d := range r.Deleted {
				got = append(got, d.Key)
			}
			for _, d := range r.Error {
				gotErr = append(gotErr, d.Key+":"+d.Code)
			}
			if strings.Join(got, ",") != strings.Join(tt.deleted, ",") {
				t.Errorf("deleted %v, want %v", got, tt.deleted)
			}
			var wantErr []string
			for _, k := range tt.errKeys {
				wantErr = append(wantErr, k+":SlowDown")
			}
			if strings.Join(gotErr, ",") != strings.Join(wantErr, ",") {
				t.Errorf("errors %v, want %v", gotErr, wantErr)
			}
			if _, ok := e.st.objects["b"]["k1"]; ok {
				t.Error("k1 not deleted")
			}
		})
	}
}
