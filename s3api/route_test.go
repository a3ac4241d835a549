package s3api

import (
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
