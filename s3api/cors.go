package s3api

import (
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/s3gate/s3gate/store"
)

// CORS: the bucket's rules (Put/Get/DeleteBucketCors), the OPTIONS preflight
// answered from them without authentication, and the CORS headers of actual
// responses (errors included) to a request whose Origin a rule allows, as S3
// does.

// maxCORSRules is S3's limit of rules in one configuration.
const maxCORSRules = 100

// corsMethods are the only methods a rule may allow.
var corsMethods = []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodHead}

// Errors of the CORS API and of the preflight, with S3's codes and texts.
var (
	errCORSForbidden = &apiError{"AccessForbidden", http.StatusForbidden, "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."}
	errCORSDisabled  = &apiError{"AccessForbidden", http.StatusForbidden, "CORSResponse: CORS is not enabled for this bucket."}
	errCORSNoBucket  = &apiError{"AccessForbidden", http.StatusForbidden, "CORSResponse: Bucket not found"}
	errCORSNoOrigin  = &apiError{"BadRequest", http.StatusBadRequest, "Insufficient information. Origin request header needed."}
	errCORSNoMethod  = &apiError{"BadRequest", http.StatusBadRequest, "Invalid Access-Control-Request-Method: null"}
	errNoSuchCORS    = notFoundDefault("NoSuchCORSConfiguration", "The CORS configuration does not exist")
)

// corsConfiguration is S3's CORSConfiguration document.
type corsConfiguration struct {
	XMLName xml.Name  `xml:"CORSConfiguration"`
	NS      string    `xml:"xmlns,attr,omitempty"`
	Rules   []corsXML `xml:"CORSRule"`
}

type corsXML struct {
	ID             string   `xml:"ID,omitempty"`
	AllowedHeaders []string `xml:"AllowedHeader"`
	AllowedMethods []string `xml:"AllowedMethod"`
	AllowedOrigins []string `xml:"AllowedOrigin"`
	ExposeHeaders  []string `xml:"ExposeHeader"`
	MaxAgeSeconds  *int     `xml:"MaxAgeSeconds"`
}

// parseCORS reads and validates a PutBucketCors body with S3's errors.
func parseCORS(body []byte) ([]store.CORSRule, error) {
	var c corsConfiguration
	if err := decodeXML(body, &c); err != nil {
		return nil, err
	}
	// S3 documents at most 100 rules; its schema does not, so a longer list
	// is refused as a document it cannot take.
	if len(c.Rules) == 0 || len(c.Rules) > maxCORSRules {
		return nil, fmt.Errorf("%w: %d CORS rules, want 1 to %d", errMalformedXML, len(c.Rules), maxCORSRules)
	}
	rules := make([]store.CORSRule, 0, len(c.Rules))
	for _, x := range c.Rules {
		if len(x.AllowedOrigins) == 0 || len(x.AllowedMethods) == 0 || len(x.ID) > 255 ||
			(x.MaxAgeSeconds != nil && *x.MaxAgeSeconds < 0) {
			return nil, errMalformedXML
		}
		for _, m := range x.AllowedMethods {
			if !slices.Contains(corsMethods, m) {
				return nil, errInvalidRequest.withMessage("Found unsupported HTTP method in CORS config. Unsupported method is " + m)
			}
		}
		for _, o := range x.AllowedOrigins {
			if strings.Count(o, "*") > 1 {
				return nil, errInvalidRequest.withMessage(`AllowedOrigin "` + o + `" can not have more than one wildcard.`)
			}
		}
		for _, h := range x.AllowedHeaders {
			if strings.Count(h, "*") > 1 {
				return nil, errInvalidRequest.withMessage(`AllowedHeader "` + h + `" can not have more than one wildcard.`)
			}
		}
		for _, h := range x.ExposeHeaders {
			if strings.Contains(h, "*") {
				return nil, errInvalidRequest.withMessage(`ExposeHeader "` + h + `" contains wildcard. We currently do not support wildcard for ExposeHeader.`)
			}
		}
		rules = append(rules, store.CORSRule{ID: x.ID, AllowedOrigins: x.AllowedOrigins, AllowedMethods: x.AllowedMethods,
			AllowedHeaders: x.AllowedHeaders, ExposeHeaders: x.ExposeHeaders, MaxAgeSeconds: x.MaxAgeSeconds})
	}
	return rules, nil
}

func (a *api) putBucketCors(rq *request) error {
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	if err := verifySmallBody(rq, body); err != nil {
		return err
	}
	rules, err := parseCORS(body)
	if err != nil {
		return err
	}
	if err := a.st.PutBucketCors(rq.ctx, rq.bucket, rules); err != nil {
		return fmt.Errorf("put bucket cors %q: %w", rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (a *api) getBucketCors(rq *request) error {
	rules, err := a.st.GetBucketCors(rq.ctx, rq.bucket)
	if errors.Is(err, store.ErrNoSuchCORSConfiguration) {
		return withDetails(errNoSuchCORS, "BucketName", rq.bucket)
	}
	if err != nil {
		return fmt.Errorf("get bucket cors %q: %w", rq.bucket, err)
	}
	c := corsConfiguration{NS: s3NS}
	for _, r := range rules {
		c.Rules = append(c.Rules, corsXML{ID: r.ID, AllowedHeaders: r.AllowedHeaders, AllowedMethods: r.AllowedMethods,
			AllowedOrigins: r.AllowedOrigins, ExposeHeaders: r.ExposeHeaders, MaxAgeSeconds: r.MaxAgeSeconds})
	}
	return writeXML(rq, c)
}

func (a *api) deleteBucketCors(rq *request) error {
	if err := a.st.DeleteBucketCors(rq.ctx, rq.bucket); err != nil {
		return fmt.Errorf("delete bucket cors %q: %w", rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// wildcardMatch matches s against a pattern with at most one "*", which
// stands for any run of characters (the empty one included).
func wildcardMatch(pattern, s string, fold bool) bool {
	if fold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	prefix, suffix, ok := strings.Cut(pattern, "*")
	if !ok {
		return pattern == s
	}
	return len(s) >= len(prefix)+len(suffix) && strings.HasPrefix(s, prefix) && strings.HasSuffix(s, suffix)
}

// corsMatch returns the first rule that allows origin, method and every one
// of headers, and the origin pattern that matched; nil if none does.
func corsMatch(rules []store.CORSRule, origin, method string, headers []string) (*store.CORSRule, string) {
	for i := range rules {
		r := &rules[i]
		if !slices.Contains(r.AllowedMethods, method) {
			continue
		}
		j := slices.IndexFunc(r.AllowedOrigins, func(p string) bool { return wildcardMatch(p, origin, false) })
		if j < 0 {
			continue
		}
		if !slices.ContainsFunc(headers, func(h string) bool {
			return !slices.ContainsFunc(r.AllowedHeaders, func(p string) bool { return wildcardMatch(p, h, true) })
		}) {
			return r, r.AllowedOrigins[j]
		}
	}
	return nil, ""
}

// setCORSHeaders writes the answer headers of a matched rule.
func setCORSHeaders(h http.Header, r *store.CORSRule, pattern, origin string) {
	if pattern == "*" {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(r.AllowedMethods, ", "))
	if len(r.ExposeHeaders) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(r.ExposeHeaders, ", "))
	}
	if r.MaxAgeSeconds != nil {
		h.Set("Access-Control-Max-Age", strconv.Itoa(*r.MaxAgeSeconds))
	}
	h.Set("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
}

// requestedHeaders splits Access-Control-Request-Headers into lower-case
// names.
func requestedHeaders(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Access-Control-Request-Headers") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
				out = append(out, name)
			}
		}
	}
	return out
}

// preflight answers an OPTIONS request, unauthenticated as on S3, in S3's
// order: Origin, the bucket and its rules, the requested method, a rule.
// Its refusals name the method (OPTIONS when none was asked for) and
// whether rules were evaluated for an object.
func (a *api) preflight(rq *request) error {
	origin := rq.r.Header.Get("Origin")
	if origin == "" {
		return errCORSNoOrigin
	}
	method := rq.r.Header.Get("Access-Control-Request-Method")
	refuse := func(e *apiError, resource string) error {
		return withDetails(e, "Method", cmp.Or(method, http.MethodOptions), "ResourceType", resource)
	}
	rules, err := a.st.GetBucketCors(rq.ctx, rq.bucket)
	switch {
	case errors.Is(err, store.ErrNoSuchBucket):
		return refuse(errCORSNoBucket, "BUCKET")
	case errors.Is(err, store.ErrNoSuchCORSConfiguration):
		return refuse(errCORSDisabled, "BUCKET")
	case err != nil:
		return fmt.Errorf("preflight %q: %w", rq.bucket, err)
	case method == "":
		return errCORSNoMethod
	}
	headers := requestedHeaders(rq.r)
	r, pattern := corsMatch(rules, origin, method, headers)
	if r == nil {
		resource := "OBJECT"
		if rq.key == "" {
			resource = "BUCKET"
		}
		return refuse(errCORSForbidden, resource)
	}
	h := rq.w.Header()
	setCORSHeaders(h, r, pattern, origin)
	if len(headers) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(headers, ", "))
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// corsHeaders adds the CORS headers of an actual request (one with an
// Origin, on a bucket) that a rule allows, before anything else decides the
// answer, so that error answers carry them too. A bucket without rules (or
// none at all) adds nothing; a failed lookup fails the request.
func (a *api) corsHeaders(rq *request) error {
	origin := rq.r.Header.Get("Origin")
	if origin == "" || rq.bucket == "" {
		return nil
	}
	rules, err := a.st.GetBucketCors(rq.ctx, rq.bucket)
	if errors.Is(err, store.ErrNoSuchCORSConfiguration) || errors.Is(err, store.ErrNoSuchBucket) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cors rules of %q: %w", rq.bucket, err)
	}
	// As on S3, an actual request that names a method in
	// Access-Control-Request-Method is matched by that method.
	method := cmp.Or(rq.r.Header.Get("Access-Control-Request-Method"), rq.r.Method)
	if r, pattern := corsMatch(rules, origin, method, nil); r != nil {
		setCORSHeaders(rq.w.Header(), r, pattern, origin)
	}
	return nil
}
