package s3api

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOverRealServer drives the handler through net/http's server and client:
// the server must not clean or redirect tricky paths, and a failed stream must
// reach the client as a truncated body, never a clean end.
func TestOverRealServer(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	srv := httptest.NewServer(e.h)
	defer srv.Close()

	for _, tc := range []struct{ path, key string }{
		{"/bkt/a//b/../c", "a//b/../c"},
		{"/bkt/./x", "./x"},
		{"/bkt/a%2F..%2Fb", "a/../b"},
	} {
		r, err := http.NewRequest(http.MethodPut, srv.URL+tc.path, strings.NewReader("payload"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT %s: %d", tc.path, resp.StatusCode)
		}
		if _, ok := e.st.objects["bkt"][tc.key]; !ok {
			t.Errorf("PUT %s stored keys %v, want %q", tc.path, keysOf(e.st.objects["bkt"]), tc.key)
		}
	}

	e.mustPut("bkt", "big", strings.Repeat("q", 4<<20), nil)
	e.st.mu.Lock()
	e.st.readErr, e.st.readErrAfter = errors.New("pin lost"), 1<<20
	e.st.mu.Unlock()
	resp, err := srv.Client().Get(srv.URL + "/bkt/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil {
		t.Fatalf("truncated stream ended cleanly after %d bytes", n)
	}
	if resp.StatusCode != http.StatusOK || n >= 4<<20 {
		t.Errorf("status %d, read %d bytes", resp.StatusCode, n)
	}
}
