package s3api

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/store"
)

func TestOperationAccess(t *testing.T) {
	// Every implemented operation must be listed here: adding a handler
	// without deciding whether it reads or writes fails this test.
	want := map[string]Access{
		"ListBuckets": AccessRead, "HeadBucket": AccessRead, "GetBucketLocation": AccessRead,
		"ListObjects": AccessRead, "ListObjectsV2": AccessRead, "ListMultipartUploads": AccessRead,
		"ListParts": AccessRead, "GetObject": AccessRead, "HeadObject": AccessRead,
		"GetBucketVersioning": AccessRead, "GetBucketAcl": AccessRead, "GetObjectAcl": AccessRead,
		"GetObjectTagging": AccessRead, "GetBucketTagging": AccessRead, "GetBucketPolicy": AccessRead,
		"GetBucketPolicyStatus": AccessRead, "GetBucketCors": AccessRead,
		"GetBucketLifecycleConfiguration": AccessRead, "GetBucketEncryption": AccessRead,
		"GetObjectLockConfiguration": AccessRead, "GetBucketWebsite": AccessRead,
		"GetBucketReplication": AccessRead, "GetPublicAccessBlock": AccessRead,
		"GetBucketOwnershipControls": AccessRead, "GetObjectAttributes": AccessRead,
		"ListObjectVersions": AccessRead, "GetObjectRetention": AccessRead, "GetObjectLegalHold": AccessRead,
		"GetBucketLogging": AccessRead, "GetBucketAccelerateConfiguration": AccessRead,
		"GetBucketNotificationConfiguration": AccessRead, "GetBucketRequestPayment": AccessRead,
		"ListBucketAnalyticsConfigurations": AccessRead, "ListBucketMetricsConfigurations": AccessRead,
		"ListBucketInventoryConfigurations": AccessRead, "ListBucketIntelligentTieringConfigurations": AccessRead,
		"GetBucketAnalyticsConfiguration": AccessRead, "GetBucketMetricsConfiguration": AccessRead,
		"GetBucketInventoryConfiguration": AccessRead, "GetBucketIntelligentTieringConfiguration": AccessRead,

		"CreateBucket": AccessWrite, "DeleteBucket": AccessWrite, "DeleteObjects": AccessWrite,
		"PutBucketAcl": AccessWrite, "PutObjectAcl": AccessWrite, "PutObject": AccessWrite,
		"PutObjectTagging": AccessWrite, "DeleteObjectTagging": AccessWrite,
		"PutBucketTagging": AccessWrite, "DeleteBucketTagging": AccessWrite,
		"DeleteObject": AccessWrite, "CopyObject": AccessWrite, "CreateMultipartUpload": AccessWrite,
		"UploadPart": AccessWrite, "UploadPartCopy": AccessWrite, "CompleteMultipartUpload": AccessWrite,
		"AbortMultipartUpload": AccessWrite, "PutBucketPolicy": AccessWrite, "DeleteBucketPolicy": AccessWrite,
		"PutPublicAccessBlock": AccessWrite, "DeletePublicAccessBlock": AccessWrite,
		"PutBucketCors": AccessWrite, "DeleteBucketCors": AccessWrite,
		"PutBucketOwnershipControls": AccessWrite, "DeleteBucketOwnershipControls": AccessWrite,
		"PutObjectLockConfiguration": AccessWrite, "PutObjectRetention": AccessWrite, "PutObjectLegalHold": AccessWrite,
		"DeleteBucketWebsite": AccessWrite, "DeleteBucketReplication": AccessWrite, "DeleteBucketEncryption": AccessWrite,
		"PutBucketVersioning":             AccessWrite,
		"PutBucketLifecycleConfiguration": AccessWrite, "DeleteBucketLifecycleConfiguration": AccessWrite,
	}
	for op := range handlers {
		if _, ok := want[op]; !ok {
			t.Errorf("handler %s has no expected access class in this test", op)
		}
	}
	// Operations without a handler, and names nothing produces today.
	extra := map[string]Access{
		"SelectObjectContent": AccessRead,
		"PutBucketPolicy":     AccessWrite, "DeleteBucketPolicy": AccessWrite, "PutObjectTagging": AccessWrite,
		"DeleteObjectTagging": AccessWrite, "RestoreObject": AccessWrite, "PostObject": AccessWrite,
		"PostBucketAcl": AccessWrite, opUnknown: AccessWrite, "": AccessWrite, "Frobnicate": AccessWrite,
		"get": AccessWrite, // case matters: names come from Operation only
	}
	for op, a := range extra {
		want[op] = a
	}
	for op, a := range want {
		if got := OperationAccess(op); got != a {
			t.Errorf("OperationAccess(%q) = %v, want %v", op, got, a)
		}
	}
}

// policies is an in-memory PolicySource.
type policies struct {
	mu    sync.Mutex
	keys  map[string]policy
	err   error
	calls int
}

type policy struct {
	buckets  []string
	readOnly bool
	root     bool
}

func (p *policies) Policy(_ context.Context, key string) ([]string, bool, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.err != nil {
		return nil, false, false, p.err
	}
	k, ok := p.keys[key]
	if !ok {
		return nil, false, false, fmt.Errorf("policy: %w", store.ErrNoSuchAccessKey)
	}
	return k.buckets, k.readOnly, k.root, nil
}

// keyAuth is fakeAuth with the access key taken from X-Test-Key.
type keyAuth struct{}

func (keyAuth) Verify(r *http.Request) (*auth.Result, error) {
	res, err := fakeAuth{}.Verify(r)
	if err == nil && r.Header.Get("X-Test-Key") != "" {
		res.AccessKey = r.Header.Get("X-Test-Key")
	}
	return res, err
}

func newAuthzEnv(t *testing.T, az Authorizer) *env {
	t.Helper()
	e := &env{t: t, st: newMemStore(), logs: &bytes.Buffer{}, mu: &sync.Mutex{}}
	log := slog.New(slog.NewTextHandler(lockedWriter{e.mu, e.logs}, nil))
	e.h = New(Config{Authorizer: az}, e.st, keyAuth{}, log)
	return e
}

func newPolicyEnv(t *testing.T) (*env, *policies) {
	t.Helper()
	ps := &policies{keys: map[string]policy{
		"ROOT": {root: true},
		"RW":   {},
		"RO":   {readOnly: true},
		"A":    {buckets: []string{"a"}},
		"ARO":  {buckets: []string{"a"}, readOnly: true},
	}}
	e := newAuthzEnv(t, NewKeyPolicy(ps))
	for _, b := range []string{"a", "b"} {
		e.do(req{method: "PUT", target: "/" + b, hdr: map[string]string{"X-Test-Key": "ROOT"}})
		e.do(req{method: "PUT", target: "/" + b + "/seed", body: "seed", hdr: map[string]string{"X-Test-Key": "ROOT"}})
	}
	if len(e.st.buckets) != 2 || len(e.st.objects["b"]) != 1 {
		t.Fatalf("setup: buckets %v", e.st.buckets)
	}
	return e, ps
}

func deleteObjectsBody(keys ...string) (string, map[string]string) {
	var b bytes.Buffer
	b.WriteString("<Delete>")
	for _, k := range keys {
		fmt.Fprintf(&b, "<Object><Key>%s</Key></Object>", k)
	}
	b.WriteString("</Delete>")
	sum := md5.Sum(b.Bytes())
	return b.String(), map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(sum[:])}
}

func TestAuthorizeEnforced(t *testing.T) {
	delBody, delHdr := deleteObjectsBody("seed")
	tests := []struct {
		name   string
		key    string
		method string
		target string
		body   string
		hdr    map[string]string
		status int // 403 means AccessDenied
	}{
		{"root writes anywhere", "ROOT", "PUT", "/b/new", "x", nil, 200},
		{"read-write key writes", "RW", "PUT", "/b/new", "x", nil, 200},
		{"read-only PUT", "RO", "PUT", "/a/new", "x", nil, 403},
		{"read-only GET", "RO", "GET", "/a/seed", "", nil, 200},
		{"read-only HEAD", "RO", "HEAD", "/a/seed", "", nil, 200},
		{"read-only list", "RO", "GET", "/a?list-type=2", "", nil, 200},
		{"read-only DELETE", "RO", "DELETE", "/a/seed", "", nil, 403},
		{"read-only DeleteObjects", "RO", "POST", "/a?delete", delBody, delHdr, 403},
		{"read-only CreateBucket", "RO", "PUT", "/c", "", nil, 403},
		{"read-only DeleteBucket", "RO", "DELETE", "/a", "", nil, 403},
		{"read-only CreateMultipartUpload", "RO", "POST", "/a/mp?uploads", "", nil, 403},
		{"read-only CopyObject", "RO", "PUT", "/a/copy", "", map[string]string{"x-amz-copy-source": "/a/seed"}, 403},
		{"read-only PutObjectAcl", "RO", "PUT", "/a/seed?acl", "", nil, 403},
		{"scoped PUT own bucket", "A", "PUT", "/a/new", "x", nil, 200},
		{"scoped PUT other bucket", "A", "PUT", "/b/new", "x", nil, 403},
		{"scoped GET other bucket", "A", "GET", "/b/seed", "", nil, 403},
		{"scoped HEAD other bucket", "A", "HEAD", "/b/seed", "", nil, 403},
		{"scoped list other bucket", "A", "GET", "/b?list-type=2", "", nil, 403},
		{"scoped CreateBucket other", "A", "PUT", "/c", "", nil, 403},
		{"scoped copy out of other bucket", "A", "PUT", "/a/copy", "", map[string]string{"x-amz-copy-source": "/b/seed"}, 403},
		{"scoped copy into other bucket", "A", "PUT", "/b/copy", "", map[string]string{"x-amz-copy-source": "/a/seed"}, 403},
		{"scoped copy within own bucket", "A", "PUT", "/a/copy", "", map[string]string{"x-amz-copy-source": "a/seed"}, 200},
		{"scoped read-only GET own", "ARO", "GET", "/a/seed", "", nil, 200},
		{"scoped read-only PUT own", "ARO", "PUT", "/a/new", "x", nil, 403},
		{"scoped read-only GET other", "ARO", "GET", "/b/seed", "", nil, 403},
		{"unknown (deleted) key", "GONE", "GET", "/a/seed", "", nil, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newPolicyEnv(t)
			before := snapshot(e.st)
			hdr := map[string]string{"X-Test-Key": tt.key}
			for k, v := range tt.hdr {
				hdr[k] = v
			}
			w := e.do(req{method: tt.method, target: tt.target, body: tt.body, hdr: hdr})
			if tt.status != http.StatusForbidden {
				if w.Code != tt.status {
					t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body.String())
				}
				return
			}
			if tt.method == "HEAD" {
				if w.Code != http.StatusForbidden || w.Body.Len() != 0 {
					t.Fatalf("HEAD refused: %d %q", w.Code, w.Body.String())
				}
			} else {
				expectError(t, w, http.StatusForbidden, "AccessDenied")
			}
			if after := snapshot(e.st); after != before {
				t.Errorf("refused request changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// snapshot renders the store's buckets, objects and uploads.
func snapshot(m *memStore) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var bs []string
	for b := range m.buckets {
		var ks []string
		for k, o := range m.objects[b] {
			ks = append(ks, k+"="+string(o.data))
		}
		slices.Sort(ks)
		bs = append(bs, fmt.Sprintf("%s%v", b, ks))
	}
	slices.Sort(bs)
	return fmt.Sprintf("%v uploads=%d", bs, len(m.uploads))
}

func TestAuthorizeUploadPartCopySource(t *testing.T) {
	e, _ := newPolicyEnv(t)
	w := e.do(req{method: "POST", target: "/a/mp?uploads", hdr: map[string]string{"X-Test-Key": "A"}})
	if w.Code != 200 {
		t.Fatalf("CreateMultipartUpload: %d %s", w.Code, w.Body.String())
	}
	var up struct {
		UploadID string `xml:"UploadId"`
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &up); err != nil || up.UploadID == "" {
		t.Fatalf("upload id: %v %q", err, w.Body.String())
	}
	part := func(src string) int {
		w := e.do(req{method: "PUT", target: "/a/mp?partNumber=1&uploadId=" + up.UploadID,
			hdr: map[string]string{"X-Test-Key": "A", "x-amz-copy-source": src}})
		return w.Code
	}
	if c := part("/b/seed"); c != http.StatusForbidden {
		t.Errorf("UploadPartCopy from a bucket the key may not read: %d", c)
	}
	if n := len(e.st.uploads[up.UploadID].parts); n != 0 {
		t.Fatalf("refused part copy stored %d parts", n)
	}
	if c := part("/a/seed"); c != 200 {
		t.Errorf("UploadPartCopy within the key's bucket: %d", c)
	}
}

func TestListBucketsFiltered(t *testing.T) {
	tests := []struct {
		key  string
		want []string
	}{
		{"ROOT", []string{"a", "b"}},
		{"RW", []string{"a", "b"}},
		{"RO", []string{"a", "b"}},
		{"A", []string{"a"}},
		{"ARO", []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			e, _ := newPolicyEnv(t)
			if got := listBucketNames(t, e, tt.key); !slices.Equal(got, tt.want) {
				t.Errorf("ListBuckets as %s = %v, want %v", tt.key, got, tt.want)
			}
		})
	}
}

func listBucketNames(t *testing.T, e *env, key string) []string {
	t.Helper()
	w := e.do(req{method: "GET", target: "/", hdr: map[string]string{"X-Test-Key": key}})
	if w.Code != 200 {
		t.Fatalf("ListBuckets: %d %s", w.Code, w.Body.String())
	}
	var res struct {
		Buckets []string `xml:"Buckets>Bucket>Name"`
	}
	if err := xml.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	return res.Buckets
}

// recordingAuthorizer allows what allow says and records every call; it has
// no VisibleBuckets, so ListBuckets asks it bucket by bucket.
type recordingAuthorizer struct {
	mu    sync.Mutex
	calls []string
	allow func(op, bucket string) error
}

func (r *recordingAuthorizer) Authorize(_ context.Context, key, op, bucket string) error {
	r.mu.Lock()
	r.calls = append(r.calls, key+" "+op+" "+bucket)
	r.mu.Unlock()
	return r.allow(op, bucket)
}

func TestAuthorizerSeesResolvedOperation(t *testing.T) {
	ra := &recordingAuthorizer{allow: func(op, bucket string) error {
		if bucket == "hidden" {
			return fmt.Errorf("wrapped: %w", ErrAccessDenied)
		}
		return nil
	}}
	e := newAuthzEnv(t, ra)
	for _, b := range []string{"a", "hidden"} {
		e.st.buckets[b] = store.Bucket{Name: b}
		e.st.objects[b] = map[string]*memObject{}
	}
	steps := []struct {
		method, target string
		hdr            map[string]string
		wantCalls      []string
		status         int
	}{
		{"PUT", "/a/k", nil, []string{"AKTEST PutObject a"}, 200},
		{"GET", "/a/k", nil, []string{"AKTEST GetObject a"}, 200},
		{"GET", "/a?list-type=2", nil, []string{"AKTEST ListObjectsV2 a"}, 200},
		{"PUT", "/a/k2", map[string]string{"x-amz-copy-source": "/a/k"}, []string{"AKTEST CopyObject a", "AKTEST GetObject a"}, 200},
		{"GET", "/hidden/k", nil, []string{"AKTEST GetObject hidden"}, 403},
		{"GET", "/", nil, []string{"AKTEST ListBuckets ", "AKTEST HeadBucket a", "AKTEST HeadBucket hidden"}, 200},
	}
	for _, s := range steps {
		ra.calls = nil
		w := e.do(req{method: s.method, target: s.target, body: map[bool]string{true: "x"}[s.method == "PUT" && s.hdr == nil], hdr: s.hdr})
		if w.Code != s.status {
			t.Fatalf("%s %s: %d %s", s.method, s.target, w.Code, w.Body.String())
		}
		if !slices.Equal(ra.calls, s.wantCalls) {
			t.Errorf("%s %s: calls %q, want %q", s.method, s.target, ra.calls, s.wantCalls)
		}
	}
	if got := listBucketNames(t, e, ""); !slices.Equal(got, []string{"a"}) {
		t.Errorf("ListBuckets through Authorize = %v, want [a]", got)
	}
	// A route error is answered before authentication and authorization.
	ra.calls = nil
	e.do(req{method: "GET", target: "//x"})
	if len(ra.calls) != 0 {
		t.Errorf("unroutable request reached the authorizer: %q", ra.calls)
	}
}

func TestAuthorizeStoreFailure(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"store unavailable", fmt.Errorf("db: %w", store.ErrUnavailable), 503, "ServiceUnavailable"},
		{"unexpected failure", errors.New("boom"), 500, "InternalError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ps := newPolicyEnv(t)
			before := snapshot(e.st)
			ps.err = tt.err
			w := e.do(req{method: "PUT", target: "/a/new", body: "x", hdr: map[string]string{"X-Test-Key": "RW"}})
			expectError(t, w, tt.status, tt.code)
			if after := snapshot(e.st); after != before {
				t.Errorf("failed authorization changed the store: %s", after)
			}
			w = e.do(req{method: "GET", target: "/", hdr: map[string]string{"X-Test-Key": "A"}})
			expectError(t, w, tt.status, tt.code)
		})
	}
}

// TestCredentialLookupFailure: a failed credential lookup (managed keys live
// in the store) is a server error, never a 403.
func TestCredentialLookupFailure(t *testing.T) {
	tests := []struct {
		name   string
		cause  error
		status int
		code   string
	}{
		{"store unavailable", fmt.Errorf("get key: %w", store.ErrUnavailable), 503, "ServiceUnavailable"},
		{"other failure", errors.New("boom"), 500, "InternalError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env{t: t, st: newMemStore(), logs: &bytes.Buffer{}, mu: &sync.Mutex{}}
			e.h = New(Config{}, e.st, failingAuth{&auth.Error{Code: auth.CodeInternalError, Message: "credential lookup failed", Err: tt.cause}},
				slog.New(slog.NewTextHandler(lockedWriter{e.mu, e.logs}, nil)))
			expectError(t, e.do(req{method: "GET", target: "/"}), tt.status, tt.code)
		})
	}
}

type failingAuth struct{ err error }

func (f failingAuth) Verify(*http.Request) (*auth.Result, error) { return nil, f.err }
