package s3api

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// startUpload creates an upload of bkt/big through the API.
func startUpload(t *testing.T, e *env, hdr map[string]string) string {
	t.Helper()
	w := e.do(req{method: "POST", target: "/bkt/big?uploads", hdr: hdr})
	var r struct {
		XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
		Bucket   string
		Key      string
		UploadID string `xml:"UploadId"`
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &r); err != nil || w.Code != 200 {
		t.Fatalf("CreateMultipartUpload: %d %v %s", w.Code, err, w.Body.String())
	}
	if r.Bucket != "bkt" || r.Key != "big" || r.UploadID == "" {
		t.Fatalf("result %+v", r)
	}
	return r.UploadID
}

func uploadPart(t *testing.T, e *env, id string, n int, body string) string {
	t.Helper()
	w := e.do(req{method: "PUT", target: fmt.Sprintf("/bkt/big?partNumber=%d&uploadId=%s", n, id), body: body})
	if w.Code != 200 || w.Header().Get("ETag") == "" {
		t.Fatalf("UploadPart %d: %d %s", n, w.Code, w.Body.String())
	}
	return w.Header().Get("ETag")
}

func TestMultipartFlow(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	e.mustPut("bkt", "src", "0123456789", nil)
	id := startUpload(t, e, map[string]string{"x-amz-meta-m": "v", "x-amz-checksum-algorithm": "CRC32"})
	if e.st.uploads[id].up.ChecksumAlgorithm != "CRC32" || e.st.uploads[id].up.Meta.User["m"] != "v" {
		t.Fatalf("upload %+v", e.st.uploads[id].up)
	}
	etag1 := uploadPart(t, e, id, 1, "hello ")

	// UploadPartCopy with a range.
	w := e.do(req{method: "PUT", target: "/bkt/big?partNumber=2&uploadId=" + id,
		hdr: map[string]string{"x-amz-copy-source": "/bkt/src", "x-amz-copy-source-range": "bytes=2-4"}})
	var cp struct {
		XMLName      xml.Name `xml:"CopyPartResult"`
		ETag         string
		LastModified string
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &cp); err != nil || w.Code != 200 || cp.ETag == "" || cp.LastModified == "" {
		t.Fatalf("UploadPartCopy: %d %v %s", w.Code, err, w.Body.String())
	}
	if r := e.st.lastCopy.src.Range; r == nil || r.Start != 2 || r.End != 4 {
		t.Errorf("copy range %+v", r)
	}

	// ListParts.
	w = e.do(req{method: "GET", target: "/bkt/big?uploadId=" + id + "&max-parts=1"})
	var lp struct {
		XMLName              xml.Name `xml:"ListPartsResult"`
		UploadID             string   `xml:"UploadId"`
		IsTruncated          bool
		NextPartNumberMarker int
		MaxParts             int
		ChecksumAlgorithm    string
		Part                 []struct {
			PartNumber int
			ETag       string
			Size       int64
		}
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &lp); err != nil || w.Code != 200 {
		t.Fatalf("ListParts: %d %v", w.Code, err)
	}
	if lp.UploadID != id || !lp.IsTruncated || lp.NextPartNumberMarker != 1 || lp.MaxParts != 1 || len(lp.Part) != 1 ||
		lp.Part[0].ETag != etag1 || lp.Part[0].Size != 6 || lp.ChecksumAlgorithm != "CRC32" {
		t.Errorf("ListParts %+v", lp)
	}

	// ListMultipartUploads.
	w = e.do(req{method: "GET", target: "/bkt?uploads"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "<UploadId>"+id+"</UploadId>") || !strings.Contains(w.Body.String(), "<Key>big</Key>") {
		t.Errorf("ListMultipartUploads: %d %s", w.Code, w.Body.String())
	}

	// Complete: one ETag quoted, one not; a per-part checksum element.
	complete := fmt.Sprintf(`<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
	  <Part><PartNumber>1</PartNumber><ETag>%s</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part>
	  <Part><ETag>%s</ETag><PartNumber>2</PartNumber></Part></CompleteMultipartUpload>`, etag1, strings.Trim(cp.ETag, `"`))
	w = e.do(req{method: "POST", target: "/bkt/big?uploadId=" + id, body: complete, host: "gw.example:9000"})
	var cr struct {
		XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
		Location string
		Bucket   string
		Key      string
		ETag     string
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &cr); err != nil || w.Code != 200 {
		t.Fatalf("Complete: %d %v %s", w.Code, err, w.Body.String())
	}
	if cr.Bucket != "bkt" || cr.Key != "big" || !strings.HasSuffix(cr.ETag, `-2"`) || cr.Location != "http://gw.example:9000/bkt/big" {
		t.Errorf("Complete result %+v", cr)
	}
	if p := e.st.lastComplete; len(p) != 2 || p[0].ETag != strings.Trim(etag1, `"`) || p[0].Checksums["CRC32"] != "AAAAAA==" || p[1].Checksums != nil {
		t.Errorf("complete parts %+v", p)
	}

	// GET/HEAD with partNumber.
	w = e.do(req{method: "GET", target: "/bkt/big?partNumber=2"})
	if w.Code != http.StatusPartialContent || w.Body.String() != "234" || w.Header().Get("x-amz-mp-parts-count") != "2" ||
		w.Header().Get("Content-Range") != "bytes 6-8/9" {
		t.Errorf("GET part 2: %d %q %v", w.Code, w.Body.String(), w.Header())
	}
	w = e.do(req{method: "HEAD", target: "/bkt/big?partNumber=1"})
	if w.Code != http.StatusPartialContent || w.Body.Len() != 0 || w.Header().Get("x-amz-mp-parts-count") != "2" || w.Header().Get("Content-Length") != "6" {
		t.Errorf("HEAD part 1: %d %v", w.Code, w.Header())
	}
	w = e.do(req{method: "GET", target: "/bkt/big"})
	if w.Body.String() != "hello 234" || w.Header().Get("x-amz-mp-parts-count") != "" {
		t.Errorf("GET whole: %q %v", w.Body.String(), w.Header())
	}
}

func TestMultipartErrors(t *testing.T) {
	tests := []struct {
		name   string
		r      func(id string) req
		status int
		code   string
	}{
		{"part number 0", func(id string) req {
			return req{method: "PUT", target: "/bkt/big?partNumber=0&uploadId=" + id, body: "x"}
		}, 400, "InvalidArgument"},
		{"part number 10001", func(id string) req {
			return req{method: "PUT", target: "/bkt/big?partNumber=10001&uploadId=" + id, body: "x"}
		}, 400, "InvalidArgument"},
		{"part number missing", func(id string) req {
			return req{method: "PUT", target: "/bkt/big?uploadId=" + id, body: "x"}
		}, 400, "InvalidArgument"},
		{"no such upload", func(string) req {
			return req{method: "PUT", target: "/bkt/big?partNumber=1&uploadId=nope", body: "x"}
		}, 404, "NoSuchUpload"},
		{"bad copy range", func(id string) req {
			return req{method: "PUT", target: "/bkt/big?partNumber=1&uploadId=" + id, hdr: map[string]string{"x-amz-copy-source": "bkt/src", "x-amz-copy-source-range": "bytes=5-1"}}
		}, 400, "InvalidArgument"},
		{"complete malformed", func(id string) req {
			return req{method: "POST", target: "/bkt/big?uploadId=" + id, body: "<CompleteMultipartUpload><Part>"}
		}, 400, "MalformedXML"},
		{"complete empty", func(id string) req {
			return req{method: "POST", target: "/bkt/big?uploadId=" + id, body: "<CompleteMultipartUpload></CompleteMultipartUpload>"}
		}, 400, "MalformedXML"},
		{"complete no body", func(id string) req {
			return req{method: "POST", target: "/bkt/big?uploadId=" + id}
		}, 400, "MalformedXML"},
		{"complete wrong etag", func(id string) req {
			return req{method: "POST", target: "/bkt/big?uploadId=" + id, body: "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"00\"</ETag></Part></CompleteMultipartUpload>"}
		}, 400, "InvalidPart"},
		{"complete bad order", func(id string) req {
			return req{method: "POST", target: "/bkt/big?uploadId=" + id, body: "<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>a</ETag></Part><Part><PartNumber>1</PartNumber><ETag>b</ETag></Part></CompleteMultipartUpload>"}
		}, 400, "InvalidPartOrder"},
		{"bad checksum type", func(string) req {
			return req{method: "POST", target: "/bkt/big?uploads", hdr: map[string]string{"x-amz-checksum-type": "PARTIAL"}}
		}, 400, "InvalidRequest"},
		{"abort unknown", func(string) req {
			return req{method: "DELETE", target: "/bkt/big?uploadId=nope"}
		}, 404, "NoSuchUpload"},
		{"list parts bad max", func(id string) req {
			return req{method: "GET", target: "/bkt/big?uploadId=" + id + "&max-parts=-2"}
		}, 400, "InvalidArgument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("bkt")
			e.mustPut("bkt", "src", "0123456789", nil)
			id := startUpload(t, e, nil)
			uploadPart(t, e, id, 1, "x")
			expectError(t, e.do(tt.r(id)), tt.status, tt.code)
		})
	}
}

func TestAbortMultipartUpload(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	id := startUpload(t, e, nil)
	w := e.do(req{method: "DELETE", target: "/bkt/big?uploadId=" + id})
	if w.Code != http.StatusNoContent || w.Body.Len() != 0 {
		t.Fatalf("abort: %d %s", w.Code, w.Body.String())
	}
	if _, ok := e.st.uploads[id]; ok {
		t.Error("upload still there")
	}
}

// TestZeroMaxListPages: max-parts=0 and max-uploads=0 are empty, untruncated
// pages, as max-keys=0 is, though the upload and the bucket are still checked.
func TestZeroMaxListPages(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	id := startUpload(t, e, nil)
	uploadPart(t, e, id, 1, "x")
	tests := []struct {
		target, absent string
		status         int
		want           []string
	}{
		{"/bkt/big?uploadId=" + id + "&max-parts=0", "<Part>", 200,
			[]string{"<MaxParts>0</MaxParts>", "<IsTruncated>false</IsTruncated>", "<UploadId>" + id + "</UploadId>"}},
		{"/bkt?uploads&max-uploads=0", "<Upload>", 200,
			[]string{"<MaxUploads>0</MaxUploads>", "<IsTruncated>false</IsTruncated>", "<NextKeyMarker></NextKeyMarker>"}},
		{"/bkt/big?uploadId=nosuchupload&max-parts=0", "", 404, []string{"<Code>NoSuchUpload</Code>"}},
		{"/nobkt?uploads&max-uploads=0", "", 404, []string{"<Code>NoSuchBucket</Code>"}},
	}
	for _, tt := range tests {
		w := e.do(req{method: "GET", target: tt.target})
		body := w.Body.String()
		if w.Code != tt.status || tt.absent != "" && strings.Contains(body, tt.absent) {
			t.Errorf("GET %s: %d %s", tt.target, w.Code, body)
		}
		for _, s := range tt.want {
			if !strings.Contains(body, s) {
				t.Errorf("GET %s: %s lacks %s", tt.target, body, s)
			}
		}
	}
}
