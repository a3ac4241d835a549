package store

import (
	"errors"
	"strings"
	"testing"
)

func TestValidBucketName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"abc", true},
		{"my-bucket.example-1", true},
		{"a1.b2.c3", true},
		{strings.Repeat("a", 63), true},
		{"192.168.5.4x", true}, // not an IP address
		{"xn-abc", true},
		{"ab", false},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"MyBucket", false},
		{"my_bucket", false},
		{"-abc", false},
		{"abc-", false},
		{".abc", false},
		{"abc.", false},
		{"a..b", false},
		{"a.-b", false},
		{"a-.b", false},
		{"192.168.5.4", false},
		{"xn--abc", false},
		{"sthree-abc", false},
		{"abc-s3alias", false},
		{"abc--ol-s3", false},
		{"abc--x-s3", false},
		{"abc.mrap", false},
		{"amzn-s3-demo-bucket", false},
		{"abc--table-s3", false},
		{"amzn-s3-demo", true}, // the prefix is the whole "amzn-s3-demo-"
		{"abc-table-s3", true},
		{"abc def", false},
		{"abc/def", false},
		{"ab\u00e9c", false},
	}
	for _, tt := range tests {
		err := ValidBucketName(tt.name)
		if tt.ok && err != nil {
			t.Errorf("ValidBucketName(%q) = %v, want nil", tt.name, err)
		}
		if !tt.ok && !errors.Is(err, ErrInvalidBucketName) {
			t.Errorf("ValidBucketName(%q) = %v, want ErrInvalidBucketName", tt.name, err)
		}
	}
}

func TestValidKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want error
	}{
		{"simple", "a", nil},
		{"slashes and dots", "a//b/./../c", nil},
		{"unicode", "日本語/ключ/🙂", nil},
		{"tab newline cr", "a\tb\nc\rd", nil},
		{"literal replacement char", "a\uFFFDb", nil},
		{"max length", strings.Repeat("k", MaxKeyLength), nil},
		{"max length multibyte", strings.Repeat("é", MaxKeyLength/2), nil},
		{"empty", "", ErrInvalidKey},
		{"too long", strings.Repeat("k", MaxKeyLength+1), ErrKeyTooLong},
		{"too long multibyte", strings.Repeat("é", MaxKeyLength/2) + "x", ErrKeyTooLong},
		{"NUL", "a\x00b", ErrInvalidKey},
		{"control 0x1f", "a\x1fb", ErrInvalidKey},
		{"bell", "\a", ErrInvalidKey},
		{"invalid utf-8", "a\xffb", ErrInvalidKey},
		{"truncated utf-8", "a\xe6\x97", ErrInvalidKey},
		{"surrogate encoded", "a\xed\xa0\x80", ErrInvalidKey},
		{"non-character FFFE", "a\uFFFE", ErrInvalidKey},
		{"non-character FFFF", "a\uFFFF", ErrInvalidKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidKey(tt.key)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ValidKey = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("ValidKey = %v, want %v", err, tt.want)
			}
		})
	}
}
