package s3api

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestStorageClassAndEncryptionHeaders covers the header rules of
// refusals.go one by one; conformance/noop_test.go drives them through a
// gateway with aws-sdk-go-v2.
func TestStorageClassAndEncryptionHeaders(t *testing.T) {
	for _, tc := range []struct {
		header, value string
		class         string // parseStorageClass's stored value
		code, inMsg   string // "" when accepted
	}{
		{"x-amz-storage-class", "", "", "", ""},
		{"x-amz-storage-class", "STANDARD", "", "", ""},
		{"x-amz-storage-class", "REDUCED_REDUNDANCY", "REDUCED_REDUNDANCY", "", ""},
		{"x-amz-storage-class", "GLACIER", "", "InvalidStorageClass", "GLACIER"},
		{"x-amz-storage-class", "standard", "", "InvalidStorageClass", ""},
		{"x-amz-server-side-encryption", "AES256", "", "NotImplemented", "x-amz-server-side-encryption"},
		{"x-amz-server-side-encryption", "aws:kms", "", "NotImplemented", "x-amz-server-side-encryption"},
		{"x-amz-server-side-encryption", "des", "", "InvalidArgument", "encryption method"},
		{"x-amz-server-side-encryption", "", "", "", ""},
		{"X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id", "k", "", "NotImplemented", "x-amz-server-side-encryption-aws-kms-key-id"},
		{"x-amz-server-side-encryption-context", "e30=", "", "NotImplemented", "x-amz-server-side-encryption-context"},
		{"x-amz-server-side-encryption-customer-algorithm", "AES256", "", "NotImplemented", "customer-algorithm"},
		{"x-amz-copy-source-server-side-encryption-customer-key", "a2V5", "", "NotImplemented", "x-amz-copy-source-server-side-encryption-customer-key"},
	} {
		t.Run(tc.header+"="+tc.value, func(t *testing.T) {
			h := http.Header{}
			h.Set(tc.header, tc.value)
			class, err := parseStorageClass(h)
			if err == nil {
				err = checkEncryption(h)
			}
			if class != tc.class {
				t.Errorf("storage class %q, want %q", class, tc.class)
			}
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.Code != tc.code || !strings.Contains(ae.Message, tc.inMsg) {
				t.Fatalf("got %#v, want %s naming %q", err, tc.code, tc.inMsg)
			}
		})
	}
}
