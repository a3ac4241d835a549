package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/s3gate/s3gate/internal/testgw"
)

// corsCell runs the CORS API through the SDK, a table of preflights and the
// headers of actual answers (TestBrowser, on every engine).
func corsCell(t *testing.T, gw *testgw.Gateway) {
	sdk := sdkClient(t, gw)
	bucket := mustBucket(t, sdk, "cors")
	ctx := testCtx(t, 2*time.Minute)
	var apiErr smithy.APIError
	if _, err := sdk.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: aws.String(bucket)}); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "NoSuchCORSConfiguration" {
		t.Fatalf("GetBucketCors of none: %v", err)
	}
	_, err := sdk.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: aws.String(bucket), CORSConfiguration: &types.CORSConfiguration{
		CORSRules: []types.CORSRule{{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"PATCH"}}}}})
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "InvalidRequest" ||
		apiErr.ErrorMessage() != "Found unsupported HTTP method in CORS config. Unsupported method is PATCH" {
		t.Fatalf("PutBucketCors with PATCH: %v", err)
	}
	rules := []types.CORSRule{
		{ID: aws.String("site"), AllowedOrigins: []string{"https://*.example.com"}, AllowedMethods: []string{"GET", "PUT"},
			AllowedHeaders: []string{"x-amz-*", "content-type"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: aws.Int32(300)},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}},
	}
	if _, err := sdk.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: aws.String(bucket),
		CORSConfiguration: &types.CORSConfiguration{CORSRules: rules}}); err != nil {
		t.Fatalf("PutBucketCors: %v", err)
	}
	got, err := sdk.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: aws.String(bucket)})
	if err != nil || len(got.CORSRules) != 2 || aws.ToString(got.CORSRules[0].ID) != "site" ||
		aws.ToInt32(got.CORSRules[0].MaxAgeSeconds) != 300 || strings.Join(got.CORSRules[0].AllowedHeaders, ",") != "x-amz-*,content-type" ||
		strings.Join(got.CORSRules[1].AllowedOrigins, ",") != "*" || got.CORSRules[1].MaxAgeSeconds != nil {
		t.Fatalf("GetBucketCors: %v %+v", err, got)
	}
	if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		t.Fatal(err)
	}

	t.Run("preflight", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			hdr    map[string]string
			status int
			allow  string // Access-Control-Allow-Origin
			extra  map[string]string
		}{
			{"site rule", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT",
				"Access-Control-Request-Headers": "content-type,x-amz-date"}, 200, "https://app.example.com",
				map[string]string{"Access-Control-Allow-Methods": "GET, PUT", "Access-Control-Allow-Headers": "content-type, x-amz-date",
					"Access-Control-Max-Age": "300", "Access-Control-Expose-Headers": "ETag"}},
			{"any origin", map[string]string{"Origin": "http://else.test", "Access-Control-Request-Method": "GET"}, 200, "*", nil},
			{"refused header", map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT",
				"Access-Control-Request-Headers": "authorization"}, 403, "", nil},
			{"refused method", map[string]string{"Origin": "http://else.test", "Access-Control-Request-Method": "DELETE"}, 403, "", nil},
			{"no origin", map[string]string{"Access-Control-Request-Method": "GET"}, 400, "", nil},
			{"no method", map[string]string{"Origin": "http://else.test"}, 400, "", nil},
		} {
			t.Run(tt.name, func(t *testing.T) {
				res := doCORS(t, gw, http.MethodOptions, gw.Endpoint+"/"+bucket+"/k", tt.hdr)
				if res.StatusCode != tt.status || res.Header.Get("Access-Control-Allow-Origin") != tt.allow {
					t.Fatalf("OPTIONS: %d, Access-Control-Allow-Origin %q; want %d %q", res.StatusCode, res.Header.Get("Access-Control-Allow-Origin"), tt.status, tt.allow)
				}
				for k, v := range tt.extra {
					if got := res.Header.Get(k); got != v {
						t.Errorf("%s = %q, want %q", k, got, v)
					}
				}
			})
		}
	})
	t.Run("actual answers", func(t *testing.T) {
		ps, err := s3.NewPresignClient(sdk).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
		if err != nil {
			t.Fatal(err)
		}
		missing, err := s3.NewPresignClient(sdk).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("none")})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name, url, origin string
			status            int
			allow, expose     string
		}{
			{"site origin", ps.URL, "https://a.example.com", 200, "https://a.example.com", "ETag"},
			{"any origin", ps.URL, "http://else.test", 200, "*", ""},
			{"error answer", missing.URL, "https://a.example.com", 404, "https://a.example.com", "ETag"},
			{"no origin", ps.URL, "", 200, "", ""},
		} {
			t.Run(tt.name, func(t *testing.T) {
				hdr := map[string]string{}
				if tt.origin != "" {
					hdr["Origin"] = tt.origin
				}
				res := doCORS(t, gw, http.MethodGet, tt.url, hdr)
				if res.StatusCode != tt.status || res.Header.Get("Access-Control-Allow-Origin") != tt.allow ||
					res.Header.Get("Access-Control-Expose-Headers") != tt.expose {
					t.Fatalf("GET: %d %v", res.StatusCode, res.Header)
				}
			})
		}
	})
	if _, err := sdk.DeleteBucketCors(ctx, &s3.DeleteBucketCorsInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("DeleteBucketCors: %v", err)
	}
	if _, err := sdk.GetBucketCors(ctx, &s3.GetBucketCorsInput{Bucket: aws.String(bucket)}); !errors.As(err, &apiErr) || apiErr.ErrorCode() != "NoSuchCORSConfiguration" {
		t.Fatalf("GetBucketCors after delete: %v", err)
	}
	if res := doCORS(t, gw, http.MethodOptions, gw.Endpoint+"/"+bucket+"/k", map[string]string{"Origin": "http://else.test",
		"Access-Control-Request-Method": "GET"}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("preflight after DeleteBucketCors: %d", res.StatusCode)
	}
}

func doCORS(t *testing.T, gw *testgw.Gateway, method, u string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t, time.Minute), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := gw.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// browserPage fetches each URL cross-origin and writes the outcomes into
// the DOM: "ok <status> <body>" or the error's name (a CORS refusal is a
// TypeError to the page).
const browserPage = `<!doctype html><html><head><title>running</title></head><body><pre id="out"></pre><script>
const fetches = %s;
(async () => {
  const out = {};
  for (const [name, f] of Object.entries(fetches)) {
    try {
      const r = await fetch(f.url, {headers: f.headers || {}});
      out[name] = "ok " + r.status + " " + (await r.text()) + " etag=" + r.headers.get("ETag");
    } catch (e) {
      out[name] = "error " + e.name;
    }
  }
  document.getElementById("out").textContent = JSON.stringify(out);
  document.title = "done";
})();
</script></body></html>`

// chromiumCORS has a real browser (headless Chromium) fetch presigned
// GET URLs of the gateway from a page on another loopback origin: allowed
// under a CORS rule (a simple GET, and one whose custom header needs a
// preflight), refused in a bucket without rules. One browser run serves
// every case (TestBrowserDetails).
func chromiumCORS(t *testing.T, gw *testgw.Gateway) {
	if testgw.External() {
		t.Skip("the page's origin is a loopback server: in-process gateways only")
	}
	needBinary(t, "chromium", "chromium")
	sdk := sdkClient(t, gw)
	ctx := testCtx(t, 2*time.Minute)
	// The page is built before its server starts: the browser is the only
	// reader, and Start orders the handler after these writes.
	var pageHTML []byte
	page := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(pageHTML)
	}))
	origin := "http://" + page.Listener.Addr().String()

	allowed, refused := mustBucket(t, sdk, "cors-on"), mustBucket(t, sdk, "cors-off")
	if _, err := sdk.PutBucketCors(ctx, &s3.PutBucketCorsInput{Bucket: aws.String(allowed), CORSConfiguration: &types.CORSConfiguration{
		CORSRules: []types.CORSRule{{AllowedOrigins: []string{origin}, AllowedMethods: []string{"GET"},
			AllowedHeaders: []string{"x-app-*"}, ExposeHeaders: []string{"ETag"}}}}}); err != nil {
		t.Fatalf("PutBucketCors: %v", err)
	}
	presign := func(bucket string) string {
		if _, err := sdk.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("hello.txt"),
			Body: strings.NewReader("hello from " + bucket)}); err != nil {
			t.Fatal(err)
		}
		ps, err := s3.NewPresignClient(sdk).PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("hello.txt")})
		if err != nil {
			t.Fatal(err)
		}
		return ps.URL
	}
	onURL, offURL := presign(allowed), presign(refused)
	js, err := json.Marshal(map[string]map[string]any{
		"allowed":     {"url": onURL},
		"preflighted": {"url": onURL, "headers": map[string]string{"x-app-trace": "1"}},
		"refused":     {"url": offURL},
	})
	if err != nil {
		t.Fatal(err)
	}
	pageHTML = fmt.Appendf(nil, browserPage, js)
	page.Start()
	defer page.Close()

	bctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(bctx, "chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-extensions", "--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=30000", "--dump-dom", page.URL)
	dom, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("chromium: %v\nstderr: %.4000s", err, ee.Stderr)
		}
		t.Fatalf("chromium: %v", err)
	}
	m := regexp.MustCompile(`<pre id="out">(.*?)</pre>`).FindSubmatch(dom)
	if m == nil || !strings.Contains(string(dom), "<title>done</title>") {
		t.Fatalf("the page did not finish: %s", dom)
	}
	var out map[string]string
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &out); err != nil {
		t.Fatalf("page output %q: %v", m[1], err)
	}
	want := map[string]string{
		"allowed":     `ok 200 hello from ` + allowed + ` etag="`,
		"preflighted": `ok 200 hello from ` + allowed + ` etag="`,
		"refused":     "error TypeError",
	}
	for name, prefix := range want {
		if !strings.HasPrefix(out[name], prefix) {
			t.Errorf("%s: the page saw %q, want %q...", name, out[name], prefix)
		}
	}
}
