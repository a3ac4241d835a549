package s3api

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// staticIDs is an IdentitySource over a map ("AKTEST" is fakeAuth's key).
type staticIDs map[string]Identity

func (s staticIDs) Identity(_ context.Context, key string) (Identity, error) {
	id, ok := s[key]
	if !ok {
		return Identity{}, fmt.Errorf("key %q: %w", key, store.ErrNoSuchAccessKey)
	}
	return id, nil
}

func TestConditionContext(t *testing.T) {
	tests := []struct {
		name      string
		target    string
		op        string
		hdr       map[string]string
		tls, anon bool
		want      map[string]string // "" value: the key must be absent; "<empty>": present, empty
	}{
		{name: "signed GET over TLS", target: "/b/k", op: "GetObject", tls: true,
			hdr:  map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=x", "Referer": "http://example.com/p", "User-Agent": "ua/1", "x-amz-acl": "private"},
			want: map[string]string{"aws:securetransport": "true", "aws:sourceip": "192.0.2.1", "aws:referer": "http://example.com/p", "aws:useragent": "ua/1", "aws:username": "AKTEST", "aws:userid": "AKTEST", "aws:principaltype": "User", "s3:authtype": "REST-HEADER", "s3:signatureversion": "AWS4-HMAC-SHA256", "s3:x-amz-acl": "private", "s3:prefix": ""}}, // no listing: no s3:prefix
		{name: "anonymous list", target: "/b?list-type=2&prefix=p/&delimiter=/&max-keys=5", op: "ListObjectsV2", anon: true,
			want: map[string]string{"aws:securetransport": "false", "aws:principaltype": "Anonymous", "aws:username": "", "s3:authtype": "", "aws:referer": "", "s3:prefix": "p/", "s3:delimiter": "/", "s3:max-keys": "5"}},
		{name: "list without a prefix", target: "/b", op: "ListObjects", anon: true,
			want: map[string]string{"s3:prefix": "<empty>", "s3:delimiter": "", "s3:max-keys": ""}},
		{name: "presigned SigV2", target: "/b/k?AWSAccessKeyId=AKTEST&Signature=x&Expires=1", op: "GetObject",
			want: map[string]string{"s3:authtype": "REST-QUERY-STRING", "s3:signatureversion": "AWS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			for k, v := range tt.hdr {
				r.Header.Set(k, v)
			}
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			rq := &request{r: r, q: r.URL.Query(), op: tt.op, anonymous: tt.anon}
			if !tt.anon {
				rq.accessKey = "AKTEST"
			}
			c := conditionContext(rq)
			for k, want := range tt.want {
				got, ok := c[k]
				switch {
				case want == "" && ok:
					t.Errorf("%s = %q, want absent", k, got)
				case want == "<empty>" && (!ok || got[0] != ""):
					t.Errorf("%s = %q, want present and empty", k, got)
				case want != "" && want != "<empty>" && (!ok || got[0] != want):
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if _, ok := c["aws:currenttime"]; !ok {
				t.Error("aws:currenttime missing")
			}
		})
	}
}

// TestAccessDecisions runs the request path over the in-memory store (no
// bucket configuration: no bucket policy, the default Block Public Access):
// the identity rules alone, anonymous refusals, the access log's principal
// and the anonymous request hook.
func TestAccessDecisions(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	ids := staticIDs{"AKTEST": {Root: true}}
	e := newEnv(t, Config{Identities: ids, BlockPublicAccess: true, Anonymous: func(op string, status int) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s %d", op, status))
	}})
	e.mustBucket("b")
	e.mustBucket("other")
	e.mustPut("b", "uploads/x", "x", nil)

	policyDoc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/uploads/*"},
		{"Effect":"Deny","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/uploads/no*"}]}`
	readOnlyDoc := `{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`
	readListDoc := `{"Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::b/*","arn:aws:s3:::b"]}]}`
	tests := []struct {
		name   string
		id     Identity
		r      req
		status int
	}{
		{"root reads", Identity{Root: true}, req{method: "GET", target: "/b/uploads/x"}, 200},
		{"plain key reads", Identity{}, req{method: "GET", target: "/b/uploads/x"}, 200},
		{"bucket list refuses", Identity{Buckets: []string{"other"}}, req{method: "GET", target: "/b/uploads/x"}, 403},
		{"read-only refuses a write", Identity{ReadOnly: true}, req{method: "PUT", target: "/b/k", body: "x"}, 403},
		{"key policy allows", Identity{Policy: policyDoc}, req{method: "PUT", target: "/b/uploads/y", body: "x"}, 200},
		{"key policy's Deny wins", Identity{Policy: policyDoc}, req{method: "PUT", target: "/b/uploads/nope", body: "x"}, 403},
		{"key policy has no GetObject", Identity{Policy: policyDoc}, req{method: "GET", target: "/b/uploads/x"}, 403},
		{"key policy elsewhere", Identity{Policy: policyDoc}, req{method: "PUT", target: "/other/uploads/y", body: "x"}, 403},
		{"key policy, missing bucket: no grant", Identity{Policy: policyDoc}, req{method: "GET", target: "/nob/x"}, 403},
		{"plain key, missing bucket", Identity{}, req{method: "GET", target: "/nob/x"}, 404},
		{"missing key, no s3:ListBucket: AccessDenied", Identity{Policy: readOnlyDoc}, req{method: "GET", target: "/b/missing"}, 403},
		{"missing key with s3:ListBucket: NoSuchKey", Identity{Policy: readListDoc}, req{method: "GET", target: "/b/missing"}, 404},
		{"missing key, plain key: NoSuchKey", Identity{}, req{method: "HEAD", target: "/b/missing"}, 404},
		{"existing key, no s3:ListBucket", Identity{Policy: readOnlyDoc}, req{method: "GET", target: "/b/uploads/x"}, 200},
		{"plain key, unknown operation: the handler's answer", Identity{}, req{method: "PATCH", target: "/b/k"}, 405},
		{"policy key, unknown operation", Identity{Policy: readOnlyDoc}, req{method: "PATCH", target: "/b/k"}, 403},
		{"anonymous GET", Identity{}, req{method: "GET", target: "/b/uploads/x", hdr: map[string]string{"X-Fake-Auth": "anonymous"}}, 403},
		{"anonymous ListBuckets", Identity{}, req{method: "GET", target: "/", hdr: map[string]string{"X-Fake-Auth": "anonymous"}}, 403},
		{"anonymous, missing bucket", Identity{}, req{method: "GET", target: "/nob/x", hdr: map[string]string{"X-Fake-Auth": "anonymous"}}, 404},
		{"BlockPublicAcls by default", Identity{}, req{method: "PUT", target: "/b/k", body: "x", hdr: map[string]string{"x-amz-acl": "public-read"}}, 403},
		{"CreateBucket's public ACL stays NotImplemented", Identity{}, req{method: "PUT", target: "/newb", hdr: map[string]string{"x-amz-acl": "public-read"}}, 501},
		{"BlockPublicAcls on grants", Identity{}, req{method: "PUT", target: "/b/k", body: "x", hdr: map[string]string{"x-amz-grant-read": `uri="http://acs.amazonaws.com/groups/global/AllUsers"`}}, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids["AKTEST"] = tt.id
			if w := e.do(tt.r); w.Code != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.r.method, tt.r.target, w.Code, w.Body.String(), tt.status)
			}
		})
	}
	logs := e.logText()
	if !strings.Contains(logs, "principal=anonymous") || !strings.Contains(logs, "principal=AKTEST") {
		t.Errorf("access log lacks the principals:\n%s", logs)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"GetObject 403", "ListBuckets 403", "GetObject 404"}; !slices.Equal(seen, want) {
		t.Errorf("anonymous hook saw %q, want %q", seen, want)
	}
	// Without a configuration store the policy APIs are NotImplemented.
	ids["AKTEST"] = Identity{Root: true}
	if w := e.do(req{method: "PUT", target: "/b?policy", body: "{}"}); w.Code != http.StatusNotImplemented {
		t.Errorf("PutBucketPolicy without a configuration store: %d", w.Code)
	}
}
