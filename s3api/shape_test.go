package s3api

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestTextParamsRefused: a NUL or invalid UTF-8 in a marker, prefix or id is
// InvalidArgument before any engine sees it (it was a 500 from PostgreSQL).
func TestTextParamsRefused(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	e.mustPut("bkt", "k", "v", nil)
	for _, tc := range []struct {
		method, target string
	}{
		{http.MethodGet, "/bkt?list-type=2&prefix=a%00b"},
		{http.MethodGet, "/bkt?list-type=2&start-after=%ff"},
		{http.MethodGet, "/bkt?list-type=2&continuation-token=%00"},
		{http.MethodGet, "/bkt?list-type=2&delimiter=%c3"},
		{http.MethodGet, "/bkt?marker=%00"},
		{http.MethodGet, "/bkt?uploads&key-marker=%fe%ff"},
		{http.MethodGet, "/bkt?uploads&upload-id-marker=%00"},
		{http.MethodGet, "/bkt?versions&version-id-marker=%00"},
		{http.MethodGet, "/bkt/k?uploadId=%00"},
		{http.MethodPut, "/bkt/k?partNumber=1&uploadId=%ff"},
		{http.MethodDelete, "/bkt/k?uploadId=a%00"},
	} {
		w := e.do(req{method: tc.method, target: tc.target, hdr: map[string]string{"Content-Length": "0"}})
		expectError(t, w, http.StatusBadRequest, "InvalidArgument")
	}
	// Valid UTF-8 beyond ASCII stays allowed.
	if w := e.do(req{method: http.MethodGet, target: "/bkt?list-type=2&prefix=" + url.QueryEscape("ü/€")}); w.Code != http.StatusOK {
		t.Errorf("list with a UTF-8 prefix: %d %s", w.Code, w.Body)
	}
}

// TestMissingContentLength: over a real connection, a PUT with neither
// Content-Length nor chunked transfer is 411 MissingContentLength and stores
// nothing; Content-Length: 0 and chunked bodies are accepted.
func TestMissingContentLength(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	raw := func(head, body string) (int, string) {
		t.Helper()
		c, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte(head + "\r\n" + body)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&sb)
		return resp.StatusCode, sb.String()
	}
	for _, tc := range []struct {
		name, head, body string
		status           int
		code             string
		stored           bool
	}{
		{"no length", "PUT /bkt/nolen HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", "", http.StatusLengthRequired, "MissingContentLength", false},
		{"no length, part", "PUT /bkt/nolen?partNumber=1&uploadId=u HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", "", http.StatusLengthRequired, "MissingContentLength", false},
		{"length 0", "PUT /bkt/zero HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n", "", http.StatusOK, "", true},
		{"chunked", "PUT /bkt/chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n", "3\r\nabc\r\n0\r\n\r\n", http.StatusOK, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := raw(tc.head, tc.body)
			if status != tc.status || !strings.Contains(body, tc.code) {
				t.Fatalf("HTTP %d %s, want %d %s", status, body, tc.status, tc.code)
			}
			key := strings.TrimPrefix(strings.Fields(tc.head)[1], "/bkt/")
			e.st.mu.Lock()
			_, ok := e.st.objects["bkt"][key]
			e.st.mu.Unlock()
			if ok != tc.stored {
				t.Errorf("object %q stored: %v, want %v", key, ok, tc.stored)
			}
		})
	}
}
