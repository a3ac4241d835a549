package s3api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRouteCarried: the route WithRoute resolved is the one the handler
// uses (parsed once) for the same virtual-host base, and a request carrying
// a route for another base is resolved again.
func TestRouteCarried(t *testing.T) {
	tests := []struct {
		name, target, host, carried, domain string
		wantBucket, wantKey, wantOp         string
		same                                bool
	}{
		{"path style", "/b/k?tagging", "127.0.0.1", "", "", "b", "k", "GetObjectTagging", true},
		{"virtual host", "/k%2Fx", "b.s3.local", "s3.local", ".S3.local.", "b", "k/x", "GetObject", true},
		{"other base", "/k", "b.s3.local", "", "s3.local", "b", "k", "GetObject", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.target, nil)
			r.Host = tt.host
			carried := WithRoute(r, tt.carried)
			rt := RouteOf(carried, tt.domain)
			if rt.Bucket != tt.wantBucket || rt.Key != tt.wantKey || rt.Op != tt.wantOp {
				t.Errorf("route = %q %q %q, want %q %q %q", rt.Bucket, rt.Key, rt.Op, tt.wantBucket, tt.wantKey, tt.wantOp)
			}
			if same := rt == RouteOf(carried, tt.domain); same != tt.same {
				t.Errorf("carried route reused = %v, want %v", same, tt.same)
			}
		})
	}
}

// BenchmarkRoute is the cost of resolving one object request's route.
func BenchmarkRoute(b *testing.B) {
	r := httptest.NewRequest("GET", "/bucket/some/key.txt", nil)
	b.ReportAllocs()
	for b.Loop() {
		RouteOf(WithRoute(r, ""), "")
	}
}

// BenchmarkSmallObject is the handler's own cost of a 4 KiB PUT and GET
// (over the in-memory store, with policy evaluation on): allocs/op is what
// the request path allocates beside the store and the HTTP server.
func BenchmarkSmallObject(b *testing.B) {
	h := New(Config{Identities: staticIDs{"AKTEST": {Root: true}}}, newMemStore(), fakeAuth{}, nil)
	serve := func(method, target string, body []byte, want int) {
		r := httptest.NewRequest(method, target, bytes.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			b.Fatalf("%s %s: %d %s", method, target, w.Code, w.Body)
		}
	}
	serve("PUT", "/b", nil, http.StatusOK)
	body := bytes.Repeat([]byte("x"), 4<<10)
	serve("PUT", "/b/k", body, http.StatusOK)
	b.Run("put-4KiB", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serve("PUT", "/b/k", body, http.StatusOK)
		}
	})
	b.Run("get-4KiB", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serve("GET", "/b/k", nil, http.StatusOK)
		}
	})
}
