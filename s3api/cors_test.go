package s3api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/store"
)

func (m *memStore) PutBucketCors(_ context.Context, bucket string, rules []store.CORSRule) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.buckets[bucket]; !ok {
		return store.ErrNoSuchBucket
	}
	if m.cors == nil {
		m.cors = map[string][]store.CORSRule{}
	}
	m.cors[bucket] = rules
	return nil
}

func (m *memStore) GetBucketCors(_ context.Context, bucket string) ([]store.CORSRule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.injected != nil {
		return nil, m.injected
	}
	if _, ok := m.buckets[bucket]; !ok {
		return nil, store.ErrNoSuchBucket
	}
	rules, ok := m.cors[bucket]
	if !ok {
		return nil, store.ErrNoSuchCORSConfiguration
	}
	return rules, nil
}

func (m *memStore) DeleteBucketCors(_ context.Context, bucket string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.buckets[bucket]; !ok {
		return store.ErrNoSuchBucket
	}
	delete(m.cors, bucket)
	return nil
}

func corsDoc(rules ...string) string {
	return `<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` + strings.Join(rules, "") + `</CORSConfiguration>`
}

func TestParseCORS(t *testing.T) {
	many := make([]string, maxCORSRules+1)
	for i := range many {
		many[i] = `<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>`
	}
	tests := []struct {
		name, body, code, msg string
	}{
		{"full rule", corsDoc(`<CORSRule><ID>r1</ID><AllowedOrigin>https://*.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod>
			<AllowedMethod>HEAD</AllowedMethod><AllowedHeader>x-amz-*</AllowedHeader><ExposeHeader>ETag</ExposeHeader>
			<MaxAgeSeconds>3000</MaxAgeSeconds></CORSRule>`), "", ""},
		{"100 rules", corsDoc(many[:maxCORSRules]...), "", ""},
		{"101 rules", corsDoc(many...), "MalformedXML", ""},
		{"no rule", corsDoc(), "MalformedXML", ""},
		{"no origin", corsDoc(`<CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule>`), "MalformedXML", ""},
		{"no method", corsDoc(`<CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule>`), "MalformedXML", ""},
		{"negative max age", corsDoc(`<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>-1</MaxAgeSeconds></CORSRule>`), "MalformedXML", ""},
		{"ID too long", corsDoc(`<CORSRule><ID>` + strings.Repeat("i", 256) + `</ID><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>`), "MalformedXML", ""},
		{"not XML", "<CORSConfiguration>", "MalformedXML", ""},
		{"PATCH", corsDoc(`<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule>`),
			"InvalidRequest", "Found unsupported HTTP method in CORS config. Unsupported method is PATCH"},
		{"lower-case get", corsDoc(`<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>get</AllowedMethod></CORSRule>`),
			"InvalidRequest", "Found unsupported HTTP method in CORS config. Unsupported method is get"},
		{"two wildcards in origin", corsDoc(`<CORSRule><AllowedOrigin>https://*.*.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>`),
			"InvalidRequest", `AllowedOrigin "https://*.*.com" can not have more than one wildcard.`},
		{"two wildcards in header", corsDoc(`<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>x-*-*</AllowedHeader></CORSRule>`),
			"InvalidRequest", `AllowedHeader "x-*-*" can not have more than one wildcard.`},
		{"wildcard expose header", corsDoc(`<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><ExposeHeader>x-*</ExposeHeader></CORSRule>`),
			"InvalidRequest", `ExposeHeader "x-*" contains wildcard. We currently do not support wildcard for ExposeHeader.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := parseCORS([]byte(tt.body))
			if tt.code == "" {
				if err != nil || len(rules) == 0 {
					t.Fatalf("parseCORS = %v, %v", rules, err)
				}
				return
			}
			e, _ := toAPIError(err)
			if err == nil || e.Code != tt.code || (tt.msg != "" && e.Message != tt.msg) {
				t.Fatalf("parseCORS error = %v, want %s %q", err, tt.code, tt.msg)
			}
		})
	}
}

func TestCORSMatch(t *testing.T) {
	rules := []store.CORSRule{
		{ID: "site", AllowedOrigins: []string{"https://*.example.com"}, AllowedMethods: []string{"PUT"}, AllowedHeaders: []string{"x-amz-*", "Content-Type"}},
		{ID: "any", AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}},
		{ID: "exact", AllowedOrigins: []string{"http://127.0.0.1:8080"}, AllowedMethods: []string{"GET", "DELETE"}, AllowedHeaders: []string{"*"}},
	}
	tests := []struct {
		origin, method string
		headers        []string
		want, pattern  string
	}{
		{"https://a.example.com", "PUT", []string{"x-amz-date", "content-type"}, "site", "https://*.example.com"},
		{"https://.example.com", "PUT", nil, "site", "https://*.example.com"},
		{"https://a.example.com", "PUT", []string{"authorization"}, "", ""},
		{"http://a.example.com", "PUT", nil, "", ""},
		{"https://a.example.com.evil", "PUT", nil, "", ""},
		{"https://a.example.com", "GET", []string{"x-amz-date"}, "", ""},
		{"https://a.example.com", "GET", nil, "any", "*"},
		{"http://127.0.0.1:8080", "DELETE", []string{"anything"}, "exact", "http://127.0.0.1:8080"},
		{"http://127.0.0.1:8080", "GET", nil, "any", "*"}, // the first matching rule wins
		{"http://127.0.0.1:8081", "DELETE", nil, "", ""},
		{"http://127.0.0.1:8080", "HEAD", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.origin, " ", tt.method, " ", tt.headers), func(t *testing.T) {
			r, pattern := corsMatch(rules, tt.origin, tt.method, tt.headers)
			got := ""
			if r != nil {
				got = r.ID
			}
			if got != tt.want || pattern != tt.pattern {
				t.Fatalf("corsMatch = %q (%q), want %q (%q)", got, pattern, tt.want, tt.pattern)
			}
		})
	}
}

// TestPreflight drives OPTIONS through the handler: unauthenticated, answered
// from the first matching rule, refused with S3's errors otherwise.
func TestPreflight(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	e.mustBucket("plain")
	age := 600
	if err := e.st.PutBucketCors(context.Background(), "bkt", []store.CORSRule{
		{AllowedOrigins: []string{"https://*.example.com"}, AllowedMethods: []string{"PUT", "POST"},
			AllowedHeaders: []string{"x-amz-*", "content-type"}, ExposeHeaders: []string{"ETag", "x-amz-request-id"}, MaxAgeSeconds: &age},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET", "HEAD"}},
	}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, target string
		hdr          map[string]string
		status       int
		code         string
		want         map[string]string
	}{
		{"specific origin", "/bkt/k", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT",
			"Access-Control-Request-Headers": "X-Amz-Date, Content-Type"}, 200, "", map[string]string{
			"Access-Control-Allow-Origin": "https://app.example.com", "Access-Control-Allow-Methods": "PUT, POST",
			"Access-Control-Allow-Headers": "x-amz-date, content-type", "Access-Control-Expose-Headers": "ETag, x-amz-request-id",
			"Access-Control-Max-Age": "600", "Access-Control-Allow-Credentials": "true",
			"Vary": "Origin, Access-Control-Request-Headers, Access-Control-Request-Method"}},
		{"any origin, on the bucket", "/bkt", map[string]string{"Origin": "http://elsewhere", "Access-Control-Request-Method": "GET"}, 200, "",
			map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, HEAD", "Access-Control-Max-Age": "",
				"Access-Control-Allow-Credentials": "", "Access-Control-Allow-Headers": ""}},
		{"header not allowed", "/bkt/k", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT",
			"Access-Control-Request-Headers": "authorization"}, 403, "AccessForbidden", map[string]string{"Access-Control-Allow-Origin": ""}},
		{"method not allowed", "/bkt/k", map[string]string{"Origin": "http://elsewhere", "Access-Control-Request-Method": "DELETE"}, 403, "AccessForbidden", nil},
		{"no origin", "/bkt/k", map[string]string{"Access-Control-Request-Method": "GET"}, 400, "BadRequest", nil},
		{"no method", "/bkt/k", map[string]string{"Origin": "http://elsewhere"}, 400, "BadRequest", nil},
		{"unknown method", "/bkt/k", map[string]string{"Origin": "http://elsewhere", "Access-Control-Request-Method": "PATCH"}, 403, "AccessForbidden", nil},
		{"bucket without rules", "/plain/k", map[string]string{"Origin": "http://elsewhere", "Access-Control-Request-Method": "GET"}, 403, "AccessForbidden", nil},
		{"refusal details", "/bkt/k", map[string]string{"Origin": "http://elsewhere", "Access-Control-Request-Method": "PUT"}, 403, "AccessForbidden",
			map[string]string{"body": "<Method>PUT</Method><ResourceType>OBJECT</ResourceType>"}},
		{"bucket without rules, origin alone", "/plain", map[string]string{"Origin": "http://elsewhere"}, 403, "AccessForbidden",
			map[string]string{"body": "<Message>CORSResponse: CORS is not enabled for this bucket.</Message>"}},
		{"bucket without rules, details", "/plain", map[string]string{"Origin": "http://elsewhere"}, 403, "AccessForbidden",
			map[string]string{"body": "<Method>OPTIONS</Method><ResourceType>BUCKET</ResourceType>"}},
		{"no bucket, message", "/nobkt", map[string]string{"Origin": "http://elsewhere"}, 403, "AccessForbidden",
			map[string]string{"body": "<Message>CORSResponse: Bucket not found</Message>"}},
		{"no bucket", "/nobkt/k", map[string]string{"Origin": "http://elsewhere", "Access-Control-Request-Method": "GET"}, 403, "AccessForbidden", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{"X-Fake-Auth": "anonymous"}
			for k, v := range tt.hdr {
				hdr[k] = v
			}
			w := e.do(req{method: "OPTIONS", target: tt.target, hdr: hdr})
			if w.Code != tt.status || (tt.code != "" && !strings.Contains(w.Body.String(), "<Code>"+tt.code+"</Code>")) {
				t.Fatalf("status %d body %s, want %d %s", w.Code, w.Body, tt.status, tt.code)
			}
			if tt.code == "AccessForbidden" && tt.target == "/bkt/k" && !strings.Contains(w.Body.String(), strings.ReplaceAll(errCORSForbidden.Message, "'", "&#39;")) {
				t.Fatalf("body %s lacks S3's message", w.Body)
			}
			if d, ok := tt.want["body"]; ok && !strings.Contains(w.Body.String(), d) {
				t.Fatalf("body %s lacks %s", w.Body, d)
			}
			for k, v := range tt.want {
				if got := w.Header().Get(k); k != "body" && got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestCORSActualResponse checks the headers on answers to requests with an
// Origin: success and error answers of a matching origin carry them, others
// do not, and a failed rules lookup fails the request.
func TestCORSActualResponse(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	e.mustPut("bkt", "k", "hello", nil)
	if err := e.st.PutBucketCors(context.Background(), "bkt", []store.CORSRule{
		{AllowedOrigins: []string{"http://page.test"}, AllowedMethods: []string{"GET", "PUT"}, ExposeHeaders: []string{"ETag"}},
	}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, target, origin, auth string
		status                             int
		allow                              string
	}{
		{"GET from the origin", "GET", "/bkt/k", "http://page.test", "", 200, "http://page.test"},
		{"missing key from the origin", "GET", "/bkt/nokey", "http://page.test", "", 404, "http://page.test"},
		{"refused signature from the origin", "GET", "/bkt/k", "http://page.test", "anonymous", 403, "http://page.test"},
		{"PUT from the origin", "PUT", "/bkt/k2", "http://page.test", "", 200, "http://page.test"},
		{"HEAD is not allowed", "HEAD", "/bkt/k", "http://page.test", "", 200, ""},
		{"Access-Control-Request-Method decides", "GET", "/bkt/k", "http://page.test", "", 200, ""},
		{"other origin", "GET", "/bkt/k", "http://other.test", "", 200, ""},
		{"no origin", "GET", "/bkt/k", "", "", 200, ""},
		{"missing bucket", "GET", "/nobkt/k", "http://page.test", "", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{}
			if tt.origin != "" {
				hdr["Origin"] = tt.origin
			}
			if tt.auth != "" {
				hdr["X-Fake-Auth"] = tt.auth
			}
			if tt.name == "Access-Control-Request-Method decides" {
				hdr["Access-Control-Request-Method"] = "DELETE"
			}
			w := e.do(req{method: tt.method, target: tt.target, hdr: hdr, body: map[bool]string{true: "data"}[tt.method == "PUT"]})
			if w.Code != tt.status {
				t.Fatalf("status %d (%s), want %d", w.Code, w.Body, tt.status)
			}
			if got := w.Header().Get("Access-Control-Allow-Origin"); got != tt.allow {
				t.Fatalf("Access-Control-Allow-Origin = %q, want %q", got, tt.allow)
			}
			if tt.allow != "" && (w.Header().Get("Access-Control-Expose-Headers") != "ETag" || w.Header().Get("Access-Control-Allow-Methods") != "GET, PUT") {
				t.Fatalf("CORS headers %v", w.Header())
			}
		})
	}
	e.st.injected = store.ErrUnavailable
	if w := e.do(req{method: "GET", target: "/bkt/k", hdr: map[string]string{"Origin": "http://page.test"}}); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("with the store down: status %d, want 503", w.Code)
	}
}

func TestBucketCorsAPI(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	body := corsDoc(`<CORSRule><ID>r</ID><AllowedHeader>*</AllowedHeader><AllowedMethod>GET</AllowedMethod><AllowedOrigin>*</AllowedOrigin><MaxAgeSeconds>5</MaxAgeSeconds></CORSRule>`)
	steps := []struct {
		method string
		hdr    map[string]string
		body   string
		status int
		want   string
	}{
		{"GET", nil, "", 404, "<Code>NoSuchCORSConfiguration</Code>"},
		{"GET", nil, "", 404, "<BucketName>bkt</BucketName>"},
		{"PUT", nil, body, 400, "Content-MD5"},
		{"PUT", map[string]string{"Content-MD5": b64md5(body)}, body, 200, ""},
		{"GET", nil, "", 200, "<CORSRule><ID>r</ID><AllowedHeader>*</AllowedHeader><AllowedMethod>GET</AllowedMethod><AllowedOrigin>*</AllowedOrigin><MaxAgeSeconds>5</MaxAgeSeconds></CORSRule>"},
		{"DELETE", nil, "", 204, ""},
		{"GET", nil, "", 404, "<Code>NoSuchCORSConfiguration</Code>"},
	}
	for i, s := range steps {
		w := e.do(req{method: s.method, target: "/bkt?cors", hdr: s.hdr, body: s.body})
		if w.Code != s.status || !strings.Contains(w.Body.String(), s.want) {
			t.Fatalf("step %d %s: %d %s, want %d %q", i, s.method, w.Code, w.Body, s.status, s.want)
		}
	}
}
