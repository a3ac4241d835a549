package s3api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

// vid is a well-formed version id (32 URL-safe characters).
const vid = "3sL4kqtJlcpXroDTDmJ-rmSpXd3dIbrH"

func TestVersionIDForms(t *testing.T) {
	tests := []struct {
		v    string
		ok   bool
		want string // message when refused
	}{
		{"null", true, ""},
		{vid, true, ""},
		{"", false, "Version id cannot be the empty string"},
		{"3", false, "Invalid version id specified"},
		{vid + "x", false, "Invalid version id specified"},
		{strings.Repeat("/", 32), false, "Invalid version id specified"},
		{"NULL", false, "Invalid version id specified"},
	}
	for _, tt := range tests {
		_, err := checkVersionID(tt.v, true)
		if (err == nil) != tt.ok {
			t.Errorf("%q: %v, want ok=%v", tt.v, err, tt.ok)
			continue
		}
		if err != nil {
			if e, _ := toAPIError(err); e.Code != "InvalidArgument" || e.Message != tt.want {
				t.Errorf("%q: %s %q, want InvalidArgument %q", tt.v, e.Code, e.Message, tt.want)
			}
		}
	}
	if v, err := checkVersionID("", false); v != "" || err != nil {
		t.Errorf("no versionId: %q %v", v, err)
	}
}

func TestBucketVersioningAPI(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("b")
	cfg := func(body string) string {
		return `<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` + body + `</VersioningConfiguration>`
	}
	put := func(target, body string, hdr map[string]string) req {
		h := map[string]string{"Content-MD5": b64md5(body)}
		for k, v := range hdr {
			h[k] = v
		}
		return req{method: "PUT", target: target, body: body, hdr: h}
	}
	get := req{method: "GET", target: "/b?versioning"}
	if w := e.do(get); w.Code != 200 || !strings.Contains(w.Body.String(), `<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></VersioningConfiguration>`) {
		t.Fatalf("never versioned: %d %s, want an empty configuration", w.Code, w.Body.String())
	}
	refusals := []struct {
		name   string
		r      req
		status int
		code   string
	}{
		{"unknown status", put("/b?versioning", cfg("<Status>On</Status>"), nil), 400, "MalformedXML"},
		{"no status", put("/b?versioning", cfg(""), nil), 400, "MalformedXML"},
		{"not XML", put("/b?versioning", "Enabled", nil), 400, "MalformedXML"},
		{"MFA delete without MFA", put("/b?versioning", cfg("<Status>Enabled</Status><MfaDelete>Enabled</MfaDelete>"), nil), 403, "AccessDenied"},
		{"unknown MfaDelete", put("/b?versioning", cfg("<Status>Enabled</Status><MfaDelete>Maybe</MfaDelete>"), nil), 400, "MalformedXML"},
		{"x-amz-mfa", put("/b?versioning", cfg("<Status>Enabled</Status><MfaDelete>Enabled</MfaDelete>"), map[string]string{"x-amz-mfa": "20899872 301749"}), 501, "NotImplemented"},
		{"no Content-MD5", req{method: "PUT", target: "/b?versioning", body: cfg("<Status>Enabled</Status>")}, 400, "InvalidRequest"},
		{"missing bucket", put("/nob?versioning", cfg("<Status>Enabled</Status>"), nil), 404, "NoSuchBucket"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			expectError(t, e.do(tt.r), tt.status, tt.code)
			if st := e.st.versioning["b"]; st != "" {
				t.Fatalf("a refused request set the state to %q", st)
			}
		})
	}
	for _, st := range []string{"Enabled", "Suspended", "Enabled"} {
		if w := e.do(put("/b?versioning", cfg("<Status>"+st+"</Status><MfaDelete>Disabled</MfaDelete>"), nil)); w.Code != 200 {
			t.Fatalf("put %s: %d %s", st, w.Code, w.Body.String())
		}
		want := `<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>` + st + `</Status></VersioningConfiguration>`
		if w := e.do(get); w.Code != 200 || !strings.Contains(w.Body.String(), want) {
			t.Fatalf("after %s: %d %s, want %s", st, w.Code, w.Body.String(), want)
		}
	}
	expectError(t, e.do(req{method: "GET", target: "/nob?versioning"}), 404, "NoSuchBucket")
}

func TestListObjectVersionsXML(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("b")
	lm := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e.st.listVersions = &store.ListVersionsResult{
		Versions: []store.ObjectInfo{
			{Key: "a b", VersionID: vid, IsLatest: true, DeleteMarker: true, LastModified: lm},
			{Key: "a b", VersionID: "null", Size: 3, ETag: "e1", LastModified: lm},
			{Key: "c", VersionID: vid, IsLatest: true, Size: 0, ETag: "e2", LastModified: lm},
		},
		CommonPrefixes: []string{"d/"},
		Truncated:      true, NextKeyMarker: "c", NextVersionIDMarker: vid,
	}
	w := e.do(req{method: "GET", target: "/b?versions&encoding-type=url&key-marker=a%20a&version-id-marker=null&max-keys=4&delimiter=/"})
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
	body := w.Body.String()
	own := `<Owner><ID>AKTEST</ID><DisplayName>AKTEST</DisplayName></Owner>`
	want := `<ListVersionsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix></Prefix>` +
		`<KeyMarker>a%20a</KeyMarker><VersionIdMarker>null</VersionIdMarker><NextKeyMarker>c</NextKeyMarker>` +
		`<NextVersionIdMarker>` + vid + `</NextVersionIdMarker><MaxKeys>4</MaxKeys><Delimiter>/</Delimiter>` +
		`<EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>` +
		`<DeleteMarker><Key>a%20b</Key><VersionId>` + vid + `</VersionId><IsLatest>true</IsLatest><LastModified>2026-01-02T03:04:05.000Z</LastModified>` + own + `</DeleteMarker>` +
		`<Version><Key>a%20b</Key><VersionId>null</VersionId><IsLatest>false</IsLatest><LastModified>2026-01-02T03:04:05.000Z</LastModified><ETag>&#34;e1&#34;</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass>` + own + `</Version>` +
		`<Version><Key>c</Key><VersionId>` + vid + `</VersionId><IsLatest>true</IsLatest><LastModified>2026-01-02T03:04:05.000Z</LastModified><ETag>&#34;e2&#34;</ETag><Size>0</Size><StorageClass>STANDARD</StorageClass>` + own + `</Version>` +
		`<CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes></ListVersionsResult>`
	if !strings.Contains(body, want) {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
	if p := e.st.lastListVersions; p.KeyMarker != "a a" || p.VersionIDMarker != "null" || p.MaxKeys != 4 || p.Delimiter != "/" {
		t.Errorf("store params %+v", p)
	}
	for target, msg := range map[string]string{
		"/b?versions&version-id-marker=null":               "A version-id marker cannot be specified without a key marker.",
		"/b?versions&key-marker=a&version-id-marker=3HL4k": "Invalid version id specified",
	} {
		w := e.do(req{method: "GET", target: target})
		expectError(t, w, 400, "InvalidArgument")
		if !strings.Contains(w.Body.String(), msg) {
			t.Errorf("%s: %s, want %q", target, w.Body.String(), msg)
		}
	}
}

func TestDeleteObjectsVersionsXML(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("b")
	e.st.versioning = map[string]string{"b": store.VersioningEnabled}
	marker := "DM" + vid[2:]
	e.st.markerIDs = map[string]bool{marker: true}
	body := `<Delete><Object><Key>k1</Key></Object><Object><Key>k2</Key><VersionId>` + vid + `</VersionId></Object>` +
		`<Object><Key>k3</Key><VersionId>` + marker + `</VersionId></Object><Object><Key>k4</Key><VersionId>bad</VersionId></Object></Delete>`
	do := func(body string) string {
		w := e.do(req{method: "POST", target: "/b?delete", body: body, hdr: map[string]string{"Content-MD5": b64md5(body)}})
		if w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body.String())
		}
		return w.Body.String()
	}
	want := `<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` +
		`<Deleted><Key>k1</Key><DeleteMarker>true</DeleteMarker><DeleteMarkerVersionId>` + newMarkerID + `</DeleteMarkerVersionId></Deleted>` +
		`<Deleted><Key>k2</Key><VersionId>` + vid + `</VersionId></Deleted>` +
		`<Deleted><Key>k3</Key><VersionId>` + marker + `</VersionId><DeleteMarker>true</DeleteMarker><DeleteMarkerVersionId>` + marker + `</DeleteMarkerVersionId></Deleted>` +
		`<Error><Key>k4</Key><VersionId>bad</VersionId><Code>InvalidArgument</Code><Message>Invalid version id specified</Message></Error></DeleteResult>`
	if got := do(body); !strings.Contains(got, want) {
		t.Fatalf("body\n%s\nwant\n%s", got, want)
	}
	quiet := strings.Replace(body, "<Delete>", "<Delete><Quiet>true</Quiet>", 1)
	wantQuiet := `<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Error><Key>k4</Key><VersionId>bad</VersionId><Code>InvalidArgument</Code><Message>Invalid version id specified</Message></Error></DeleteResult>`
	if got := do(quiet); !strings.Contains(got, wantQuiet) {
		t.Fatalf("quiet body\n%s\nwant\n%s", got, wantQuiet)
	}
	// A bucket that never had versioning answers keys alone.
	e.mustBucket("plain")
	e.mustPut("plain", "k", "x", nil)
	plain := `<Delete><Object><Key>k</Key></Object></Delete>`
	w := e.do(req{method: "POST", target: "/plain?delete", body: plain, hdr: map[string]string{"Content-MD5": b64md5(plain)}})
	if want := `<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Deleted><Key>k</Key></Deleted></DeleteResult>`; !strings.Contains(w.Body.String(), want) {
		t.Fatalf("plain bucket: %s, want %s", w.Body.String(), want)
	}
}

func TestDeleteObjectVersionHeaders(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("b")
	e.mustPut("b", "k", "x", nil)
	// Never versioned: no version headers.
	w := e.do(req{method: "DELETE", target: "/b/k"})
	if w.Code != http.StatusNoContent || w.Header().Get("x-amz-version-id") != "" || w.Header().Get("x-amz-delete-marker") != "" {
		t.Fatalf("plain delete: %d %v", w.Code, w.Header())
	}
	e.st.versioning = map[string]string{"b": store.VersioningEnabled}
	w = e.do(req{method: "DELETE", target: "/b/k"})
	if w.Code != http.StatusNoContent || w.Header().Get("x-amz-version-id") != newMarkerID || w.Header().Get("x-amz-delete-marker") != "true" {
		t.Fatalf("versioned delete: %d %v", w.Code, w.Header())
	}
	w = e.do(req{method: "DELETE", target: "/b/k?versionId=" + vid})
	if w.Code != http.StatusNoContent || w.Header().Get("x-amz-version-id") != vid || w.Header().Get("x-amz-delete-marker") != "" {
		t.Fatalf("delete by id: %d %v", w.Code, w.Header())
	}
	expectError(t, e.do(req{method: "DELETE", target: "/b/k?versionId="}), 400, "InvalidArgument")
}

// TestVersionActions: naming a version needs the version's own action, as
// S3 checks it (s3:GetObjectVersion, s3:DeleteObjectVersion, ...).
func TestVersionActions(t *testing.T) {
	ids := staticIDs{}
	e := newEnv(t, Config{Identities: ids})
	ids["AKTEST"] = Identity{Root: true}
	e.mustBucket("b")
	e.mustPut("b", "k", "x", nil)
	doc := func(actions ...string) string {
		return `{"Statement":[{"Effect":"Allow","Action":["` + strings.Join(actions, `","`) + `"],"Resource":["arn:aws:s3:::b/*","arn:aws:s3:::b"]}]}`
	}
	tests := []struct {
		name   string
		policy string
		r      req
		status int
	}{
		{"GetObject reads the latest", doc("s3:GetObject"), req{method: "GET", target: "/b/k"}, 200},
		{"GetObject does not read a version", doc("s3:GetObject"), req{method: "GET", target: "/b/k?versionId=null"}, 403},
		{"GetObjectVersion reads a version", doc("s3:GetObjectVersion"), req{method: "GET", target: "/b/k?versionId=null"}, 200},
		{"GetObjectVersion does not read the latest", doc("s3:GetObjectVersion"), req{method: "GET", target: "/b/k"}, 403},
		{"GetObjectTagging is not by version", doc("s3:GetObjectTagging"), req{method: "GET", target: "/b/k?tagging&versionId=null"}, 403},
		{"GetObjectVersionTagging", doc("s3:GetObjectVersionTagging"), req{method: "GET", target: "/b/k?tagging&versionId=null"}, 200},
		{"DeleteObject does not delete a version", doc("s3:DeleteObject"), req{method: "DELETE", target: "/b/k?versionId=" + vid}, 403},
		{"DeleteObjectVersion", doc("s3:DeleteObjectVersion"), req{method: "DELETE", target: "/b/k?versionId=" + vid}, 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids["AKTEST"] = Identity{Policy: tt.policy}
			if w := e.do(tt.r); w.Code != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.r.method, tt.r.target, w.Code, w.Body.String(), tt.status)
			}
		})
	}
	// DeleteObjects decides each entry with its version.
	ids["AKTEST"] = Identity{Policy: doc("s3:DeleteObject")}
	body := `<Delete><Object><Key>k</Key><VersionId>` + vid + `</VersionId></Object><Object><Key>k</Key></Object></Delete>`
	w := e.do(req{method: "POST", target: "/b?delete", body: body, hdr: map[string]string{"Content-MD5": b64md5(body)}})
	if got := w.Body.String(); !strings.Contains(got, `<Error><Key>k</Key><VersionId>`+vid+`</VersionId><Code>AccessDenied</Code>`) || !strings.Contains(got, `<Deleted><Key>k</Key></Deleted>`) {
		t.Fatalf("DeleteObjects: %s", got)
	}
}
