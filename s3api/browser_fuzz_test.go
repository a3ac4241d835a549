package s3api

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzCORSConfiguration: any PutBucketCors body is a client error or rules
// that hold S3's limits, and matching them never fails.
func FuzzCORSConfiguration(f *testing.F) {
	f.Add([]byte(corsDoc(`<CORSRule><ID>a</ID><AllowedOrigin>https://*.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>x-*</AllowedHeader><ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>10</MaxAgeSeconds></CORSRule>`)), "https://a.example.com", "x-amz-date")
	f.Add([]byte(corsDoc(`<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule>`)), "*", "")
	f.Add([]byte(`<CORSConfiguration><CORSRule>`), "", "")
	f.Fuzz(func(t *testing.T, body []byte, origin, header string) {
		rules, err := parseCORS(body)
		if err != nil {
			wantClientError(t, err)
			return
		}
		if len(rules) == 0 || len(rules) > maxCORSRules {
			t.Fatalf("%d rules accepted", len(rules))
		}
		for _, r := range rules {
			if len(r.AllowedOrigins) == 0 || slices.ContainsFunc(r.AllowedMethods, func(m string) bool { return !slices.Contains(corsMethods, m) }) {
				t.Fatalf("rule %+v accepted", r)
			}
		}
		if r, pattern := corsMatch(rules, origin, "GET", []string{strings.ToLower(header)}); r != nil && !wildcardMatch(pattern, origin, false) {
			t.Fatalf("rule matched by %q, which does not match %q", pattern, origin)
		}
	})
}

// FuzzPostPolicy: any policy document is a client error or a policy whose
// evaluation against a form answers a client error or an allowed range.
func FuzzPostPolicy(f *testing.F) {
	f.Add(`{"expiration":"2030-01-01T00:00:00Z","conditions":[["starts-with","$key","up/"],{"bucket":"b"},["content-length-range",1,10]]}`, "up/x")
	f.Add(`{"expiration":"2030-01-01T00:00:00Z","conditions":[["eq","$key"]]}`, "k")
	f.Add(`{"conditions":[]}`, "")
	f.Fuzz(func(t *testing.T, doc, key string) {
		p, err := parsePostPolicy(base64.StdEncoding.EncodeToString([]byte(doc)))
		if err != nil {
			wantClientError(t, err)
			return
		}
		lo, hi, err := p.check(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "b", map[string]string{"key": key, "policy": doc})
		if err != nil {
			wantClientError(t, err)
			return
		}
		if lo > hi || (lo < 0) != (hi < 0) {
			t.Fatalf("range %d..%d allowed", lo, hi)
		}
	})
}
