package auth

import (
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// DefaultMaxSkew is the clock skew S3 tolerates between client and server.
const DefaultMaxSkew = 15 * time.Minute

// maxPresignExpiry is the longest validity of a presigned URL (7 days).
const maxPresignExpiry = 7 * 24 * 60 * 60

// Verifier verifies S3 request signatures (SigV4 header and presigned, SigV2
// header and presigned) against a CredentialStore. It caches derived SigV4
// signing keys, so it must not be copied after first use.
type Verifier struct {
	// Region is the only region accepted in a SigV4 credential scope.
	Region string
	// Creds resolves access keys to secrets.
	Creds CredentialStore
	// Now is the clock; nil means time.Now. Tests inject a fixed clock.
	Now func() time.Time
	// MaxSkew is the tolerated clock skew; zero means DefaultMaxSkew.
	MaxSkew time.Duration

	// keys caches derived signing keys; Creds is still asked every time.
	keys keyCache
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) maxSkew() time.Duration {
	if v.MaxSkew > 0 {
		return v.MaxSkew
	}
	return DefaultMaxSkew
}

// Verify authenticates r. On success the Result's Body replaces r.Body for the
// handler; on failure the error is an *Error carrying the S3 error code. A
// request without any signature is anonymous: the caller decides whether to
// allow it.
func (v *Verifier) Verify(r *http.Request) (*Result, error) {
	if len(r.Header.Values("Authorization")) > 1 {
		return nil, errDuplicateAuth("Authorization header")
	}
	authz := r.Header.Get("Authorization")
	q := parseRawQuery(r.URL.RawQuery)
	hasV4Query := q.has("X-Amz-Algorithm") || q.has("X-Amz-Credential") || q.has("X-Amz-Signature")
	hasV2Query := q.has("AWSAccessKeyId") && q.has("Signature")
	dups := v4QueryParams
	if q.has("AWSAccessKeyId") || q.has("Signature") {
		dups = append(dups[:len(dups):len(dups)], v2QueryParams...)
	}
	for _, k := range dups {
		if q.count(k) > 1 {
			return nil, errDuplicateAuth(k + " query parameter")
		}
	}

	if authz != "" && (hasV4Query || hasV2Query) {
		return nil, newErr(CodeInvalidArgument, "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified")
	}
	switch {
	case strings.HasPrefix(authz, sigV4Algorithm):
		return v.verifyV4Header(r, authz, q)
	case strings.HasPrefix(authz, "AWS "):
		return v.verifyV2Header(r, authz)
	case authz != "":
		return nil, malformedHeader("Unsupported Authorization Type")
	case hasV4Query:
		return v.verifyV4Presigned(r, q)
	case hasV2Query:
		return v.verifyV2Presigned(r, q)
	}
	return &Result{Anonymous: true, Body: bodyOf(r), DecodedLength: r.ContentLength}, nil
}

// v4QueryParams and v2QueryParams carry a query signature; each may appear
// at most once. The SigV2 ones are generic words, so they count only when
// the request looks SigV2-signed.
var (
	v4QueryParams = []string{
		"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
		"X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token", "X-Amz-Content-Sha256",
	}
	v2QueryParams = []string{"AWSAccessKeyId", "Signature", "Expires"}
)

// bodyOf returns r.Body, or an empty body for requests built without one.
func bodyOf(r *http.Request) io.ReadCloser {
	if r.Body == nil {
		return http.NoBody
	}
	return r.Body
}

// lookup resolves accessKey, mapping an unknown key and a store failure to
// their S3 errors.
func (v *Verifier) lookup(r *http.Request, accessKey string) (string, *Error) {
	// A session token would name the temporary credentials whose secret
	// signs the request; s3gate issues none, so a token is refused before
	// any signature is checked, as S3 refuses a token it cannot resolve.
	if r.Header.Get("X-Amz-Security-Token") != "" ||
		// Parse the query only when it may hold one: lookup runs on every request.
		(strings.Contains(r.URL.RawQuery, "X-Amz-Security-Token") && r.URL.Query().Get("X-Amz-Security-Token") != "") {
		return "", errInvalidToken()
	}
	if v.Creds == nil {
		return "", errUnknownKey(accessKey)
	}
	secret, ok, err := v.Creds.Lookup(r.Context(), accessKey)
	if err != nil {
		return "", &Error{Code: CodeInternalError, Message: "credential lookup failed", Err: err}
	}
	if !ok {
		return "", errUnknownKey(accessKey)
	}
	return secret, nil
}

// checkSkew answers RequestTimeTooSkewed when t is too far from the clock.
// It compares instants rather than a difference: Time.Sub saturates for
// dates centuries away, and negating the minimum Duration overflows.
func (v *Verifier) checkSkew(t time.Time) *Error {
	now, skew := v.now(), v.maxSkew()
	if t.Before(now.Add(-skew)) || t.After(now.Add(skew)) {
		return errSkewed(t.Format(iso8601Format), now, skew)
	}
	return nil
}

// unsignedAmzHeaders lists, sorted and lower-case, the x-amz-* headers of r
// that are not among the signed headers. exempt names headers whose value
// the string to sign binds by other means (x-amz-content-sha256 is the
// canonical request's payload line), so leaving them out of SignedHeaders
// lets nothing through.
func unsignedAmzHeaders(r *http.Request, signed []string, exempt ...string) []string {
	var out []string
	for k := range r.Header {
		// Folded comparisons: lower-casing every name would allocate.
		if len(k) < len("x-amz-") || !strings.EqualFold(k[:len("x-amz-")], "x-amz-") ||
			containsFold(signed, k) || containsFold(exempt, k) {
			continue
		}
		out = append(out, strings.ToLower(k))
	}
	sort.Strings(out)
	return out
}

// StripAWSChunked removes the aws-chunked token from a Content-Encoding value
// so that it is never stored; the other codings keep their order.
func StripAWSChunked(contentEncoding string) string {
	if !strings.Contains(strings.ToLower(contentEncoding), "aws-chunked") {
		return contentEncoding
	}
	var kept []string
	for _, tok := range strings.Split(contentEncoding, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" || strings.EqualFold(tok, "aws-chunked") {
			continue
		}
		kept = append(kept, tok)
	}
	return strings.Join(kept, ",")
}
