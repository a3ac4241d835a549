package store

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"
)

// Bucket-name prefixes and suffixes that AWS's general purpose bucket naming
// rules reserve for its own features (IDN punycode, S3 internal names, the
// documentation's example names, access-point aliases, Object Lambda,
// multi-region access points, directory buckets, table buckets).
var (
	reservedBucketPrefixes = []string{"xn--", "sthree-", "amzn-s3-demo-"}
	reservedBucketSuffixes = []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"}
)

// ValidBucketName checks name against the S3 bucket naming rules: 3 to 63
// characters of lower-case letters, digits, '.' and '-', starting and ending
// with a letter or digit, no two adjacent periods, not shaped like an IPv4
// address, and none of the reserved prefixes and suffixes. The error wraps
// ErrInvalidBucketName.
func ValidBucketName(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("%w: %q: must be between 3 and 63 characters long", ErrInvalidBucketName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '.' || c == '-':
			if i == 0 || i == len(name)-1 {
				return fmt.Errorf("%w: %q: must begin and end with a letter or digit", ErrInvalidBucketName, name)
			}
		default:
			return fmt.Errorf("%w: %q: only lower-case letters, digits, '.' and '-' are allowed", ErrInvalidBucketName, name)
		}
	}
	// Every dot-separated label must be a DNS label, so that virtual-host
	// addressing (bucket.domain) works: no "..", ".-" or "-.".
	for _, bad := range []string{"..", ".-", "-."} {
		if strings.Contains(name, bad) {
			return fmt.Errorf("%w: %q: must not contain %q", ErrInvalidBucketName, name, bad)
		}
	}
	if addr, err := netip.ParseAddr(name); err == nil && addr.Is4() {
		return fmt.Errorf("%w: %q: must not be formatted as an IP address", ErrInvalidBucketName, name)
	}
	for _, p := range reservedBucketPrefixes {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("%w: %q: prefix %q is reserved", ErrInvalidBucketName, name, p)
		}
	}
	for _, s := range reservedBucketSuffixes {
		if strings.HasSuffix(name, s) {
			return fmt.Errorf("%w: %q: suffix %q is reserved", ErrInvalidBucketName, name, s)
		}
	}
	return nil
}

// ValidKey checks an object key before it is written: non-empty, at most
// MaxKeyLength bytes (ErrKeyTooLong), valid UTF-8, and only characters that
// XML 1.0 can carry (listings are XML: encoding/xml would silently replace
// the others with U+FFFD, so such a key could never be listed faithfully).
// Other failures wrap ErrInvalidKey.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: the key must not be empty", ErrInvalidKey)
	}
	if len(key) > MaxKeyLength {
		return fmt.Errorf("%w: %d bytes, at most %d allowed", ErrKeyTooLong, len(key), MaxKeyLength)
	}
	for i, r := range key {
		switch {
		case r == utf8.RuneError:
			// A literal U+FFFD is 3 bytes; a decoding error is 1 byte.
			if _, size := utf8.DecodeRuneInString(key[i:]); size == 1 {
				return fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrInvalidKey, i)
			}
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r':
			return fmt.Errorf("%w: control character U+%04X at byte %d", ErrInvalidKey, r, i)
		case r == 0xFFFE || r == 0xFFFF:
			return fmt.Errorf("%w: non-character U+%04X at byte %d", ErrInvalidKey, r, i)
		}
	}
	return nil
}
