package auth

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	sigV4Algorithm = "AWS4-HMAC-SHA256"
	iso8601Format  = "20060102T150405Z"
	scopeDateFmt   = "20060102"
	scopeService   = "s3"
	scopeTerm      = "aws4_request"

	unsignedPayload          = "UNSIGNED-PAYLOAD"
	streamingSigned          = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	streamingSignedTrailer   = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	streamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	emptySHA256              = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

	// maxAuthHeader bounds the Authorization header we are willing to parse.
	maxAuthHeader = 8 << 10
)

// queryParam is one decoded query parameter, in wire order.
type queryParam struct{ key, value string }

type queryParams []queryParam

// parseRawQuery decodes a raw query string without dropping anything: keys
// without '=' get an empty value, undecodable escapes are kept verbatim (they
// then simply fail the signature rather than the parse).
func parseRawQuery(raw string) queryParams {
	var q queryParams
	for raw != "" {
		var part string
		part, raw, _ = strings.Cut(raw, "&")
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		q = append(q, queryParam{key: unescapeQuery(k), value: unescapeQuery(v)})
	}
	return q
}

func unescapeQuery(s string) string {
	u, err := url.QueryUnescape(s)
	if err != nil {
		return s
	}
	return u
}

func (q queryParams) has(key string) bool {
	_, ok := q.get(key)
	return ok
}

// count is how many times key occurs.
func (q queryParams) count(key string) int {
	n := 0
	for _, p := range q {
		if p.key == key {
			n++
		}
	}
	return n
}

func (q queryParams) get(key string) (string, bool) {
	for _, p := range q {
		if p.key == key {
			return p.value, true
		}
	}
	return "", false
}

// canonical is the SigV4 canonical query string: every name and value
// RFC 3986-encoded, sorted by encoded name then value; exclude is left out.
func (q queryParams) canonical(exclude string) string {
	enc := make([]queryParam, 0, len(q))
	for _, p := range q {
		if exclude != "" && p.key == exclude {
			continue
		}
		enc = append(enc, queryParam{key: uriEncode(p.key, true), value: uriEncode(p.value, true)})
	}
	slices.SortFunc(enc, func(a, b queryParam) int {
		return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.value, b.value))
	})
	var b strings.Builder
	for i, p := range enc {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.key)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	return b.String()
}

// uriEncode percent-encodes every byte outside the RFC 3986 unreserved set
// (and '/' too when encodeSlash), with upper-case hex.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	keep := func(c byte) bool { return isUnreserved(c) || (c == '/' && !encodeSlash) }
	i := 0
	for i < len(s) && keep(s[i]) {
		i++
	}
	if i == len(s) {
		return s // nothing to encode: most names and values
	}
	var b strings.Builder
	b.Grow(len(s) + 2*(len(s)-i))
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		c := s[i]
		if keep(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '~'
}

// canonicalURI is the request path exactly as the client sent it: S3 neither
// normalises nor re-encodes it.
func canonicalURI(r *http.Request) string {
	if u := r.RequestURI; strings.HasPrefix(u, "/") {
		if i := strings.IndexByte(u, '?'); i >= 0 {
			u = u[:i]
		}
		return u
	}
	var p string
	if op := r.URL.Opaque; op != "" {
		// Opaque "//host/path" (client-side requests that pin the path).
		op, _, _ = strings.Cut(op, "?")
		op = strings.TrimPrefix(op, "//")
		if i := strings.IndexByte(op, '/'); i >= 0 {
			p = op[i:]
		}
	} else {
		p = r.URL.EscapedPath()
	}
	if p == "" {
		p = "/"
	}
	return p
}

// requestHost is the Host the client sent, port included as sent.
func requestHost(r *http.Request) string {
	if r.Host != "" {
		return r.Host
	}
	return r.URL.Host
}

// appendHeaderValues appends the values of a signed header as the client sent
// them, trimmed, inner runs of spaces collapsed, repeats joined by ','.
// net/http moves Host and Transfer-Encoding out of the header map and may
// hold Content-Length only in r.ContentLength.
func appendHeaderValues(dst []byte, r *http.Request, name string) []byte {
	switch name {
	case "host":
		return append(dst, requestHost(r)...)
	case "content-length":
		if v := r.Header["Content-Length"]; len(v) > 0 {
			return appendValues(dst, v)
		}
		if r.ContentLength >= 0 {
			return strconv.AppendInt(dst, r.ContentLength, 10)
		}
		return dst
	case "transfer-encoding":
		if v := r.Header["Transfer-Encoding"]; len(v) > 0 {
			return appendValues(dst, v)
		}
		return appendValues(dst, []string{strings.Join(r.TransferEncoding, ",")})
	}
	return appendValues(dst, headerLookup(r.Header, name))
}

func appendValues(dst []byte, vals []string) []byte {
	for i, v := range vals {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, strings.TrimSpace(collapseSpaces(v))...)
	}
	return dst
}

// headerLookup is h.Values(name) for a lower-case name, without building the
// canonical key on the heap for the usual names (letters, digits, '-').
func headerLookup(h http.Header, name string) []string {
	var buf [64]byte
	if len(name) > len(buf) {
		return h.Values(name)
	}
	key, upper := buf[:len(name)], true
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z':
			if upper {
				c -= 'a' - 'A'
			}
		case '0' <= c && c <= '9', c == '-':
		default:
			return h.Values(name)
		}
		key[i] = c
		upper = c == '-'
	}
	return h[string(key)] // the conversion in a map index does not allocate
}

// appendCanonicalHeaders appends the signed headers in the order the client
// listed them, one "name:values\n" line each.
func appendCanonicalHeaders(dst []byte, r *http.Request, signed []string) []byte {
	for _, name := range signed {
		dst = append(dst, name...)
		dst = append(dst, ':')
		dst = appendHeaderValues(dst, r, strings.ToLower(name))
		dst = append(dst, '\n')
	}
	return dst
}

func collapseSpaces(s string) string {
	if !strings.Contains(s, "  ") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	prevSpace := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' && prevSpace {
			continue
		}
		prevSpace = c == ' '
		b.WriteByte(c)
	}
	return b.String()
}

// hmacSHA256 is HMAC-SHA256 (RFC 2104) written out so that it runs on the
// stack: crypto/hmac allocates two digests and both pads for every use.
func hmacSHA256(key, data []byte) [sha256.Size]byte {
	if len(key) > sha256.BlockSize {
		k := sha256.Sum256(key)
		key = k[:]
	}
	var pad [sha256.BlockSize]byte
	copy(pad[:], key)
	for i := range pad {
		pad[i] ^= 0x36
	}
	h := sha256.New()
	h.Write(pad[:])
	h.Write(data)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	for i := range pad {
		pad[i] ^= 0x36 ^ 0x5c
	}
	h.Reset()
	h.Write(pad[:])
	h.Write(sum[:])
	h.Sum(sum[:0])
	return sum
}

// credential is a parsed "AK/date/region/service/aws4_request".
type credential struct {
	accessKey, date, region, service string
}

func (c credential) scope() string {
	return c.date + "/" + c.region + "/" + c.service + "/" + scopeTerm
}

// parseCredential splits from the right, so only the scope is rigid.
func parseCredential(s string) (credential, bool) {
	var parts [4]string // date, region, service, terminator
	rest := s
	for i := len(parts) - 1; i >= 0; i-- {
		j := strings.LastIndexByte(rest, '/')
		if j < 0 {
			return credential{}, false
		}
		rest, parts[i] = rest[:j], rest[j+1:]
	}
	c := credential{accessKey: rest, date: parts[0], region: parts[1], service: parts[2]}
	if c.accessKey == "" || parts[3] != scopeTerm || c.service == "" || c.region == "" {
		return credential{}, false
	}
	if _, err := time.Parse(scopeDateFmt, c.date); err != nil || len(c.date) != 8 {
		return credential{}, false
	}
	return c, true
}

// v4Header is a parsed SigV4 Authorization header.
type v4Header struct {
	cred          credential
	signedHeaders []string
	signature     string
}

// parseV4Header parses `AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
// Signature=...`.
func parseV4Header(authz string) (*v4Header, *Error) {
	if len(authz) > maxAuthHeader {
		return nil, malformedHeader("The authorization header is too long")
	}
	rest, ok := strings.CutPrefix(authz, sigV4Algorithm)
	if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
		return nil, malformedHeader("The authorization header is malformed; the authorization mechanism is unsupported")
	}
	var h v4Header
	var haveCred, haveSH, haveSig bool
	for field := range strings.SplitSeq(rest, ",") {
		field = strings.TrimSpace(field)
		if field == "" {
			continue
		}
		k, val, ok := strings.Cut(field, "=")
		if !ok {
			return nil, malformedHeader("The authorization header is malformed; a component is not a key=value pair")
		}
		switch k {
		case "Credential":
			if haveCred {
				return nil, malformedHeader("The authorization header is malformed; Credential is repeated")
			}
			c, ok := parseCredential(val)
			if !ok {
				return nil, malformedHeader("The authorization header is malformed; the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\"")
			}
			h.cred, haveCred = c, true
		case "SignedHeaders":
			if haveSH {
				return nil, malformedHeader("The authorization header is malformed; SignedHeaders is repeated")
			}
			sh, ok := parseSignedHeaders(val)
			if !ok {
				return nil, malformedHeader("The authorization header is malformed; SignedHeaders is invalid")
			}
			h.signedHeaders, haveSH = sh, true
		case "Signature":
			if haveSig {
				return nil, malformedHeader("The authorization header is malformed; Signature is repeated")
			}
			if !isHexSig(val) {
				return nil, malformedHeader("The authorization header is malformed; Signature is invalid")
			}
			h.signature, haveSig = val, true
		default:
			return nil, malformedHeader("The authorization header is malformed; unknown component " + strconv.Quote(truncate(k, 32)))
		}
	}
	if !haveCred || !haveSH || !haveSig {
		return nil, malformedHeader("The authorization header is malformed; it needs Credential, SignedHeaders and Signature")
	}
	return &h, nil
}

func parseSignedHeaders(s string) ([]string, bool) {
	if s == "" {
		return nil, false
	}
	names := strings.Split(s, ";")
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, " \t:") {
			return nil, false
		}
	}
	return names, true
}

// isHexSig reports whether s looks like a hex-encoded HMAC-SHA256.
func isHexSig(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func containsFold(list []string, name string) bool {
	for _, n := range list {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// v4Signature computes the request signature; it also returns the canonical
// request and the string to sign, which a SignatureDoesNotMatch answer shows
// the client. Both are appended to dst (a caller's stack buffer, so that the
// usual request builds them without allocating).
func v4Signature(dst, key []byte, amzDate, scope string, r *http.Request, query string, signed []string, payload string) (sig string, creq, sts []byte) {
	dst = appendLines(dst, r.Method, canonicalURI(r), query)
	dst = appendCanonicalHeaders(dst, r, signed)
	dst = append(dst, '\n')
	for i, name := range signed {
		if i > 0 {
			dst = append(dst, ';')
		}
		dst = append(dst, name...)
	}
	dst = append(dst, '\n')
	dst = append(dst, payload...)
	n := len(dst)
	creq = dst[:n:n]
	sum := sha256.Sum256(creq)
	sts = appendLines(dst[n:], sigV4Algorithm, amzDate, scope)
	sts = hex.AppendEncode(sts, sum[:])
	mac := hmacSHA256(key, sts)
	return hex.EncodeToString(mac[:]), creq, sts
}

// appendLines appends each line and a '\n' after it.
func appendLines(dst []byte, lines ...string) []byte {
	for _, l := range lines {
		dst = append(dst, l...)
		dst = append(dst, '\n')
	}
	return dst
}

// sigEqual compares a hex signature with one the client sent (either case)
// in constant time.
func sigEqual(want, got string) bool {
	if len(want) != len(got) {
		return false
	}
	var d byte
	for i := 0; i < len(want); i++ {
		c := got[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		d |= want[i] ^ c
	}
	return d == 0
}

// requestTime reads X-Amz-Date, or the Date header when it is absent.
func requestTime(r *http.Request) (time.Time, *Error) {
	if vv := r.Header.Values("X-Amz-Date"); len(vv) > 0 {
		// Present but empty (or repeated) is not "absent": never fall back
		// to Date then.
		v := vv[0]
		if len(vv) > 1 || v == "" {
			return time.Time{}, newErr(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
		}
		t, err := time.Parse(iso8601Format, v)
		if err != nil {
			return time.Time{}, newErr(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
		}
		return t, nil
	}
	if v := r.Header.Get("Date"); v != "" {
		t, err := parseHTTPDate(v)
		if err != nil {
			return time.Time{}, newErr(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
		}
		return t.UTC(), nil
	}
	return time.Time{}, newErr(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
}

// checkScope validates the credential scope against the request date and our
// region; mk builds the error of the right family (header or query).
func (v *Verifier) checkScope(c credential, t time.Time, mk func(string) *Error) *Error {
	var buf [len(scopeDateFmt)]byte
	if c.date != string(t.AppendFormat(buf[:0], scopeDateFmt)) {
		return mk("Invalid credential date. Date is not the same as X-Amz-Date.")
	}
	if c.region != v.Region {
		// <Region> is what botocore reads to re-sign for the right region.
		e := mk("the region '" + truncate(c.region, 64) + "' is wrong; expecting '" + v.Region + "'")
		if e.Code == CodeAuthorizationHeaderMalformed || e.Code == CodeAuthorizationQueryParametersError {
			e.Details = append(e.Details, Detail{"Region", v.Region})
		}
		return e
	}
	if c.service != scopeService {
		return mk("the service '" + truncate(c.service, 64) + "' is wrong; expecting 's3'")
	}
	return nil
}

func (v *Verifier) verifyV4Header(r *http.Request, authz string, q queryParams) (*Result, error) {
	h, aerr := parseV4Header(authz)
	if aerr != nil {
		return nil, aerr
	}
	if !containsFold(h.signedHeaders, "host") {
		return nil, malformedHeader("The authorization header is malformed; host must be a signed header")
	}
	t, aerr := requestTime(r)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := v.checkScope(h.cred, t, func(m string) *Error { return malformedHeader("The authorization header is malformed; " + m) }); aerr != nil {
		return nil, aerr
	}
	if aerr := v.checkSkew(t); aerr != nil {
		return nil, aerr
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return nil, newErr(CodeInvalidRequest, "Missing required header for this request: x-amz-content-sha256")
	}
	if aerr := checkPayloadMode(payload); aerr != nil {
		return nil, aerr
	}
	// x-amz-date is the string to sign's date line when present.
	if names := unsignedAmzHeaders(r, h.signedHeaders, "x-amz-content-sha256", "x-amz-date"); len(names) > 0 {
		return nil, errUnsignedHeaders(names)
	}
	secret, aerr := v.lookup(r, h.cred.accessKey)
	if aerr != nil {
		return nil, aerr
	}
	amzDate, scope := t.Format(iso8601Format), h.cred.scope()
	key := v.keys.get(secret, h.cred.date, h.cred.region, h.cred.service)
	var buf [2048]byte
	want, creq, sts := v4Signature(buf[:0], key, amzDate, scope, r, q.canonical(""), h.signedHeaders, payload)
	if !sigEqual(want, h.signature) {
		return nil, errSignatureDetails(h.cred.accessKey, string(sts), h.signature, string(creq))
	}
	return payloadResult(r, h.cred.accessKey, payload, &chunkSigner{key: key, amzDate: amzDate, scope: scope, seed: want})
}

func (v *Verifier) verifyV4Presigned(r *http.Request, q queryParams) (*Result, error) {
	get := func(k string) (string, *Error) {
		val, ok := q.get(k)
		if !ok || val == "" {
			return "", malformedQuery("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
		}
		return val, nil
	}
	var vals [6]string
	for i, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		val, aerr := get(k)
		if aerr != nil {
			return nil, aerr
		}
		vals[i] = val
	}
	alg, credStr, dateStr, expStr, shStr, sig := vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]
	if alg != sigV4Algorithm {
		return nil, malformedQuery("X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
	}
	cred, ok := parseCredential(credStr)
	if !ok {
		return nil, malformedQuery("Error parsing the X-Amz-Credential parameter; the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
	}
	t, err := time.Parse(iso8601Format, dateStr)
	if err != nil {
		return nil, malformedQuery("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	if aerr := v.checkScope(cred, t, func(m string) *Error { return malformedQuery("Error parsing the X-Amz-Credential parameter; " + m) }); aerr != nil {
		return nil, aerr
	}
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil || exp < 1 {
		return nil, malformedQuery("X-Amz-Expires must be a positive integer")
	}
	if exp > maxPresignExpiry {
		return nil, malformedQuery("X-Amz-Expires must be less than a week (in seconds) that is; 604800")
	}
	signed, ok := parseSignedHeaders(shStr)
	if !ok || !containsFold(signed, "host") {
		return nil, malformedQuery("X-Amz-SignedHeaders is invalid; host must be signed")
	}
	if !isHexSig(sig) {
		return nil, malformedQuery("X-Amz-Signature is invalid")
	}
	// Instants, not differences: Time.Sub saturates far from now. exp is at
	// most a week, so t.Add cannot overflow.
	now := v.now()
	if t.After(now.Add(v.maxSkew())) {
		return nil, errNotYetValid(t, t.Add(time.Duration(exp)*time.Second), now)
	}
	if now.After(t.Add(time.Duration(exp) * time.Second)) {
		return nil, errExpired()
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload, _ = q.get("X-Amz-Content-Sha256")
	}
	if payload == "" {
		payload = unsignedPayload
	}
	if aerr := checkPayloadMode(payload); aerr != nil {
		return nil, aerr
	}
	// Parameters hoisted into the query are signed there; a header is
	// signed only if X-Amz-SignedHeaders names it. Otherwise whoever holds
	// the URL could add, say, x-amz-copy-source and act with the signer's
	// rights.
	if names := unsignedAmzHeaders(r, signed, "x-amz-content-sha256"); len(names) > 0 {
		return nil, errUnsignedHeaders(names)
	}
	secret, aerr := v.lookup(r, cred.accessKey)
	if aerr != nil {
		return nil, aerr
	}
	key, scope := v.keys.get(secret, cred.date, cred.region, cred.service), cred.scope()
	var buf [2048]byte
	want, creq, sts := v4Signature(buf[:0], key, dateStr, scope, r, q.canonical("X-Amz-Signature"), signed, payload)
	if !sigEqual(want, sig) {
		return nil, errSignatureDetails(cred.accessKey, string(sts), sig, string(creq))
	}
	if aerr := hoistPresignedHeaders(r, q); aerr != nil {
		return nil, aerr
	}
	return payloadResult(r, cred.accessKey, payload, &chunkSigner{key: key, amzDate: dateStr, scope: scope, seed: want})
}

// presignAuthParams are the query parameters of SigV4 query authentication
// itself; every other x-amz-* parameter is a header the signer hoisted into
// the URL (aws-sdk-go-v2 does so for x-amz-expected-bucket-owner,
// x-amz-sdk-checksum-algorithm, x-amz-meta-*, ...).
var presignAuthParams = map[string]bool{
	"x-amz-algorithm": true, "x-amz-credential": true, "x-amz-date": true, "x-amz-expires": true,
	"x-amz-signedheaders": true, "x-amz-signature": true, "x-amz-security-token": true,
	"x-amz-content-sha256": true,
}

// hoistPresignedHeaders turns the signed x-amz-* query parameters of a
// verified presigned request back into the headers they stand for, so that
// the handlers honour them exactly as if they had been sent as headers
// (nothing signed is accepted and then ignored). A parameter that contradicts
// a header of the same name is refused.
func hoistPresignedHeaders(r *http.Request, q queryParams) *Error {
	for _, p := range q {
		name := strings.ToLower(p.key)
		if !strings.HasPrefix(name, "x-amz-") || presignAuthParams[name] {
			continue
		}
		if cur, ok := r.Header[http.CanonicalHeaderKey(name)]; ok {
			if len(cur) != 1 || cur[0] != p.value {
				return &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("The presigned URL's %s parameter contradicts the request's %s header.", p.key, name)}
			}
			continue
		}
		r.Header.Set(name, p.value)
	}
	return nil
}
