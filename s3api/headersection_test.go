package s3api

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHeaderSectionSize: the section counts "Name: value" and CRLF per
// field, Host included, and its limit is 8192 bytes inclusive.
func TestHeaderSectionSize(t *testing.T) {
	base := httptest.NewRequest("PUT", "http://h/b/k", nil) // Host "h": 9 bytes with ": " and CRLF
	const fixed = len("Host: h\r\n") + len("X-Pad: \r\n")
	for _, tc := range []struct {
		name string
		pad  int
		over bool
	}{
		{"at the limit", maxHeaderSection - fixed, false},
		{"one byte over", maxHeaderSection - fixed + 1, true},
		{"small", 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base.Clone(base.Context())
			r.Header.Set("X-Pad", strings.Repeat("a", tc.pad))
			if got := headerSectionSize(r); got != fixed+tc.pad || (got > maxHeaderSection) != tc.over {
				t.Fatalf("size %d (over %v), want %d (over %v)", got, got > maxHeaderSection, fixed+tc.pad, tc.over)
			}
		})
	}
}
