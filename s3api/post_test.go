package s3api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/store"
)

// VerifyPost makes fakeAuth a PostVerifier: x-amz-signature "good:AK"
// signs as AK, any other value is a bad signature, none is anonymous.
func (fakeAuth) VerifyPost(_ *http.Request, fields map[string]string) (string, error) {
	sig, ok := fields["x-amz-signature"]
	switch {
	case !ok:
		return "", nil
	case strings.HasPrefix(sig, "good:"):
		return strings.TrimPrefix(sig, "good:"), nil
	}
	return "", &auth.Error{Code: auth.CodeSignatureDoesNotMatch, Message: "fake"}
}

func (keyAuth) VerifyPost(r *http.Request, fields map[string]string) (string, error) {
	return fakeAuth{}.VerifyPost(r, fields)
}

// postPolicyB64 is a policy that covers the fields of postForm.
func postPolicyB64(t *testing.T, exp time.Time, conds ...any) string {
	t.Helper()
	all := append([]any{[]any{"starts-with", "$key", ""}}, conds...)
	doc, err := json.Marshal(map[string]any{"expiration": exp.UTC().Format(time.RFC3339), "conditions": all})
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(doc)
}

// postForm builds a multipart body: fields in order, then the file.
func postForm(t *testing.T, fields [][2]string, file string) (body, contentType string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if file != "\x00" {
		fw, err := mw.CreateFormFile("file", "name.bin")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write([]byte(file))
	}
	mw.Close()
	return b.String(), mw.FormDataContentType()
}

const (
	postTagDoc    = "<Tagging><TagSet><Tag><Key>a b</Key><Value>c/d</Value></Tag></TagSet></Tagging>"
	postTagDocAWS = "<Tagging><TagSet><Tag><Key>aws:a</Key><Value>c</Value></Tag></TagSet></Tagging>"
)

func TestPostTagging(t *testing.T) {
	for doc, want := range map[string]string{
		postTagDoc:                     "a+b=c%2Fd",
		"<Tagging><TagSet/></Tagging>": "",
		"a=b":                          "%",
		"<Tagging><TagSet><Tag><Key>k</Key></Tag></TagSet></Tagging>": "%",
	} {
		if got := postTagging(doc); got != want {
			t.Errorf("postTagging(%q) = %q, want %q", doc, got, want)
		}
	}
}

func TestPostObjectHandler(t *testing.T) {
	later := time.Now().Add(time.Hour)
	good := func(extra ...[2]string) [][2]string {
		return append([][2]string{{"key", "k"}, {"policy", postPolicyB64(t, later)}, {"x-amz-signature", "good:AKTEST"}}, extra...)
	}
	tests := []struct {
		name        string
		fields      [][2]string
		file        string // "\x00": no file part
		contentType string // "" for the form's own
		raw         string // a raw body instead of the form
		status      int
		code, msg   string
		stored      string
	}{
		{"stored", good(), "data", "", "", 204, "", "", "k"},
		{"fields after the file are not read", good(), "data", "", "", 204, "", "", "k"},
		{"not a form", good(), "data", "application/octet-stream", "", 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", ""},
		{"no file", good(), "\x00", "", "", 400, "IncorrectNumberOfFilesInPostRequest", "POST requires exactly one file upload per request.", ""},
		{"fields beyond the cap", good([2]string{"x-ignore-pad", strings.Repeat("p", maxPostPreData)}), "data", "", "", 400,
			"MaxPostPreDataLengthExceededError", "", ""},
		{"fields up to the cap", good([2]string{"x-ignore-pad", strings.Repeat("p", maxPostPreData-200)}), strings.Repeat("f", 64<<10), "", "", 204,
			"", "", "k"},
		{"part headers beyond the cap", good(emptyFields(800)...), "data", "", "", 400,
			"MaxPostPreDataLengthExceededError", "", ""},
		{"not multipart inside", nil, "", "multipart/form-data; boundary=xyz", "--xyz\r\nno headers end", 400, "MalformedPOSTRequest", "", ""},
		{"anonymous", [][2]string{{"key", "k"}}, "data", "", "", 403, "AccessDenied", "Access Denied", ""},
		{"bad signature", [][2]string{{"key", "k"}, {"policy", postPolicyB64(t, later)}, {"x-amz-signature", "bad"}}, "data", "", "", 403,
			"SignatureDoesNotMatch", "", ""},
		{"duplicate field", good([2]string{"key", "k2"}), "data", "", "", 400, "InvalidArgument", "", ""},
		{"not base64", [][2]string{{"key", "k"}, {"policy", "%%%"}, {"x-amz-signature", "good:AKTEST"}}, "data", "", "", 400,
			"InvalidPolicyDocument", "Invalid Policy: Invalid Base64 Encoding.", ""},
		{"not JSON", [][2]string{{"key", "k"}, {"policy", base64.StdEncoding.EncodeToString([]byte("{"))}, {"x-amz-signature", "good:AKTEST"}},
			"data", "", "", 400, "InvalidPolicyDocument", "Invalid Policy: Invalid JSON.", ""},
		{"no expiration", [][2]string{{"key", "k"}, {"policy", base64.StdEncoding.EncodeToString([]byte(`{"conditions":[]}`))},
			{"x-amz-signature", "good:AKTEST"}}, "data", "", "", 400, "InvalidPolicyDocument", "Invalid Policy: Policy missing expiration.", ""},
		{"bad condition", [][2]string{{"key", "k"}, {"policy", postPolicyB64(t, later, []any{"content-length-range", 5, 1})},
			{"x-amz-signature", "good:AKTEST"}}, "data", "", "", 400, "InvalidPolicyDocument", "", ""},
		{"unknown operator", [][2]string{{"key", "k"}, {"policy", postPolicyB64(t, later, []any{"ends-with", "$key", "k"})},
			{"x-amz-signature", "good:AKTEST"}}, "data", "", "", 400, "InvalidPolicyDocument", "", ""},
		{"encryption refused", [][2]string{{"key", "k"}, {"policy", postPolicyB64(t, later, map[string]string{"x-amz-server-side-encryption": "AES256"})},
			{"x-amz-signature", "good:AKTEST"}, {"x-amz-server-side-encryption", "AES256"}}, "data", "", "", 501, "NotImplemented", "", ""},
		{"tagging", [][2]string{{"key", "k"}, {"policy", postPolicyB64(t, later, map[string]string{"tagging": postTagDoc})},
			{"x-amz-signature", "good:AKTEST"}, {"tagging", postTagDoc}}, "data", "", "", 204, "", "", "k"},
		{"tagging not XML", [][2]string{{"key", "k"}, {"policy", postPolicyB64(t, later, map[string]string{"tagging": "a=b"})},
			{"x-amz-signature", "good:AKTEST"}, {"tagging", "a=b"}}, "data", "", "", 400, "InvalidArgument", "", ""},
		{"tagging aws:", [][2]string{{"key", "k"}, {"policy", postPolicyB64(t, later, map[string]string{"tagging": postTagDocAWS})},
			{"x-amz-signature", "good:AKTEST"}, {"tagging", postTagDocAWS}}, "data", "", "", 400, "InvalidTag", "", ""},
		{"content-length-range as strings", [][2]string{{"key", "k"}, {"policy", postPolicyB64(t, later, []any{"content-length-range", "1", "3"})},
			{"x-amz-signature", "good:AKTEST"}}, "data", "", "", 400, "EntityTooLarge", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, Config{})
			e.mustBucket("bkt")
			body, ct := postForm(t, tt.fields, tt.file)
			if tt.name == "fields after the file are not read" {
				body = strings.Replace(body, "--\r\n", "\r\nContent-Disposition: form-data; name=\"late\"\r\n\r\nx\r\n--"+
					strings.TrimPrefix(ct, "multipart/form-data; boundary=")+"--\r\n", 1)
			}
			if tt.contentType != "" {
				ct = tt.contentType
			}
			if tt.raw != "" {
				body = tt.raw
			}
			w := e.do(req{method: "POST", target: "/bkt", body: body, hdr: map[string]string{"Content-Type": ct}})
			if w.Code != tt.status || (tt.code != "" && !strings.Contains(w.Body.String(), "<Code>"+tt.code+"</Code>")) ||
				(tt.msg != "" && !strings.Contains(w.Body.String(), "<Message>"+tt.msg+"</Message>")) {
				t.Fatalf("POST: %d %s; want %d %s %q", w.Code, w.Body, tt.status, tt.code, tt.msg)
			}
			e.st.mu.Lock()
			n := len(e.st.objects["bkt"])
			var tags []store.Tag
			if o := e.st.objects["bkt"]["k"]; o != nil {
				tags = o.info.Meta.Tags
			}
			e.st.mu.Unlock()
			if tt.name == "tagging" && !slices.Equal(tags, []store.Tag{{Key: "a b", Value: "c/d"}}) {
				t.Fatalf("tags stored = %v", tags)
			}
			if (tt.stored != "") != (n == 1) {
				t.Fatalf("%d objects stored, want the key %q", n, tt.stored)
			}
		})
	}
}

// TestPostObjectAuthorized checks that a POST is authorized as PutObject for
// the key that signed it.
func TestPostObjectAuthorized(t *testing.T) {
	e, _ := newPolicyEnv(t)
	for _, tt := range []struct {
		key    string
		bucket string
		status int
	}{
		{"RW", "a", 204}, {"RO", "a", 403}, {"A", "b", 403}, {"A", "a", 204},
	} {
		body, ct := postForm(t, [][2]string{{"key", "k-" + tt.key}, {"policy", postPolicyB64(t, time.Now().Add(time.Hour))},
			{"x-amz-signature", "good:" + tt.key}}, "data")
		if w := e.do(req{method: "POST", target: "/" + tt.bucket, body: body, hdr: map[string]string{"Content-Type": ct}}); w.Code != tt.status {
			t.Errorf("POST by %s to %s: %d %s, want %d", tt.key, tt.bucket, w.Code, w.Body, tt.status)
		}
	}
}

func TestPostObjectNotAForm(t *testing.T) {
	e := newEnv(t, Config{})
	e.mustBucket("bkt")
	w := e.do(req{method: "POST", target: "/bkt", body: "key=k", hdr: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	if w.Code != http.StatusPreconditionFailed ||
		!strings.Contains(w.Body.String(), "<Condition>Bucket POST must be of the enclosure-type multipart/form-data</Condition>") {
		t.Fatalf("POST of a urlencoded form: %d %s", w.Code, w.Body)
	}
}

// emptyFields are n fields with short names and no values: mostly part
// headers.
func emptyFields(n int) [][2]string {
	out := make([][2]string, n)
	for i := range out {
		out[i] = [2]string{"x-ignore-" + strconv.Itoa(i), ""}
	}
	return out
}
