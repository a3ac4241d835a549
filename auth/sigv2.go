package auth

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // SigV2 is defined on HMAC-SHA1
	"encoding/base64"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SigV2 (legacy) support, path-style only: with virtual-host-style addressing
// the bucket comes from the Host and the canonical resource needs the
// gateway's domain, which the Verifier does not know.

// v2SubResources are the query parameters that are part of the SigV2
// canonical resource, in sorted order.
var v2SubResources = []string{
	"acl", "cors", "delete", "encryption", "legal-hold", "lifecycle", "location",
	"logging", "notification", "partNumber", "policy", "replication",
	"requestPayment", "response-cache-control", "response-content-disposition",
	"response-content-encoding", "response-content-language",
	"response-content-type", "response-expires", "restore", "retention", "select",
	"select-type", "tagging", "torrent", "uploadId", "uploads", "versionId",
	"versioning", "versions", "website",
}

func init() {
	// The canonical resource depends on this order; keep it sorted even if
	// someone appends out of order.
	sort.Strings(v2SubResources)
}

func (v *Verifier) verifyV2Header(r *http.Request, authz string) (*Result, error) {
	if len(authz) > maxAuthHeader {
		return nil, malformedHeader("The authorization header is too long")
	}
	cred := strings.TrimPrefix(authz, "AWS ")
	i := strings.LastIndexByte(cred, ':')
	if i <= 0 || i == len(cred)-1 {
		return nil, malformedHeader("The authorization header is malformed; expecting \"AWS AccessKeyId:Signature\"")
	}
	accessKey, sig := strings.TrimSpace(cred[:i]), strings.TrimSpace(cred[i+1:])
	dateLine := r.Header.Get("Date")
	stamp := dateLine
	if amz := r.Header.Values("X-Amz-Date"); len(amz) > 0 {
		// With x-amz-date the Date element is empty; x-amz-date is signed
		// among the x-amz-* headers. Present but empty is not absent: it
		// must not fall back to Date.
		dateLine, stamp = "", amz[0]
		if len(amz) > 1 {
			stamp = ""
		}
	}
	t, err := parseHTTPDate(stamp)
	if err != nil {
		return nil, newErr(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
	}
	if aerr := v.checkSkew(t); aerr != nil {
		return nil, aerr
	}
	secret, aerr := v.lookup(r, accessKey)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := v2Check(r, secret, dateLine, accessKey, sig); aerr != nil {
		return nil, aerr
	}
	return &Result{AccessKey: accessKey, Body: bodyOf(r), DecodedLength: r.ContentLength}, nil
}

// v2Check verifies sig over the request. A bucket-level path-style request
// (/bucket) has the canonical resource /bucket/, as S3 and boto3 sign it
// while sending /bucket; the path as sent is accepted too, since both name
// the same resource and other signers use it.
func v2Check(r *http.Request, secret, dateLine, accessKey, sig string) *Error {
	path := canonicalURI(r)
	sts := v2StringToSign(r, dateLine, v2BucketResource(path))
	if v2Equal(v2Signature(secret, sts), sig) {
		return nil
	}
	if alt := v2StringToSign(r, dateLine, path); alt != sts && v2Equal(v2Signature(secret, alt), sig) {
		return nil
	}
	return errSignatureDetails(accessKey, sts, sig, "")
}

// v2BucketResource turns a bucket-level path "/bucket" into "/bucket/".
func v2BucketResource(path string) string {
	if len(path) > 1 && strings.IndexByte(path[1:], '/') < 0 {
		return path + "/"
	}
	return path
}

func (v *Verifier) verifyV2Presigned(r *http.Request, q queryParams) (*Result, error) {
	accessKey, _ := q.get("AWSAccessKeyId")
	sig, _ := q.get("Signature")
	expStr, ok := q.get("Expires")
	if !ok || accessKey == "" || sig == "" {
		return nil, malformedQuery("Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters")
	}
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil || exp < 0 {
		return nil, malformedQuery("Expires must be a number of seconds since the epoch")
	}
	now := v.now().Unix()
	if now > exp {
		return nil, errExpired()
	}
	// A week at most, as SigV4's X-Amz-Expires (now is far from MaxInt64).
	if exp-now > maxPresignExpiry {
		return nil, newErr(CodeAccessDenied, "Query-string authentication: Expires must be at most 7 days (604800 seconds) in the future")
	}
	secret, aerr := v.lookup(r, accessKey)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := v2Check(r, secret, expStr, accessKey, sig); aerr != nil {
		return nil, aerr
	}
	return &Result{AccessKey: accessKey, Body: bodyOf(r), DecodedLength: r.ContentLength}, nil
}

func v2Signature(secret, sts string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(sts))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func v2Equal(want, got string) bool { return hmac.Equal([]byte(want), []byte(got)) }

// v2StringToSign is Method, Content-MD5, Content-Type, Date (or Expires),
// the canonical x-amz-* headers (all of them, so no x-amz-* header escapes
// the signature) and the canonical resource: path, then subresources.
func v2StringToSign(r *http.Request, dateLine, path string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	b.WriteString(r.Header.Get("Content-Md5") + "\n")
	b.WriteString(r.Header.Get("Content-Type") + "\n")
	b.WriteString(dateLine + "\n")

	var names []string
	vals := map[string][]string{}
	for k, vv := range r.Header {
		lk := strings.ToLower(k)
		if !strings.HasPrefix(lk, "x-amz-") {
			continue
		}
		if _, ok := vals[lk]; !ok {
			names = append(names, lk)
		}
		for _, v := range vv {
			vals[lk] = append(vals[lk], strings.TrimSpace(strings.ReplaceAll(v, "\n", " ")))
		}
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString(n + ":" + strings.Join(vals[n], ",") + "\n")
	}

	b.WriteString(path)
	q := parseRawQuery(r.URL.RawQuery)
	sep := byte('?')
	for _, res := range v2SubResources {
		val, ok := q.get(res)
		if !ok {
			continue
		}
		b.WriteByte(sep)
		sep = '&'
		b.WriteString(res)
		if val != "" {
			b.WriteByte('=')
			b.WriteString(val)
		}
	}
	return b.String()
}

// parseHTTPDate parses a Date / x-amz-date header: the HTTP formats, and
// RFC 1123 with a numeric zone ("Tue, 27 Mar 2007 19:36:42 +0000"), which
// s3cmd sends and AWS's own SigV2 examples use.
func parseHTTPDate(v string) (time.Time, error) {
	t, err := http.ParseTime(v)
	if err == nil {
		return t, nil
	}
	if t, err2 := time.Parse(time.RFC1123Z, v); err2 == nil {
		return t.UTC(), nil
	}
	return time.Time{}, err
}
