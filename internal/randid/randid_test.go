package randid

import (
	"encoding/base64"
	"testing"
)

// TestBase64URL: 1 in 64 random base64url texts starts with '-', so 2,000
// draws of each size find one unless Base64URL avoids it.
func TestBase64URL(t *testing.T) {
	for _, n := range []int{24, 30, 32} {
		seen := map[string]bool{}
		for range 2000 {
			s := Base64URL(make([]byte, n))
			b, err := base64.RawURLEncoding.DecodeString(s)
			if err != nil || len(b) != n || s[0] == '-' || seen[s] {
				t.Fatalf("Base64URL(%d bytes) gave %q (%v)", n, s, err)
			}
			seen[s] = true
		}
	}
}
