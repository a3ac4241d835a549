package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseRange resolves a Range header against the object size. It accepts one
// byte range: "bytes=a-b", "bytes=a-" or "bytes=-n". An empty spec, a
// syntactically invalid one or a multi-range spec yields nil, nil: S3 ignores
// those and returns the whole object. An unsatisfiable range (start beyond the
// end, a zero-length suffix, a first-pos range of an empty object) is
// ErrInvalidRange; a suffix range of an empty object selects the whole (empty)
// object, as S3 answers it.
// The end is clamped to size-1.
func ParseRange(spec string, size int64) (*ByteRange, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	unit, set, ok := strings.Cut(spec, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") || strings.Contains(set, ",") {
		return nil, nil
	}
	first, last, ok := strings.Cut(strings.TrimSpace(set), "-")
	if !ok {
		return nil, nil
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)

	if first == "" {
		// Suffix range: the last n bytes.
		n, ok := parseOffset(last)
		if !ok {
			return nil, nil
		}
		if size == 0 && n > 0 {
			// S3 answers a suffix range of an empty object with the whole
			// (empty) object, 200.
			return nil, nil
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: bytes=-%d of a %d-byte object", ErrInvalidRange, n, size)
		}
		n = min(n, size)
		return &ByteRange{Start: size - n, End: size - 1}, nil
	}

	start, ok := parseOffset(first)
	if !ok {
		return nil, nil
	}
	end := int64(-1)
	if last != "" {
		if end, ok = parseOffset(last); !ok || end < start {
			// RFC 9110: a last-pos below first-pos makes the range invalid,
			// and an invalid Range header is ignored.
			return nil, nil
		}
	}
	if start >= size {
		return nil, fmt.Errorf("%w: start %d is beyond the %d-byte object", ErrInvalidRange, start, size)
	}
	if end < 0 || end >= size {
		end = size - 1
	}
	return &ByteRange{Start: start, End: end}, nil
}

// parseOffset parses a non-negative decimal without sign; overflow is invalid.
func parseOffset(s string) (int64, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// EvalConditions evaluates GET/HEAD preconditions in the order RFC 9110 and S3
// use: a failing If-Match is ErrPreconditionFailed; without If-Match, a
// failing If-Unmodified-Since is ErrPreconditionFailed; a matching
// If-None-Match is ErrNotModified; without If-None-Match, an unmodified
// If-Modified-Since is ErrNotModified. ETags compare without quotes (and
// without a weak "W/" prefix), "*" matches any; dates compare at second
// precision, as HTTP dates carry no more.
func EvalConditions(c Conditions, etag string, lastModified time.Time) error {
	etag = trimETag(etag)
	lm := lastModified.Truncate(time.Second)
	if c.IfMatch != "" {
		if !etagListMatches(c.IfMatch, etag) {
			return fmt.Errorf("%w: If-Match %s does not match ETag %q", ErrPreconditionFailed, c.IfMatch, etag)
		}
	} else if c.IfUnmodifiedSince != nil && lm.After(c.IfUnmodifiedSince.Truncate(time.Second)) {
		return fmt.Errorf("%w: modified at %s, after If-Unmodified-Since", ErrPreconditionFailed, lm.UTC().Format(time.RFC1123))
	}
	if c.IfNoneMatch != "" {
		if etagListMatches(c.IfNoneMatch, etag) {
			return fmt.Errorf("%w: If-None-Match %s matches", ErrNotModified, c.IfNoneMatch)
		}
	} else if c.IfModifiedSince != nil && !lm.After(c.IfModifiedSince.Truncate(time.Second)) {
		return fmt.Errorf("%w: not modified since %s", ErrNotModified, c.IfModifiedSince.UTC().Format(time.RFC1123))
	}
	return nil
}

// etagListMatches reports whether a comma-separated If-Match / If-None-Match
// list contains etag or "*".
func etagListMatches(list, etag string) bool {
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "*" || (item != "" && trimETag(item) == etag) {
			return true
		}
	}
	return false
}

// trimETag removes a weak prefix and surrounding quotes.
func trimETag(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "W/")
	return strings.Trim(s, `"`)
}
