package s3api

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/store"
)

func b64md5(s string) string {
	sum := md5.Sum([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

func mustChecksum(t *testing.T, alg, data string) string {
	t.Helper()
	v, err := computeChecksum(alg, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPutObjectHeaders(t *testing.T) {
	const body = "hello world"
	tests := []struct {
		name   string
		hdr    map[string]string
		status int
		code   string
		check  func(t *testing.T, e *env, w http.Header)
	}{
		{name: "metadata kept", hdr: map[string]string{
			"Content-Type": "text/plain", "Content-Encoding": "aws-chunked,gzip", "Content-Disposition": "attachment",
			"Content-Language": "de", "Cache-Control": "no-cache", "Expires": "Thu, 01 Dec 2094 16:00:00 GMT",
			"X-Amz-Meta-Color": "blue", "x-amz-meta-Some-Key": "v",
		}, status: 200, check: func(t *testing.T, e *env, h http.Header) {
			m := e.st.lastPut.Meta
			if m.ContentEncoding != "gzip" || m.ContentType != "text/plain" || m.User["color"] != "blue" || m.User["some-key"] != "v" ||
				m.ContentDisposition != "attachment" || m.ContentLanguage != "de" || m.CacheControl != "no-cache" || m.Expires == "" {
				t.Errorf("stored meta %+v", m)
			}
			if h.Get("ETag") != `"5eb63bbbe01eeed093cb22bb8f5acdc3"` {
				t.Errorf("ETag %q", h.Get("ETag"))
			}
		}},
		{name: "content-md5 ok", hdr: map[string]string{"Content-MD5": b64md5(body)}, status: 200, check: func(t *testing.T, e *env, _ http.Header) {
			if len(e.st.lastPut.ContentMD5) != 16 {
				t.Errorf("ContentMD5 not passed as raw bytes: %x", e.st.lastPut.ContentMD5)
			}
		}},
		{name: "content-md5 malformed", hdr: map[string]string{"Content-MD5": "not-base64!"}, status: 400, code: "InvalidDigest"},
		{name: "content-md5 empty", hdr: map[string]string{"Content-MD5": ""}, status: 400, code: "InvalidDigest"},
		{name: "content-md5 wrong length", hdr: map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString([]byte("short"))}, status: 400, code: "InvalidDigest"},
		{name: "content-md5 mismatch", hdr: map[string]string{"Content-MD5": b64md5("other")}, status: 400, code: "BadDigest"},
		{name: "crc32 header", hdr: map[string]string{"x-amz-checksum-crc32": mustChecksum(t, "CRC32", body), "x-amz-sdk-checksum-algorithm": "crc32"}, status: 200, check: func(t *testing.T, e *env, h http.Header) {
			if e.st.lastPut.ChecksumAlgorithm != "CRC32" || e.st.lastPut.Checksums["CRC32"] == "" {
				t.Errorf("opts %+v", e.st.lastPut)
			}
			if h.Get("x-amz-checksum-crc32") != mustChecksum(t, "CRC32", body) {
				t.Errorf("response checksum %q", h.Get("x-amz-checksum-crc32"))
			}
		}},
		{name: "crc32 mismatch", hdr: map[string]string{"x-amz-checksum-crc32": mustChecksum(t, "CRC32", "x")}, status: 400, code: "BadDigest"},
		{name: "checksum not base64", hdr: map[string]string{"x-amz-checksum-sha256": "@@"}, status: 400, code: "InvalidRequest"},
		{name: "two checksums", hdr: map[string]string{"x-amz-checksum-crc32": mustChecksum(t, "CRC32", body), "x-amz-checksum-crc32c": mustChecksum(t, "CRC32C", body)}, status: 400, code: "InvalidRequest"},
		{name: "unknown algorithm", hdr: map[string]string{"x-amz-sdk-checksum-algorithm": "MD4"}, status: 400, code: "InvalidRequest"},
		{name: "algorithm only", hdr: map[string]string{"x-amz-checksum-algorithm": "SHA256"}, status: 200, check: func(t *testing.T, _ *env, h http.Header) {
			if h.Get("x-amz-checksum-sha256") != mustChecksum(t, "SHA256", body) {
				t.Errorf("sha256 %q", h.Get("x-amz-checksum-sha256"))
			}
		}},
		{name: "trailer", hdr: map[string]string{"X-Fake-Trailer": "CRC64NVME=" + mustChecksum(t, "CRC64NVME", body)}, status: 200, check: func(t *testing.T, e *env, h http.Header) {
			if e.st.lastPut.TrailerChecksum == nil || h.Get("x-amz-checksum-crc64nvme") == "" {
				t.Error("trailer checksum not passed/returned")
			}
		}},
		{name: "public acl", hdr: map[string]string{"x-amz-acl": "public-read"}, status: 501, code: "NotImplemented"},
		{name: "private acl", hdr: map[string]string{"x-amz-acl": "private"}, status: 200},
		{name: "metadata too large", hdr: map[string]string{"x-amz-meta-big": strings.Repeat("v", 2100)}, status: 400, code: "MetadataTooLarge"},
		{name: "conditional write", hdr: map[string]string{"If-None-Match": "*"}, status: 200, check: func(t *testing.T, e *env, _ http.Header) {
			if e.st.lastPut.IfNoneMatch != "*" {
				t.Errorf("IfNoneMatch %q", e.st.lastPut.IfNoneMatch)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("b")
			w := e.do(req{method: "PUT", target: "/b/k", body: body, hdr: tt.hdr})
			if tt.code != "" {
				expectError(t, w, tt.status, tt.code)
				if _, ok := e.st.objects["b"]["k"]; ok {
					t.Error("object stored despite the error")
				}
				return
			}
			if w.Code != tt.status {
				t.Fatalf("status %d: %s", w.Code, w.Body.String())
			}
			if e.st.lastPut.Size != int64(len(body)) {
				t.Errorf("Size = %d", e.st.lastPut.Size)
			}
			if tt.check != nil {
				tt.check(t, e, w.Header())
			}
		})
	}
}

func TestGetObject(t *testing.T) {
	const body = "0123456789"
	crc := ""
	tests := []struct {
		name    string
		target  string
		method  string
		hdr     map[string]string
		status  int
		body    string
		headers map[string]string
		absent  []string
	}{
		{name: "whole", target: "/b/k", status: 200, body: body, headers: map[string]string{
			"Content-Length": "10", "ETag": `"781e5e245d69b566979b86e28d23f2c7"`, "Last-Modified": "Mon, 06 May 2024 07:08:09 GMT",
			"Content-Type": "text/plain", "Accept-Ranges": "bytes", "Content-Encoding": "gzip",
		}, absent: []string{"x-amz-checksum-crc32"}},
		{name: "checksum mode", target: "/b/k", hdr: map[string]string{"x-amz-checksum-mode": "ENABLED"}, status: 200, body: body,
			headers: map[string]string{"x-amz-checksum-crc32": "CRC", "x-amz-checksum-type": "FULL_OBJECT"}},
		{name: "range", target: "/b/k", hdr: map[string]string{"Range": "bytes=2-4"}, status: 206, body: "234",
			headers: map[string]string{"Content-Range": "bytes 2-4/10", "Content-Length": "3"}},
		{name: "range no checksum", target: "/b/k", hdr: map[string]string{"Range": "bytes=2-4", "x-amz-checksum-mode": "ENABLED"}, status: 206, body: "234",
			absent: []string{"x-amz-checksum-crc32"}},
		{name: "suffix range", target: "/b/k", hdr: map[string]string{"Range": "bytes=-3"}, status: 206, body: "789",
			headers: map[string]string{"Content-Range": "bytes 7-9/10"}},
		{name: "open range", target: "/b/k", hdr: map[string]string{"Range": "bytes=8-"}, status: 206, body: "89",
			headers: map[string]string{"Content-Range": "bytes 8-9/10"}},
		{name: "unsatisfiable", target: "/b/k", hdr: map[string]string{"Range": "bytes=10-"}, status: 416,
			headers: map[string]string{"Content-Range": "bytes */10"}},
		{name: "unsatisfiable HEAD", method: "HEAD", target: "/b/k", hdr: map[string]string{"Range": "bytes=20-30"}, status: 416,
			headers: map[string]string{"Content-Range": "bytes */10"}},
		{name: "if-none-match 304", target: "/b/k", hdr: map[string]string{"If-None-Match": `"781e5e245d69b566979b86e28d23f2c7"`}, status: 304,
			headers: map[string]string{"ETag": `"781e5e245d69b566979b86e28d23f2c7"`, "Last-Modified": "Mon, 06 May 2024 07:08:09 GMT"}},
		{name: "if-modified-since 304", target: "/b/k", hdr: map[string]string{"If-Modified-Since": "Tue, 07 May 2024 00:00:00 GMT"}, status: 304,
			headers: map[string]string{"ETag": `"781e5e245d69b566979b86e28d23f2c7"`}},
		{name: "if-match 412", target: "/b/k", hdr: map[string]string{"If-Match": `"nope"`}, status: 412},
		{name: "if-unmodified-since 412", target: "/b/k", hdr: map[string]string{"If-Unmodified-Since": "Sun, 05 May 2024 00:00:00 GMT"}, status: 412},
		{name: "overrides", target: "/b/k?response-content-type=image/png&response-content-disposition=inline&response-cache-control=max-age%3D5&response-expires=x&response-content-language=fr&response-content-encoding=br", status: 200, body: body,
			headers: map[string]string{"Content-Type": "image/png", "Content-Disposition": "inline", "Cache-Control": "max-age=5", "Expires": "x", "Content-Language": "fr", "Content-Encoding": "br"}},
		{name: "head", method: "HEAD", target: "/b/k", status: 200, headers: map[string]string{"Content-Length": "10", "ETag": `"781e5e245d69b566979b86e28d23f2c7"`}},
		{name: "partNumber of single put", target: "/b/k?partNumber=1", status: 200, body: body},
		{name: "partNumber out of range", target: "/b/k?partNumber=10001", status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("b")
			crc = mustChecksum(t, "CRC32", body)
			e.mustPut("b", "k", body, map[string]string{"Content-Type": "text/plain", "Content-Encoding": "gzip",
				"x-amz-meta-color": "blue", "x-amz-checksum-crc32": crc})
			method := tt.method
			if method == "" {
				method = "GET"
			}
			w := e.do(req{method: method, target: tt.target, hdr: tt.hdr})
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body.String())
			}
			if tt.status == 304 || method == "HEAD" {
				if w.Body.Len() != 0 {
					t.Errorf("%d/%s answer has a body: %q", w.Code, method, w.Body.String())
				}
			} else if tt.status >= 400 {
				var eb errorBody
				if err := xml.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Code == "" {
					t.Errorf("error body %q", w.Body.String())
				}
				if tt.status == 416 && eb.Code != "InvalidRange" {
					t.Errorf("code %q", eb.Code)
				}
			} else if w.Body.String() != tt.body {
				t.Errorf("body %q, want %q", w.Body.String(), tt.body)
			}
			for k, v := range tt.headers {
				if v == "CRC" {
					v = crc
				}
				if got := w.Header().Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			for _, k := range tt.absent {
				if got := w.Header().Get(k); got != "" {
					t.Errorf("header %s = %q, want none", k, got)
				}
			}
			if tt.status == 200 || tt.status == 206 {
				// User metadata goes out in AWS's lower case, not Go's canonical form.
				//lint:ignore SA1008 the gateway sets this name in lower case on purpose (as AWS sends it)
				if got := w.Header()["x-amz-meta-color"]; len(got) != 1 || got[0] != "blue" {
					t.Errorf("x-amz-meta-color = %q (headers %v), want [blue] under the lower-case name", got, w.Header())
				}
			}
		})
	}
}

func TestDeleteObject(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("b")
	e.mustPut("b", "k", "x", nil)
	for i := range 2 { // deleting a missing key succeeds too
		if w := e.do(req{method: "DELETE", target: "/b/k"}); w.Code != http.StatusNoContent || w.Body.Len() != 0 {
			t.Fatalf("delete #%d: %d %s", i, w.Code, w.Body.String())
		}
	}
	if _, ok := e.st.objects["b"]["k"]; ok {
		t.Error("object still there")
	}
}

func TestCopyObject(t *testing.T) {
	tests := []struct {
		name   string
		target string
		hdr    map[string]string
		status int
		code   string
		check  func(t *testing.T, e *env)
	}{
		{name: "plain", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "b/src%20key"}, status: 200, check: func(t *testing.T, e *env) {
			if e.st.lastCopy.src.Key != "src key" || e.st.lastCopy.src.Bucket != "b" || e.st.lastCopy.opts.ReplaceMeta {
				t.Errorf("copy %+v", e.st.lastCopy)
			}
			if e.st.objects["b"]["dst"].info.Meta.User["a"] != "1" {
				t.Error("COPY directive did not keep metadata")
			}
		}},
		{name: "leading slash and null version", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "/b/src%20key?versionId=null"}, status: 200},
		{name: "other version", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "/b/src%20key?versionId=3"}, status: 400, code: "InvalidArgument"},
		{name: "no key", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "/b"}, status: 400, code: "InvalidArgument"},
		{name: "bad escape", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "/b/%zz"}, status: 400, code: "InvalidArgument"},
		{name: "replace", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "b/src%20key", "x-amz-metadata-directive": "REPLACE", "x-amz-meta-z": "9", "Content-Type": "a/b"}, status: 200, check: func(t *testing.T, e *env) {
			m := e.st.objects["b"]["dst"].info.Meta
			if m.User["z"] != "9" || m.User["a"] != "" || m.ContentType != "a/b" {
				t.Errorf("replaced meta %+v", m)
			}
		}},
		{name: "bad directive", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "b/src%20key", "x-amz-metadata-directive": "MOVE"}, status: 400, code: "InvalidArgument"},
		{name: "self copy without change", target: "/b/src%20key", hdr: map[string]string{"x-amz-copy-source": "b/src%20key"}, status: 400, code: "InvalidRequest"},
		{name: "self copy replacing metadata", target: "/b/src%20key", hdr: map[string]string{"x-amz-copy-source": "b/src%20key", "x-amz-metadata-directive": "REPLACE"}, status: 200},
		{name: "if-match fails", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "b/src%20key", "x-amz-copy-source-if-match": `"zzz"`}, status: 412, code: "PreconditionFailed"},
		{name: "if-none-match passes", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "b/src%20key", "x-amz-copy-source-if-none-match": `"zzz"`, "x-amz-copy-source-if-unmodified-since": "Tue, 07 May 2024 00:00:00 GMT"}, status: 200, check: func(t *testing.T, e *env) {
			c := e.st.lastCopy.src.Cond
			if c.IfNoneMatch != `"zzz"` || c.IfUnmodifiedSince == nil {
				t.Errorf("conditions %+v", c)
			}
		}},
		{name: "missing source", target: "/b/dst", hdr: map[string]string{"x-amz-copy-source": "b/none"}, status: 404, code: "NoSuchKey"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("b")
			e.mustPut("b", "src%20key", "data", map[string]string{"x-amz-meta-a": "1"})
			w := e.do(req{method: "PUT", target: tt.target, hdr: tt.hdr})
			if tt.code != "" {
				expectError(t, w, tt.status, tt.code)
				return
			}
			if w.Code != tt.status {
				t.Fatalf("status %d: %s", w.Code, w.Body.String())
			}
			var res struct {
				XMLName      xml.Name `xml:"CopyObjectResult"`
				ETag         string
				LastModified string
			}
			if err := xml.Unmarshal(w.Body.Bytes(), &res); err != nil {
				t.Fatalf("CopyObjectResult: %v %s", err, w.Body.String())
			}
			if res.ETag != `"8d777f385d3dfec8815d20f7496026dc"` || res.LastModified != "2024-05-06T07:08:09.123Z" {
				t.Errorf("result %+v", res)
			}
			if !strings.Contains(w.Body.String(), `xmlns="`+s3NS+`"`) {
				t.Error("namespace missing")
			}
			if tt.check != nil {
				tt.check(t, e)
			}
		})
	}
}

func TestParseCopyRange(t *testing.T) {
	tests := []struct {
		in   string
		want *store.ByteRange
		ok   bool
	}{
		{"", nil, true},
		{"bytes=0-9", &store.ByteRange{Start: 0, End: 9}, true},
		{"bytes=5-5", &store.ByteRange{Start: 5, End: 5}, true},
		{"bytes=5-4", nil, false},
		{"bytes=-4", nil, false},
		{"bytes=4-", nil, false},
		{"items=0-1", nil, false},
		{"bytes=a-b", nil, false},
	}
	for _, tt := range tests {
		got, err := parseCopyRange(tt.in)
		if (err == nil) != tt.ok || (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("parseCopyRange(%q) = %v, %v", tt.in, got, err)
		}
	}
}
