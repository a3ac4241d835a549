package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
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
	sort.Slice(enc, func(i, j int) bool {
		if enc[i].key != enc[j].key {
			return enc[i].key < enc[j].key
		}
		return enc[i].value < enc[j].value
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
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) || (c == '/' && !encodeSlash) {
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

// headerValues returns the values of a signed header as the client sent them.
// net/http moves Host and Transfer-Encoding out of the header map and may
// hold Content-Length only in r.ContentLength.
func headerValues(r *http.Request, name string) []string {
	switch name {
	case "host":
		return []string{requestHost(r)}
	case "content-length":
		if v := r.Header.Values("Content-Length"); len(v) > 0 {
			return v
		}
		if r.ContentLength >= 0 {
			return []string{strconv.FormatInt(r.ContentLength, 10)}
		}
		return nil
	case "transfer-encoding":
		if v := r.Header.Values("Transfer-Encoding"); len(v) > 0 {
			return v
		}
		if len(r.TransferEncoding) > 0 {
			return []string{strings.Join(r.TransferEncoding, ",")}
		}
		return nil
	}
	return r.Header.Values(name)
}

// canonicalHeaders renders the signed headers in the order the client listed
// them: values trimmed, inner runs of spaces collapsed, repeats joined by ','.
func canonicalHeaders(r *http.Request, signed []string) string {
	var b strings.Builder
	for _, name := range signed {
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range headerValues(r, strings.ToLower(name)) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strings.TrimSpace(collapseSpaces(v)))
		}
		b.WriteByte('\n')
	}
	return b.String()
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

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func sha256Hex(data string) string {
	sum := sha256.Sum256([]byte(data))
	return hex.EncodeToString(sum[:])
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
	parts := strings.Split(s, "/")
	if len(parts) < 5 {
		return credential{}, false
	}
	n := len(parts)
	c := credential{
		accessKey: strings.Join(parts[:n-4], "/"),
		date:      parts[n-4],
		region:    parts[n-3],
		service:   parts[n-2],
	}
	if c.accessKey == "" || parts[n-1] != scopeTerm || c.service == "" || c.region == "" {
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
	for _, field := range strings.Split(rest, ",") {
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

// v4Signature computes the request signature for the canonical request; it
// also returns the canonical request and the string to sign, which a
// SignatureDoesNotMatch answer shows the client.
func v4Signature(key []byte, amzDate, scope string, r *http.Request, query string, signed []string, payload string) (sig, creq, sts string) {
	creq = strings.Join([]string{
		r.Method,
		canonicalURI(r),
		query,
		canonicalHeaders(r, signed),
		strings.Join(signed, ";"),
		payload,
	}, "\n")
	sts = sigV4Algorithm + "\n" + amzDate + "\n" + scope + "\n" + sha256Hex(creq)
	return hex.EncodeToString(hmacSHA256(key, sts)), creq, sts
}

// sigEqual compares signatures in constant time.
func sigEqual(want, got string) bool {
	return hmac.Equal([]byte(want), []byte(strings.ToLower(got)))
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
	if c.date != t.Format(scopeDateFmt) {
		return mk("Invalid credential date. Date is not the same as X-Amz-Date.")
	}
	if c.region != v.Region {
		return mk("the region '" + truncate(c.region, 64) + "' is wrong; expecting '" + v.Region + "'")
	}
	if c.service != scopeService {
		return mk("the service '" + truncate(c.service, 64) + "' is wrong; expecting 's3'")
	}
	return nil
}

func (v *Verifier) verifyV4Header(r *http.Request, authz string) (*Result, error) {
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
	if aerr := v.checkScope(h.cred, t, malformedHeader); aerr != nil {
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
	amzDate := t.Format(iso8601Format)
	key := v.keys.get(secret, h.cred.date, h.cred.region, h.cred.service)
	want, creq, sts := v4Signature(key, amzDate, h.cred.scope(), r, parseRawQuery(r.URL.RawQuery).canonical(""), h.signedHeaders, payload)
	if !sigEqual(want, h.signature) {
		return nil, errSignatureDetails(h.cred.accessKey, sts, h.signature, creq)
	}
	return payloadResult(r, h.cred.accessKey, payload, &chunkSigner{key: key, amzDate: amzDate, scope: h.cred.scope(), seed: want})
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
		return nil, errSkewed()
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
	key := v.keys.get(secret, cred.date, cred.region, cred.service)
	want, creq, sts := v4Signature(key, dateStr, cred.scope(), r, q.canonical("X-Amz-Signature"), signed, payload)
	if !sigEqual(want, sig) {
		return nil, errSignatureDetails(cred.accessKey, sts, sig, creq)
	}
	if aerr := hoistPresignedHeaders(r, q); aerr != nil {
		return nil, aerr
	}
	return payloadResult(r, cred.accessKey, payload, &chunkSigner{key: key, amzDate: dateStr, scope: cred.scope(), seed: want})
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
