package s3api

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/store"
)

// expectError checks an S3 error answer: status, code, XML shape, request id.
func expectError(t *testing.T, w *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body.String())
	}
	var e errorBody
	if err := xml.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body is not XML: %v: %q", err, w.Body.String())
	}
	if e.Code != code {
		t.Fatalf("code = %q, want %q (message %q)", e.Code, code, e.Message)
	}
	if e.Message == "" {
		t.Errorf("error %s has an empty message", code)
	}
	if id := w.Header().Get("x-amz-request-id"); id == "" || e.RequestID != id {
		t.Errorf("RequestId %q does not match header %q", e.RequestID, id)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/xml" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestRoutingKeys(t *testing.T) {
	tests := []struct {
		name       string
		host, path string
		bucket     string
		key        string
	}{
		{"plain", "", "/bkt/a/b.txt", "bkt", "a/b.txt"},
		{"double slash", "", "/bkt/a//b", "bkt", "a//b"},
		{"leading slash", "", "/bkt//lead", "bkt", "/lead"},
		{"dot segments", "", "/bkt/a/./b/../c", "bkt", "a/./b/../c"},
		{"dot", "", "/bkt/.", "bkt", "."},
		{"dotdot", "", "/bkt/..", "bkt", ".."},
		{"encoded slash", "", "/bkt/a%2Fb", "bkt", "a/b"},
		{"plus stays plus", "", "/bkt/a+b", "bkt", "a+b"},
		{"space", "", "/bkt/a%20b", "bkt", "a b"},
		{"unicode", "", "/bkt/%E2%9C%93/%C3%A9", "bkt", "✓/é"},
		{"unescaped once", "", "/bkt/%252F", "bkt", "%2F"},
		{"trailing slash", "", "/bkt/dir/", "bkt", "dir/"},
		{"vhost", "bkt.s3.local:9000", "/a//b", "bkt", "a//b"},
		{"vhost dotted bucket", "my.bkt.s3.local", "/k%2Fx", "my.bkt", "k/x"},
		{"base domain is path style", "s3.local:9000", "/bkt/k", "bkt", "k"},
		{"other host is path style", "127.0.0.1:9000", "/bkt/k", "bkt", "k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{Domain: "s3.local"})
			e.st.buckets[tt.bucket] = store.Bucket{Name: tt.bucket}
			e.st.objects[tt.bucket] = map[string]*memObject{}
			w := e.do(req{method: "PUT", target: tt.path, host: tt.host, body: "x"})
			if w.Code != http.StatusOK {
				t.Fatalf("PUT %s: %d %s", tt.path, w.Code, w.Body.String())
			}
			if _, ok := e.st.objects[tt.bucket][tt.key]; !ok || len(e.st.objects[tt.bucket]) != 1 {
				t.Fatalf("stored keys %v, want only %q", keysOf(e.st.objects[tt.bucket]), tt.key)
			}
			// The exported resolver agrees with the router.
			hr := httptest.NewRequest("PUT", tt.path, nil)
			if tt.host != "" {
				hr.Host = tt.host
			}
			op, b, k, ok := ResolveOperation(hr, "s3.local")
			if !ok || op != "PutObject" || b != tt.bucket || k != tt.key {
				t.Errorf("ResolveOperation = %q %q %q %v, want PutObject %q %q", op, b, k, ok, tt.bucket, tt.key)
			}
			// And GET reads the same key back.
			if w := e.do(req{method: "GET", target: tt.path, host: tt.host}); w.Code != 200 || w.Body.String() != "x" {
				t.Errorf("GET %s: %d %q", tt.path, w.Code, w.Body.String())
			}
		})
	}
}

func keysOf(m map[string]*memObject) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestRoutingVHostBucketOps(t *testing.T) {
	e := newEnv(t, Config{Domain: "s3.local"})
	if w := e.do(req{method: "PUT", target: "/", host: "vb.s3.local"}); w.Code != 200 {
		t.Fatalf("vhost CreateBucket: %d %s", w.Code, w.Body.String())
	}
	if _, ok := e.st.buckets["vb"]; !ok {
		t.Fatal("bucket vb not created through virtual host")
	}
	w := e.do(req{method: "GET", target: "/?list-type=2", host: "vb.s3.local:9000"})
	if w.Code != 200 || !strings.Contains(w.Body.String(), "<Name>vb</Name>") {
		t.Fatalf("vhost ListObjectsV2: %d %s", w.Code, w.Body.String())
	}
}

func TestRoutingInvalidURI(t *testing.T) {
	e := newEnv(t, Config{})
	w := e.do(req{method: "GET", target: "//nobucket"})
	expectError(t, w, http.StatusBadRequest, "InvalidURI")
	if op, _, _, ok := ResolveOperation(httptest.NewRequest("GET", "//nobucket", nil), ""); ok || op != opUnknown {
		t.Errorf("ResolveOperation = %q, %v; want Unknown, false", op, ok)
	}
	if !strings.Contains(e.logText(), "op=Unknown") {
		t.Errorf("access log does not name the operation Unknown:\n%s", e.logText())
	}
}

func TestOperation(t *testing.T) {
	copyHdr := http.Header{"X-Amz-Copy-Source": {"/b/k"}}
	tests := []struct {
		method, bucket, key, query string
		hdr                        http.Header
		want                       string
	}{
		{"GET", "", "", "", nil, "ListBuckets"},
		{"PUT", "", "", "", nil, opUnknown},
		{"PATCH", "b", "k", "", nil, opUnknown},
		{"PUT", "b", "", "", nil, "CreateBucket"},
		{"HEAD", "b", "", "", nil, "HeadBucket"},
		{"DELETE", "b", "", "", nil, "DeleteBucket"},
		{"GET", "b", "", "location", nil, "GetBucketLocation"},
		{"GET", "b", "", "list-type=2&prefix=a", nil, "ListObjectsV2"},
		{"GET", "b", "", "prefix=a", nil, "ListObjects"},
		{"GET", "b", "", "uploads", nil, "ListMultipartUploads"},
		{"GET", "b", "", "versions", nil, "ListObjectVersions"},
		{"POST", "b", "", "delete", nil, "DeleteObjects"},
		{"POST", "b", "", "", nil, "PostObject"},
		{"GET", "b", "", "versioning", nil, "GetBucketVersioning"},
		{"PUT", "b", "", "policy", nil, "PutBucketPolicy"},
		{"DELETE", "b", "", "cors", nil, "DeleteBucketCors"},
		{"GET", "b", "", "object-lock", nil, "GetObjectLockConfiguration"},
		{"GET", "b", "k", "", nil, "GetObject"},
		{"HEAD", "b", "k", "partNumber=1", nil, "HeadObject"},
		{"PUT", "b", "k", "", nil, "PutObject"},
		{"PUT", "b", "k", "", copyHdr, "CopyObject"},
		{"DELETE", "b", "k", "", nil, "DeleteObject"},
		{"POST", "b", "k", "uploads", nil, "CreateMultipartUpload"},
		{"PUT", "b", "k", "partNumber=1&uploadId=u", nil, "UploadPart"},
		{"PUT", "b", "k", "partNumber=1&uploadId=u", copyHdr, "UploadPartCopy"},
		{"POST", "b", "k", "uploadId=u", nil, "CompleteMultipartUpload"},
		{"DELETE", "b", "k", "uploadId=u", nil, "AbortMultipartUpload"},
		{"GET", "b", "k", "uploadId=u", nil, "ListParts"},
		{"GET", "b", "k", "acl", nil, "GetObjectAcl"},
		{"PUT", "b", "k", "tagging", nil, "PutObjectTagging"},
		{"POST", "b", "k", "restore", nil, "RestoreObject"},
		{"POST", "b", "k", "select&select-type=2", nil, "SelectObjectContent"},
		{"GET", "b", "k", "attributes", nil, "GetObjectAttributes"},
		// Newer AWS subresources are named (and answer NotImplemented).
		{"DELETE", "b", "", "metadataTable", nil, "DeleteBucketMetadataTableConfiguration"},
		{"PUT", "b", "k", "renameObject", nil, "RenameObject"},
		{"PUT", "b", "k", "encryption", nil, "PutObjectEncryption"},
		// A selector on the wrong resource or method never reaches the
		// plain operation.
		{"DELETE", "b", "", "versions", nil, opUnknown},
		{"DELETE", "b", "", "retention", nil, opUnknown},
		{"PUT", "b", "", "uploads", nil, opUnknown},
		{"PUT", "b", "k", "policy", nil, opUnknown},
		{"PUT", "b", "k", "policy", copyHdr, opUnknown},
		{"DELETE", "b", "k", "versioning", nil, opUnknown},
		{"HEAD", "b", "k", "uploadId=u", nil, opUnknown},
		// An unknown parameter without a value selects an API s3gate lacks;
		// one with a value is ignored, as AWS ignores it.
		{"DELETE", "b", "", "futureApi", nil, opUnsupportedQuery},
		{"PUT", "b", "k", "futureApi=", nil, opUnsupportedQuery},
		{"GET", "b", "", "futureApi", nil, opUnsupportedQuery},
		{"PUT", "b", "k", "x-id=PutObject&cachebust=1", nil, "PutObject"},
		{"GET", "b", "", "list-type=2&prefix=&delimiter=&encoding-type=url&start-after=&continuation-token=&fetch-owner=", nil, "ListObjectsV2"},
		{"GET", "b", "k", "versionId=&response-content-type=&X-Amz-Security-Token=", nil, "GetObject"},
	}
	for _, tt := range tests {
		q, _ := url.ParseQuery(tt.query)
		h := tt.hdr
		if h == nil {
			h = http.Header{}
		}
		if got := Operation(tt.method, tt.bucket, tt.key, q, h); got != tt.want {
			t.Errorf("Operation(%s %s/%s?%s) = %q, want %q", tt.method, tt.bucket, tt.key, tt.query, got, tt.want)
		}
	}
}

func TestToAPIError(t *testing.T) {
	tests := []struct {
		err      error
		code     string
		status   int
		internal bool
	}{
		{store.ErrNoSuchBucket, "NoSuchBucket", 404, false},
		{fmt.Errorf("ctx: %w", store.ErrBucketExists), "BucketAlreadyOwnedByYou", 409, false},
		{store.ErrBucketNotEmpty, "BucketNotEmpty", 409, false},
		{store.ErrInvalidBucketName, "InvalidBucketName", 400, false},
		{store.ErrNoSuchKey, "NoSuchKey", 404, false},
		{store.ErrInvalidKey, "InvalidArgument", 400, false},
		{store.ErrKeyTooLong, "KeyTooLongError", 400, false},
		{store.ErrNoSuchUpload, "NoSuchUpload", 404, false},
		{store.ErrInvalidPart, "InvalidPart", 400, false},
		{store.ErrInvalidPartOrder, "InvalidPartOrder", 400, false},
		{store.ErrEntityTooSmall, "EntityTooSmall", 400, false},
		{store.ErrEntityTooLarge, "EntityTooLarge", 400, false},
		{fmt.Errorf("stage: %w", store.ErrBadDigest), "BadDigest", 400, false},
		{store.ErrIncompleteBody, "IncompleteBody", 400, false},
		{store.ErrPreconditionFailed, "PreconditionFailed", 412, false},
		{store.ErrNotModified, "NotModified", 304, false},
		{store.ErrInvalidRange, "InvalidRange", 416, false},
		{store.ErrInvalidArgument, "InvalidArgument", 400, false},
		{store.ErrInvalidRequest, "InvalidRequest", 400, false},
		{store.ErrSlowDown, "SlowDown", 503, false},
		{store.ErrUnavailable, "ServiceUnavailable", 503, false},
		{store.ErrConditionalConflict, "ConditionalRequestConflict", 409, false},
		{fmt.Errorf("read: %w", &auth.Error{Code: "SignatureDoesNotMatch"}), "SignatureDoesNotMatch", 403, false},
		{&auth.Error{Code: "XAmzContentSHA256Mismatch"}, "XAmzContentSHA256Mismatch", 400, false},
		{&auth.Error{Code: "RequestTimeTooSkewed"}, "RequestTimeTooSkewed", 403, false},
		{&auth.Error{Code: "InvalidAccessKeyId"}, "InvalidAccessKeyId", 403, false},
		{&auth.Error{Code: "AuthorizationHeaderMalformed"}, "AuthorizationHeaderMalformed", 400, false},
		{&auth.Error{Code: "SomethingNew"}, "SomethingNew", 403, false},
		{fmt.Errorf("x: %w", errMalformedXML), "MalformedXML", 400, false},
		{fmt.Errorf("body: %w", errors.New("unexpected")), "InternalError", 500, true},
	}
	for _, tt := range tests {
		e, internal := toAPIError(tt.err)
		if e.Code != tt.code || e.Status != tt.status || internal != tt.internal {
			t.Errorf("toAPIError(%v) = %s %d internal=%v, want %s %d %v", tt.err, e.Code, e.Status, internal, tt.code, tt.status, tt.internal)
		}
	}
}

func TestErrorAnswers(t *testing.T) {
	tests := []struct {
		name     string
		r        req
		setup    func(e *env)
		status   int
		code     string
		noBody   bool
		wantHdrs map[string]string
	}{
		{name: "anonymous", r: req{method: "GET", target: "/", hdr: map[string]string{"X-Fake-Auth": "anonymous"}}, status: 403, code: "AccessDenied"},
		{name: "bad signature", r: req{method: "GET", target: "/b", hdr: map[string]string{"X-Fake-Auth": "SignatureDoesNotMatch"}}, status: 403, code: "SignatureDoesNotMatch"},
		{name: "skew", r: req{method: "PUT", target: "/b/k", hdr: map[string]string{"X-Fake-Auth": "RequestTimeTooSkewed"}}, status: 403, code: "RequestTimeTooSkewed"},
		{name: "no such bucket", r: req{method: "GET", target: "/nob/k"}, status: 404, code: "NoSuchBucket"},
		{name: "no such key", r: req{method: "GET", target: "/b/none"}, status: 404, code: "NoSuchKey"},
		{name: "HEAD no such key has no body", r: req{method: "HEAD", target: "/b/none"}, status: 404, noBody: true},
		{name: "HEAD bucket missing has no body", r: req{method: "HEAD", target: "/nob"}, status: 404, noBody: true},
		{name: "HEAD auth error has no body", r: req{method: "HEAD", target: "/b/k", hdr: map[string]string{"X-Fake-Auth": "AccessDenied"}}, status: 403, noBody: true},
		{name: "body signature mismatch while reading", r: req{method: "PUT", target: "/b/k", body: "data", hdr: map[string]string{"X-Fake-Body-Error": "XAmzContentSHA256Mismatch"}}, status: 400, code: "XAmzContentSHA256Mismatch"},
		{name: "chunk signature mismatch in XML body", r: req{method: "POST", target: "/b?delete", body: "<Delete/>", hdr: map[string]string{"X-Fake-Body-Error": "SignatureDoesNotMatch"}}, status: 403, code: "SignatureDoesNotMatch"},
		{name: "bucket not empty", r: req{method: "DELETE", target: "/b"}, setup: func(e *env) { e.mustPut("b", "k", "x", nil) }, status: 409, code: "BucketNotEmpty"},
		{name: "internal error hides cause", r: req{method: "GET", target: "/"}, setup: func(e *env) { e.st.injected = errors.New("pq: secret internals") }, status: 500, code: "InternalError"},
		{name: "unavailable", r: req{method: "HEAD", target: "/b"}, setup: func(e *env) { e.st.injected = fmt.Errorf("pin: %w", store.ErrUnavailable) }, status: 503, noBody: true},
		{name: "key too long", r: req{method: "PUT", target: "/b/" + strings.Repeat("k", 1025), body: "x"}, status: 400, code: "KeyTooLongError"},
		{name: "invalid bucket name", r: req{method: "PUT", target: "/BAD"}, status: 400, code: "InvalidBucketName"},
		{name: "method not allowed", r: req{method: "PATCH", target: "/b/k"}, status: 405, code: "MethodNotAllowed"},
		{name: "version id", r: req{method: "GET", target: "/b/k?versionId=abc"}, status: 400, code: "InvalidArgument"},
		{name: "range and partNumber", r: req{method: "GET", target: "/b/k?partNumber=1", hdr: map[string]string{"Range": "bytes=0-1"}}, setup: func(e *env) { e.mustPut("b", "k", "xyz", nil) }, status: 400, code: "InvalidRequest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("b")
			if tt.setup != nil {
				tt.setup(e)
			}
			w := e.do(tt.r)
			if w.Header().Get("x-amz-request-id") == "" || w.Header().Get("x-amz-id-2") == "" {
				t.Error("missing x-amz-request-id / x-amz-id-2")
			}
			if tt.noBody {
				if w.Code != tt.status || w.Body.Len() != 0 {
					t.Fatalf("got %d with %d body bytes, want %d and no body", w.Code, w.Body.Len(), tt.status)
				}
				return
			}
			expectError(t, w, tt.status, tt.code)
			if tt.code == "InternalError" {
				if strings.Contains(w.Body.String(), "secret internals") {
					t.Error("internal cause leaked to the client")
				}
				if !strings.Contains(e.logText(), "secret internals") {
					t.Error("internal cause not logged")
				}
			}
		})
	}
}

func TestAccessLog(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("b")
	e.mustPut("b", "k", "hello", map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=AKTEST/x, Signature=deadbeefcafe"})
	w := e.do(req{method: "GET", target: "/b/k"})
	logs := e.logText()
	id := w.Header().Get("x-amz-request-id")
	for _, want := range []string{"request_id=" + id, "op=GetObject", "bucket=b", "key=k", "status=200", "bytes_out=5", "access_key=AKTEST", "op=PutObject", "bytes_in=5"} {
		if !strings.Contains(logs, want) {
			t.Errorf("access log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "deadbeefcafe") {
		t.Error("signature leaked into the log")
	}
}

func TestAbortMidStream(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("b")
	e.mustPut("b", "k", strings.Repeat("z", 1000), nil)
	e.st.readErr, e.st.readErrAfter = errors.New("pin lost"), 100
	w := httptest.NewRecorder()
	func() {
		defer func() {
			if rec := recover(); rec != http.ErrAbortHandler { //nolint:errorlint // identity
				t.Fatalf("recovered %v, want http.ErrAbortHandler", rec)
			}
		}()
		e.h.ServeHTTP(w, httptest.NewRequest("GET", "/b/k", nil))
		t.Fatal("handler returned normally after a failed read")
	}()
	if w.Code != 200 || w.Body.Len() != 100 || w.Header().Get("Content-Length") != "1000" {
		t.Errorf("got %d, %d bytes, Content-Length %s", w.Code, w.Body.Len(), w.Header().Get("Content-Length"))
	}
	if n := len(e.st.readers); n != 1 || !e.st.readers[0].closed {
		t.Error("store reader was not closed after the abort")
	}
	if !strings.Contains(e.logText(), "pin lost") || !strings.Contains(e.logText(), "s3 request") {
		t.Errorf("abort not logged:\n%s", e.logText())
	}
}

func TestReaderClosedOnSuccess(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("b")
	e.mustPut("b", "k", "abc", nil)
	if w := e.do(req{method: "GET", target: "/b/k"}); w.Code != 200 || w.Body.String() != "abc" {
		t.Fatalf("GET: %d %q", w.Code, w.Body.String())
	}
	if len(e.st.readers) != 1 || !e.st.readers[0].closed {
		t.Error("reader not closed")
	}
}

// TestEmptyExpectContinueClosesConnection: a PUT with Expect: 100-continue
// whose body was not read to its end (empty, or answered early) is answered
// with Connection: close; others keep the connection.
func TestEmptyExpectContinueClosesConnection(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expect    string
		body      string
		read      bool
		http2     bool
		wantClose bool
	}{
		{name: "empty with expect", expect: "100-continue", wantClose: true},
		// On HTTP/2 the unread body ends with its stream; a close would be
		// a GOAWAY that ends the connection's other streams.
		{name: "HTTP/2 empty with expect", expect: "100-continue", http2: true},
		{name: "HTTP/2 body with expect, answered early", expect: "100-continue", body: "x", http2: true},
		{name: "empty without expect"},
		{name: "body with expect, read", expect: "100-continue", body: "x", read: true},
		{name: "body with expect, answered early", expect: "100-continue", body: "x", wantClose: true},
		{name: "body without expect, answered early", body: "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := closeOnEmptyExpect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.read {
					if _, err := io.Copy(io.Discard, r.Body); err != nil {
						t.Error(err)
					}
				}
				w.WriteHeader(200)
			}))
			req := httptest.NewRequest("PUT", "/b/k", strings.NewReader(tc.body))
			if tc.expect != "" {
				req.Header.Set("Expect", tc.expect)
			}
			if tc.http2 {
				req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if got := w.Header().Get("Connection") == "close"; got != tc.wantClose {
				t.Fatalf("Connection: close = %v, want %v", got, tc.wantClose)
			}
		})
	}
}
