package store

import (
	"encoding/xml"
	"errors"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for the store's parsers of client input. Run one with
// `go test -run '^$' -fuzz '^FuzzParseRange$' -fuzztime 10s ./store/`.

func FuzzParseRange(f *testing.F) {
	f.Add("bytes=0-9", int64(100))
	f.Add("bytes=-5", int64(3))
	f.Add("bytes=5-", int64(5))
	f.Add("bytes=0-0,2-3", int64(10))
	f.Add("bytes=9223372036854775807-", int64(1))
	f.Add("items=0-1", int64(0))
	f.Fuzz(func(t *testing.T, spec string, size int64) {
		if size < 0 {
			size = -(size + 1)
		}
		r, err := ParseRange(spec, size)
		switch {
		case err != nil:
			if !errors.Is(err, ErrInvalidRange) || r != nil {
				t.Fatalf("ParseRange(%q, %d) = %+v, %v", spec, size, r, err)
			}
		case r != nil:
			if r.Start < 0 || r.End < r.Start || r.End >= size {
				t.Fatalf("ParseRange(%q, %d) = %+v is outside the object", spec, size, *r)
			}
		}
	})
}

// FuzzValidKey: an accepted key is at most MaxKeyLength bytes of UTF-8 and
// survives an XML round trip unchanged (listings are XML).
func FuzzValidKey(f *testing.F) {
	f.Add("a/b/c.txt")
	f.Add("ünï cödé ✓ +=&")
	f.Add("tab\tnew\nline\rcr")
	f.Add("\x00")
	f.Add("\xff\xfe")
	f.Add("\uFFFE")
	f.Fuzz(func(t *testing.T, key string) {
		if err := ValidKey(key); err != nil {
			if !errors.Is(err, ErrInvalidKey) && !errors.Is(err, ErrKeyTooLong) {
				t.Fatalf("ValidKey(%q): unexpected error %v", key, err)
			}
			return
		}
		if key == "" || len(key) > MaxKeyLength || !utf8.ValidString(key) {
			t.Fatalf("ValidKey accepted %q", key)
		}
		type elem struct {
			Key string `xml:"Key"`
		}
		out, err := xml.Marshal(elem{Key: key})
		if err != nil {
			t.Fatalf("marshal %q: %v", key, err)
		}
		var back elem
		if err := xml.Unmarshal(out, &back); err != nil || back.Key != key {
			t.Fatalf("key %q does not survive XML: %q (%v)", key, back.Key, err)
		}
	})
}

func FuzzValidBucketName(f *testing.F) {
	f.Add("my-bucket")
	f.Add("a..b")
	f.Add("192.168.1.1")
	f.Add("xn--abc")
	f.Fuzz(func(t *testing.T, name string) {
		if err := ValidBucketName(name); err != nil {
			if !errors.Is(err, ErrInvalidBucketName) {
				t.Fatalf("ValidBucketName(%q): %v", name, err)
			}
			return
		}
		if len(name) < 3 || len(name) > 63 {
			t.Fatalf("accepted %q", name)
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
				t.Fatalf("accepted %q with byte %q", name, c)
			}
		}
	})
}

// FuzzMultipartChecksum: combining part checksums never panics, and a
// FULL_OBJECT CRC of parts equals the CRC of their concatenation.
func FuzzMultipartChecksum(f *testing.F) {
	f.Add([]byte("hello"), []byte("world"), uint8(0))
	f.Add([]byte(""), []byte("x"), uint8(1))
	f.Add([]byte("abc"), []byte(""), uint8(2))
	f.Fuzz(func(t *testing.T, a, b []byte, which uint8) {
		alg := []string{AlgCRC32, AlgCRC32C, AlgCRC64NVME}[int(which)%3]
		enc := func(p []byte) string { return b64(checksumOf(alg, p)) }
		parts := []PartInfo{
			{Number: 1, Size: int64(len(a)), Checksum: Checksum{Algorithm: alg, Value: enc(a)}},
			{Number: 2, Size: int64(len(b)), Checksum: Checksum{Algorithm: alg, Value: enc(b)}},
		}
		got, err := MultipartChecksum(alg, ChecksumFullObject, parts)
		if err != nil {
			t.Fatalf("MultipartChecksum: %v", err)
		}
		if want := enc(append(append([]byte{}, a...), b...)); got.Value != want {
			t.Fatalf("%s of %d+%d bytes: combined %s, want %s", alg, len(a), len(b), got.Value, want)
		}
	})
}
