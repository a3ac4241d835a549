package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"
)

// TestHMACSHA256MatchesCryptoHMAC: the stack HMAC is crypto/hmac's, for keys
// shorter than, equal to and longer than the block.
func TestHMACSHA256MatchesCryptoHMAC(t *testing.T) {
	for _, keyLen := range []int{0, 1, 32, 63, 64, 65, 200} {
		for _, dataLen := range []int{0, 1, 55, 64, 200, 5000} {
			key := bytes.Repeat([]byte{byte(keyLen + 1)}, keyLen)
			data := bytes.Repeat([]byte{byte(dataLen + 7)}, dataLen)
			m := hmac.New(sha256.New, key)
			m.Write(data)
			if got := hmacSHA256(key, data); !bytes.Equal(got[:], m.Sum(nil)) {
				t.Errorf("key %d bytes, data %d bytes: differs from crypto/hmac", keyLen, dataLen)
			}
		}
	}
}

func TestSigEqual(t *testing.T) {
	want := strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		got string
		ok  bool
	}{
		{want, true},
		{strings.ToUpper(want), true},
		{want[:63], false},
		{want + "0", false},
		{want[:63] + "0", false},
		{want[:63] + "\xef", false},
		{"", false},
	}
	for _, tt := range tests {
		if sigEqual(want, tt.got) != tt.ok {
			t.Errorf("sigEqual(%q) = %v", tt.got, !tt.ok)
		}
	}
}

// TestHeaderLookup: the allocation-free lookup answers as Header.Values.
func TestHeaderLookup(t *testing.T) {
	h := http.Header{}
	for _, k := range []string{"X-Amz-Date", "Content-Md5", "X-Amz-Meta-A1-B", "Weird_Name", "x-lower"} {
		h[k] = []string{"v of " + k}
	}
	for _, name := range []string{"x-amz-date", "content-md5", "x-amz-meta-a1-b", "weird_name", "x-lower", "absent",
		"-x", "x--y", strings.Repeat("a", 100)} {
		if got, want := headerLookup(h, name), h.Values(name); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%q: %q, Values gives %q", name, got, want)
		}
	}
}

func TestURIEncode(t *testing.T) {
	tests := []struct {
		in          string
		encodeSlash bool
		want        string
	}{
		{"plain-Name_1.2~", true, "plain-Name_1.2~"},
		{"a/b", false, "a/b"},
		{"a/b", true, "a%2Fb"},
		{"a b+c", true, "a%20b%2Bc"},
		{"ü", false, "%C3%BC"},
		{"", true, ""},
	}
	for _, tt := range tests {
		if got := uriEncode(tt.in, tt.encodeSlash); got != tt.want {
			t.Errorf("uriEncode(%q, %v) = %q, want %q", tt.in, tt.encodeSlash, got, tt.want)
		}
	}
}
