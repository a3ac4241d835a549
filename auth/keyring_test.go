package auth

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/s3gate/s3gate/store"
)

// memKeys is an in-memory store.KeyStore that counts lookups and can fail.
type memKeys struct {
	mu      sync.Mutex
	keys    map[string]store.AccessKey
	gets    int
	failErr error
}

func newMemKeys(keys ...store.AccessKey) *memKeys {
	m := &memKeys{keys: map[string]store.AccessKey{}}
	for _, k := range keys {
		m.keys[k.ID] = k
	}
	return m
}

func (m *memKeys) CreateKey(_ context.Context, k store.AccessKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.keys[k.ID]; ok {
		return store.ErrAccessKeyExists
	}
	m.keys[k.ID] = k
	return nil
}

func (m *memKeys) GetKey(_ context.Context, id string) (store.AccessKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	if m.failErr != nil {
		return store.AccessKey{}, m.failErr
	}
	k, ok := m.keys[id]
	if !ok {
		return store.AccessKey{}, store.ErrNoSuchAccessKey
	}
	return k, nil
}

func (m *memKeys) ListKeys(context.Context) ([]store.AccessKey, error) { return nil, nil }

func (m *memKeys) DeleteKey(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.keys[id]; !ok {
		return store.ErrNoSuchAccessKey
	}
	delete(m.keys, id)
	return nil
}

func TestKeyringLookup(t *testing.T) {
	ctx := context.Background()
	keys := newMemKeys(
		store.AccessKey{ID: "AKUSER", Secret: "user-secret", Buckets: []string{"a"}},
		store.AccessKey{ID: "ROOT", Secret: "stored-secret-for-root-id"},
	)
	kr := &Keyring{RootAccessKey: "ROOT", RootSecretKey: "root-secret", Keys: keys}
	tests := []struct {
		name       string
		kr         *Keyring
		key        string
		wantSecret string
		wantOK     bool
	}{
		{"root", kr, "ROOT", "root-secret", true},
		{"stored key", kr, "AKUSER", "user-secret", true},
		{"unknown", kr, "AKNONE", "", false},
		{"case matters", kr, "akuser", "", false},
		{"empty id", kr, "", "", false},
		{"no store: root only", &Keyring{RootAccessKey: "ROOT", RootSecretKey: "root-secret"}, "AKUSER", "", false},
		{"no root configured", &Keyring{Keys: keys}, "AKUSER", "user-secret", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec, ok, err := tt.kr.Lookup(ctx, tt.key)
			if err != nil || ok != tt.wantOK || sec != tt.wantSecret {
				t.Fatalf("Lookup(%q) = %q, %v, %v; want %q, %v", tt.key, sec, ok, err, tt.wantSecret, tt.wantOK)
			}
		})
	}
}

// TestKeyringNoCache: a created key works on the next lookup and a deleted
// one is refused on the next lookup; each lookup asks the store.
func TestKeyringNoCache(t *testing.T) {
	ctx := context.Background()
	keys := newMemKeys()
	kr := &Keyring{RootAccessKey: "ROOT", RootSecretKey: "root-secret", Keys: keys}
	if _, ok, _ := kr.Lookup(ctx, "AKNEW"); ok {
		t.Fatal("unknown key found")
	}
	if err := keys.CreateKey(ctx, store.AccessKey{ID: "AKNEW", Secret: "s"}); err != nil {
		t.Fatal(err)
	}
	if sec, ok, err := kr.Lookup(ctx, "AKNEW"); !ok || err != nil || sec != "s" {
		t.Fatalf("created key: %q %v %v", sec, ok, err)
	}
	if err := keys.DeleteKey(ctx, "AKNEW"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := kr.Lookup(ctx, "AKNEW"); ok || err != nil {
		t.Fatalf("deleted key: ok=%v err=%v", ok, err)
	}
	if keys.gets != 3 {
		t.Errorf("store asked %d times for 3 lookups", keys.gets)
	}
	// The root key never touches the store.
	if _, ok, _ := kr.Lookup(ctx, "ROOT"); !ok || keys.gets != 3 {
		t.Errorf("root lookup: ok=%v, store asked %d times", ok, keys.gets)
	}
}

func TestKeyringStoreFailure(t *testing.T) {
	ctx := context.Background()
	keys := newMemKeys(store.AccessKey{ID: "AKUSER", Secret: "user-secret"})
	keys.failErr = errors.New("db down")
	kr := &Keyring{RootAccessKey: "ROOT", RootSecretKey: "root-secret", Keys: keys}
	if _, ok, err := kr.Lookup(ctx, "AKUSER"); err == nil || ok {
		t.Fatalf("failing store: ok=%v err=%v, want an error", ok, err)
	}
	if _, _, _, err := kr.Policy(ctx, "AKUSER"); err == nil {
		t.Fatal("Policy with a failing store succeeded")
	}
	// The root key works while the store is down.
	if sec, ok, err := kr.Lookup(ctx, "ROOT"); err != nil || !ok || sec != "root-secret" {
		t.Fatalf("root while store down: %q %v %v", sec, ok, err)
	}
}

func TestKeyringPolicy(t *testing.T) {
	ctx := context.Background()
	keys := newMemKeys(
		store.AccessKey{ID: "AKRO", Secret: "s", Buckets: []string{"a", "b"}, ReadOnly: true},
		store.AccessKey{ID: "AKRW", Secret: "s"},
		store.AccessKey{ID: "ROOT", Secret: "s", ReadOnly: true, Buckets: []string{"x"}},
	)
	kr := &Keyring{RootAccessKey: "ROOT", RootSecretKey: "root-secret", Keys: keys}
	tests := []struct {
		key          string
		buckets      []string
		readOnly     bool
		root         bool
		wantNotFound bool
	}{
		{key: "ROOT", root: true}, // a stored key with the root's id cannot restrict root
		{key: "AKRO", buckets: []string{"a", "b"}, readOnly: true},
		{key: "AKRW"},
		{key: "AKNONE", wantNotFound: true},
		{key: "", wantNotFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			b, ro, root, err := kr.Policy(ctx, tt.key)
			if tt.wantNotFound {
				if !errors.Is(err, store.ErrNoSuchAccessKey) {
					t.Fatalf("Policy(%q) err = %v, want ErrNoSuchAccessKey", tt.key, err)
				}
				return
			}
			if err != nil || !slices.Equal(b, tt.buckets) || ro != tt.readOnly || root != tt.root {
				t.Fatalf("Policy(%q) = %v %v %v %v; want %v %v %v", tt.key, b, ro, root, err, tt.buckets, tt.readOnly, tt.root)
			}
		})
	}
}

// TestKeyringVerifier: requests signed with a stored key verify through the
// Verifier; after the key is deleted the same request is InvalidAccessKeyId,
// and one signed with a wrong secret is SignatureDoesNotMatch.
func TestKeyringVerifier(t *testing.T) {
	ctx := context.Background()
	keys := newMemKeys(store.AccessKey{ID: "AKUSER", Secret: "user-secret-0123"})
	v := &Verifier{
		Region: testRegion,
		Creds:  &Keyring{RootAccessKey: testAK, RootSecretKey: testSK, Keys: keys},
		Now:    func() time.Time { return t0 },
	}
	sign := func(ak, sk string) *http.Request {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+testHost+"/bucket/k", nil)
		if err != nil {
			t.Fatal(err)
		}
		payload := sha256Hex256(nil)
		req.Header.Set("X-Amz-Content-Sha256", payload)
		signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		if err := signer.SignHTTP(ctx, aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, req, payload, "s3", testRegion, t0); err != nil {
			t.Fatal(err)
		}
		return overTheWire(t, req)
	}
	tests := []struct {
		name     string
		ak, sk   string
		deleted  bool
		wantCode string
	}{
		{"root", testAK, testSK, false, ""},
		{"stored key", "AKUSER", "user-secret-0123", false, ""},
		{"stored key, wrong secret", "AKUSER", "not-the-secret", false, CodeSignatureDoesNotMatch},
		{"unknown key", "AKNONE", "whatever-secret", false, CodeInvalidAccessKeyID},
		{"deleted key", "AKUSER", "user-secret-0123", true, CodeInvalidAccessKeyID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.deleted {
				if err := keys.DeleteKey(ctx, tt.ak); err != nil {
					t.Fatal(err)
				}
			}
			res, err := v.Verify(sign(tt.ak, tt.sk))
			if got := errCode(err); got != tt.wantCode {
				t.Fatalf("Verify: code %q, want %q", got, tt.wantCode)
			}
			if tt.wantCode == "" && res.AccessKey != tt.ak {
				t.Errorf("AccessKey = %q, want %q", res.AccessKey, tt.ak)
			}
			if err != nil && strings.Contains(err.Error(), tt.sk) {
				t.Error("secret leaked into the error")
			}
		})
	}
}
