package s3api

import (
	"crypto/md5" //nolint:gosec // Content-MD5 is an S3 protocol digest, not security
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/store"
)

func checksumHeader(alg string) string { return "x-amz-checksum-" + strings.ToLower(alg) }

// checksumHeaders holds, per store.ChecksumAlgorithms, the x-amz-checksum-*
// name as messages show it and as the header map keys it: canonicalizing on
// every request would allocate.
var checksumHeaders = func() (out []struct{ alg, name, key string }) {
	for _, alg := range store.ChecksumAlgorithms() {
		n := checksumHeader(alg)
		out = append(out, struct{ alg, name, key string }{alg, n, http.CanonicalHeaderKey(n)})
	}
	return out
}()

// checksumHeaderKey is the canonical x-amz-checksum-* header key of alg.
func checksumHeaderKey(alg string) string {
	for _, c := range checksumHeaders {
		if c.alg == alg {
			return c.key
		}
	}
	return http.CanonicalHeaderKey(checksumHeader(alg))
}

// parseChecksumHeaders returns the x-amz-checksum-* values the client declared
// (at most one, as AWS requires), each checked to be base64 of the right size.
func parseChecksumHeaders(h http.Header) (map[string]string, error) {
	return parseChecksumValues(h, false)
}

// parseChecksumValues is parseChecksumHeaders; with composite set (the
// object checksum of CompleteMultipartUpload) a value may carry the "-N"
// part-count suffix of a COMPOSITE checksum.
func parseChecksumValues(h http.Header, composite bool) (map[string]string, error) {
	var m map[string]string
	for _, c := range checksumHeaders {
		alg, hdr, vals := c.alg, c.name, h[c.key]
		if len(vals) == 0 {
			continue
		}
		v := vals[0]
		b64 := v
		if composite {
			b64, _, _ = store.SplitComposite(v)
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if len(vals) > 1 || err != nil || len(raw) != store.ChecksumSize(alg) {
			return nil, errInvalidRequest.withMessage("Value for " + hdr + " header is invalid.")
		}
		if m != nil {
			return nil, errMultipleChecksums
		}
		m = map[string]string{alg: v}
	}
	return m, nil
}

// parseChecksumAlgorithm reads x-amz-sdk-checksum-algorithm or
// x-amz-checksum-algorithm ("" when neither is present). When both are
// present they must agree.
func parseChecksumAlgorithm(h http.Header) (string, error) {
	sdk, plain := strings.ToUpper(h.Get("X-Amz-Sdk-Checksum-Algorithm")), strings.ToUpper(h.Get("X-Amz-Checksum-Algorithm"))
	v := sdk
	if v == "" {
		v = plain
	} else if plain != "" && plain != sdk {
		return "", errSDKChecksumAlone
	}
	if v == "" {
		return "", nil
	}
	if store.ChecksumSize(v) == 0 {
		return "", errUnsupportedChecksumAlg
	}
	return v, nil
}

// computeChecksum returns the base64 x-amz-checksum of data.
func computeChecksum(alg string, data []byte) (string, error) {
	v := store.ChecksumOf(alg, data)
	if v == "" {
		return "", fmt.Errorf("checksum algorithm %q: %w", alg, errUnsupportedChecksumAlg)
	}
	return v, nil
}

// parseContentMD5 decodes Content-MD5 (nil when absent). Present but
// empty is InvalidDigest, as S3 answers, not "no digest".
func parseContentMD5(h http.Header) ([]byte, error) {
	vv := h.Values("Content-Md5")
	if len(vv) == 0 {
		return nil, nil
	}
	v := vv[0]
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(raw) != md5.Size {
		return nil, errInvalidDigest
	}
	return raw, nil
}

// verifySmallBody checks a parsed request body (DeleteObjects) against
// Content-MD5 or an x-amz-checksum-* header or trailer; AWS requires one of them.
func verifySmallBody(rq *request, body []byte) error {
	verified := false
	want, err := parseContentMD5(rq.r.Header)
	if err != nil {
		return err
	}
	if want != nil {
		got := md5.Sum(body) //nolint:gosec // protocol digest
		if subtle.ConstantTimeCompare(got[:], want) != 1 {
			return errBadDigest
		}
		verified = true
	}
	sums, err := parseChecksumHeaders(rq.r.Header)
	if err != nil {
		return err
	}
	if rq.trailer != nil {
		alg, val, err := rq.trailer()
		if err != nil {
			return fmt.Errorf("read trailing checksum: %w", err)
		}
		if alg != "" {
			if sums == nil {
				sums = map[string]string{}
			}
			sums[strings.ToUpper(alg)] = val
		}
	}
	for alg, val := range sums {
		got, err := computeChecksum(alg, body)
		if err != nil {
			return err
		}
		if got != val {
			return errBadDigest.withMessage("The " + alg + " you specified did not match the calculated checksum.")
		}
		verified = true
	}
	if !verified {
		return errMissingContentMD5
	}
	return nil
}

// parseMeta reads the stored metadata of PUT, CopyObject (REPLACE) and
// CreateMultipartUpload.
func parseMeta(h http.Header) (store.ObjectMeta, error) {
	m := store.ObjectMeta{
		ContentType:        h.Get("Content-Type"),
		ContentEncoding:    auth.StripAWSChunked(h.Get("Content-Encoding")),
		ContentDisposition: h.Get("Content-Disposition"),
		ContentLanguage:    h.Get("Content-Language"),
		CacheControl:       h.Get("Cache-Control"),
		Expires:            h.Get("Expires"),
	}
	var err error
	if m.StorageClass, err = parseStorageClass(h); err != nil {
		return m, err
	}
	if m.Tags, err = parseTaggingHeader(h); err != nil {
		return m, err
	}
	size := 0
	for name, vals := range h {
		lname := strings.ToLower(name)
		if !strings.HasPrefix(lname, "x-amz-meta-") || len(lname) == len("x-amz-meta-") {
			continue
		}
		k := strings.TrimPrefix(lname, "x-amz-meta-")
		v := decodeMetaValue(strings.Join(vals, ","))
		if m.User == nil {
			m.User = map[string]string{}
		}
		m.User[k] = v
		size += len(k) + len(v)
	}
	if size > maxUserMeta {
		return m, errMetadataTooLarge
	}
	return m, nil
}

// decodeMetaValue reads a user metadata value as AWS does: RFC 2047
// encoded-words (=?UTF-8?B?...?=) are decoded before storing. A raw value
// that is valid UTF-8 is kept as it is (AWS would read its bytes as
// ISO-8859-1; keeping UTF-8 is what the clients that send raw UTF-8 mean);
// invalid UTF-8 is read as ISO-8859-1 so that what we store is always text.
func decodeMetaValue(v string) string {
	if strings.Contains(v, "=?") {
		if dec, err := metaWordDecoder.DecodeHeader(v); err == nil {
			v = dec
		}
	}
	if utf8.ValidString(v) {
		return v
	}
	r := make([]rune, 0, len(v))
	for i := 0; i < len(v); i++ {
		r = append(r, rune(v[i]))
	}
	return string(r)
}

// metaWordDecoder decodes RFC 2047 words in UTF-8, US-ASCII and ISO-8859-1
// (mime.WordDecoder knows those three without a CharsetReader).
var metaWordDecoder = &mime.WordDecoder{}

// encodeMetaValue is the inverse on the way out: a value that is not
// printable US-ASCII goes out as RFC 2047 B-encoded UTF-8, as AWS returns it
// ("mail-safe"); printable ASCII is unchanged.
func encodeMetaValue(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			// One word, upper-case "B" as AWS writes it (mime.BEncoding
			// writes "b" and splits long values into several words).
			return "=?UTF-8?B?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
		}
	}
	return v
}

// putOptions builds the store inputs of PutObject/UploadPart from the headers.
func putOptions(rq *request, withMeta bool) (store.PutOptions, error) {
	h := rq.r.Header
	opts := store.PutOptions{Size: rq.size, TrailerChecksum: rq.trailer,
		IfMatch: h.Get("If-Match"), IfNoneMatch: h.Get("If-None-Match")}
	if opts.Size > store.MaxObjectSize {
		return opts, fmt.Errorf("declared size %d: %w", opts.Size, store.ErrEntityTooLarge)
	}
	var err error
	if withMeta {
		if opts.Meta, err = parseMeta(h); err != nil {
			return opts, err
		}
	}
	if opts.ContentMD5, err = parseContentMD5(h); err != nil {
		return opts, err
	}
	if opts.Checksums, err = parseChecksumHeaders(h); err != nil {
		return opts, err
	}
	if opts.ChecksumAlgorithm, err = parseChecksumAlgorithm(h); err != nil {
		return opts, err
	}
	// The SDK header announces a checksum that a header or trailer carries;
	// S3 refuses it alone rather than compute the checksum itself.
	if h.Get("X-Amz-Sdk-Checksum-Algorithm") != "" && len(opts.Checksums) == 0 &&
		rq.trailer == nil && h.Get("X-Amz-Trailer") == "" {
		return opts, errSDKChecksumAlone
	}
	return opts, nil
}

// parseConditions reads If-* (prefix "") or x-amz-copy-source-if-* headers.
// Unparseable dates are ignored, as AWS does.
func parseConditions(h http.Header, prefix string) store.Conditions {
	c := store.Conditions{
		IfMatch:     h.Get(prefix + "If-Match"),
		IfNoneMatch: h.Get(prefix + "If-None-Match"),
	}
	// An absent date is skipped: failing to parse "" allocates an error per
	// layout tried.
	if v := h.Get(prefix + "If-Modified-Since"); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			c.IfModifiedSince = &t
		}
	}
	if v := h.Get(prefix + "If-Unmodified-Since"); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			c.IfUnmodifiedSince = &t
		}
	}
	return c
}

// setChecksumHeader sets x-amz-checksum-<alg> (and its type) from c.
func setChecksumHeader(h http.Header, c store.Checksum) {
	if c.Algorithm == "" || c.Value == "" {
		return
	}
	h.Set(checksumHeaderKey(c.Algorithm), c.Value)
	typ := c.Type
	if typ == "" {
		typ = store.ChecksumFullObject
	}
	h.Set("X-Amz-Checksum-Type", typ)
}

// responseOverrides are the response-* query parameters of GetObject.
var responseOverrides = []struct{ query, header string }{
	{"response-content-type", "Content-Type"},
	{"response-content-language", "Content-Language"},
	{"response-expires", "Expires"},
	{"response-cache-control", "Cache-Control"},
	{"response-content-disposition", "Content-Disposition"},
	{"response-content-encoding", "Content-Encoding"},
}

// hasResponseOverride reports whether the request carries a response-*
// override. S3 honours them on signed requests only: an unsigned caller
// could otherwise make a public object's answer claim what its owner did not
// set.
func hasResponseOverride(rq *request) bool {
	for _, o := range responseOverrides {
		if rq.q.Has(o.query) {
			return true
		}
	}
	return false
}

// setObjectHeaders sets the headers that GET and HEAD return for info.
func setObjectHeaders(rq *request, info store.ObjectInfo) {
	h := rq.w.Header()
	setValidators(h, info)
	ct := info.Meta.ContentType
	if ct == "" {
		ct = "binary/octet-stream" // what AWS stores when no type was sent
	}
	h.Set("Content-Type", ct)
	for _, kv := range []struct{ k, v string }{
		{"Content-Encoding", info.Meta.ContentEncoding},
		{"Content-Disposition", info.Meta.ContentDisposition},
		{"Content-Language", info.Meta.ContentLanguage},
		{"Cache-Control", info.Meta.CacheControl},
		{"Expires", info.Meta.Expires},
		{"x-amz-storage-class", info.Meta.StorageClass},
	} {
		if kv.v != "" {
			h.Set(kv.k, kv.v)
		}
	}
	if n := len(info.Meta.Tags); n > 0 {
		h.Set("X-Amz-Tagging-Count", strconv.Itoa(n))
	}
	for k, v := range info.Meta.User {
		// Set directly: Header.Set would canonicalise the name (X-Amz-Meta-Origin),
		// and clients that keep the case (botocore) expect AWS's lower case.
		h["x-amz-meta-"+k] = []string{encodeMetaValue(v)}
	}
	h.Set("Accept-Ranges", "bytes")
	for _, o := range responseOverrides {
		if v := rq.q.Get(o.query); v != "" {
			h.Set(o.header, v)
		}
	}
}

// setValidators sets ETag and Last-Modified (also on 304 answers).
func setValidators(h http.Header, info store.ObjectInfo) {
	if info.ETag != "" {
		h.Set("ETag", quoteETag(info.ETag))
	}
	if !info.LastModified.IsZero() {
		h.Set("Last-Modified", httpTime(info.LastModified))
	}
}

// parsePartNumber reads ?partNumber (0 when absent), 1..10000.
func parsePartNumber(rq *request, required bool) (int, error) {
	v := rq.q.Get("partNumber")
	if v == "" {
		if required {
			return 0, errInvalidPartNumber
		}
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > store.MaxPartNumber {
		return 0, errInvalidPartNumber
	}
	return n, nil
}

// parseIntParam reads an optional non-negative integer query parameter.
func parseIntParam(rq *request, name string, def int, bad *apiError) (int, error) {
	v := rq.q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, bad
	}
	return n, nil
}

// orNow guards XML dates against engines that leave a time unset.
func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}
