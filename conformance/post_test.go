package conformance

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/md5"  //nolint:gosec // S3 ETags are MD5
	"crypto/sha1" //nolint:gosec // SigV2 is defined on HMAC-SHA1
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/store/storetest"
)

// curlPost answers a browser form upload made with curl -F: fields in the
// order given, the file last, as a browser sends them.
type curlAnswer struct {
	status   int
	body     string
	location string
}

func curlPost(t *testing.T, gw *testgw.Gateway, u string, fields [][2]string, filename string, file []byte) curlAnswer {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, filename)
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "answer")
	hdrs := filepath.Join(dir, "headers")
	args := []string{"-sS", "-g", "--max-time", "120", "-o", out, "-D", hdrs, "-w", "%{http_code}"}
	if gw.CAFile != "" {
		args = append(args, "--cacert", gw.CAFile)
	}
	for _, f := range fields {
		// --form-string: values are literal (no @file or <file reading).
		args = append(args, "--form-string", f[0]+"="+f[1])
	}
	args = append(args, "-F", "file=@"+path+";type=application/octet-stream", u)
	status, err := strconv.Atoi(strings.TrimSpace((&tool{name: "curl", env: withoutAWSEnv()}).run(t, args...)))
	if err != nil {
		t.Fatalf("curl status: %v", err)
	}
	body, _ := os.ReadFile(out)
	h, _ := os.ReadFile(hdrs)
	a := curlAnswer{status: status, body: string(body)}
	for _, line := range strings.Split(string(h), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Location") {
			a.location = strings.TrimSpace(v)
		}
	}
	return a
}

// sortedFields turns a helper's field map into curl's order (sorted: the
// order of fields before the file does not matter).
func sortedFields(m map[string]string) [][2]string {
	var out [][2]string
	for k, v := range m {
		out = append(out, [2]string{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func wantObject(t *testing.T, sdk *s3.Client, bucket, key string, want []byte) {
	t.Helper()
	got, err := sdk.GetObject(testCtx(t, time.Minute), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	defer got.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(got.Body); err != nil {
		t.Fatal(err)
	}
	storetest.SameBytes(t, key, buf.Bytes(), want)
}

func wantNoObject(t *testing.T, sdk *s3.Client, bucket, key string) {
	t.Helper()
	_, err := sdk.HeadObject(testCtx(t, time.Minute), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	var nf *types.NotFound
	if !errors.As(err, &nf) {
		t.Fatalf("HeadObject %s after a refused POST: %v, want NotFound", key, err)
	}
}

func wantPostError(t *testing.T, a curlAnswer, status int, code, msg string) {
	t.Helper()
	if a.status != status || !strings.Contains(a.body, "<Code>"+code+"</Code>") ||
		!strings.Contains(a.body, "<Message>"+xmlEscape(msg)) {
		t.Fatalf("POST answered %d %s, want %d %s %q", a.status, a.body, status, code, msg)
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// TestBrowser covers what web pages use, on every engine: POST forms and
// CORS.
func TestBrowser(t *testing.T) {
	forEachEngine(t, func(t *testing.T, _ combo, gw *testgw.Gateway) {
		t.Run("post", func(t *testing.T) { postCell(t, gw) })
		t.Run("cors", func(t *testing.T) { corsCell(t, gw) })
	})
}

// TestBrowserDetails runs the detail cases on one engine: the POST policy's
// cases, and a real browser's CORS.
func TestBrowserDetails(t *testing.T) {
	// A short idle timeout for the stalled form; nothing else here waits.
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded, Env: []string{"S3GATE_READ_IDLE_TIMEOUT=2s"}})
	t.Run("post", func(t *testing.T) { postDetails(t, gw) })
	t.Run("post stalled", func(t *testing.T) { postStalled(t, gw) })
	t.Run("post bucket settings", func(t *testing.T) { postBucketSettings(t, gw) })
	t.Run("chromium", func(t *testing.T) { chromiumCORS(t, gw) })
}

// postCell posts forms made by the SDKs' presigned-POST helpers with curl:
// stored byte-exact, and a file beyond content-length-range refused with
// nothing stored.
func postCell(t *testing.T, gw *testgw.Gateway) {
	needBinary(t, "curl", "curl")
	sdk := sdkClient(t, gw)
	bucket := mustBucket(t, sdk, "post")
	data := storetest.Bytes(7, 2*mib+3) // above the 512 KiB inline knee: staged by the large engine
	t.Run("aws-sdk PresignPostObject", func(t *testing.T) {
		pre, err := s3.NewPresignClient(sdk).PresignPostObject(testCtx(t, time.Minute), &s3.PutObjectInput{
			Bucket: aws.String(bucket), Key: aws.String("sdk/${filename}"),
		}, func(o *s3.PresignPostOptions) {
			o.Expires = 5 * time.Minute
			o.Conditions = []any{[]any{"starts-with", "$key", "sdk/"}, []any{"content-length-range", 1, len(data)}}
		})
		if err != nil {
			t.Fatalf("PresignPostObject: %v", err)
		}
		a := curlPost(t, gw, pre.URL, sortedFields(pre.Values), "photo.bin", data)
		if a.status != http.StatusNoContent {
			t.Fatalf("POST: %d %s", a.status, a.body)
		}
		wantObject(t, sdk, bucket, "sdk/photo.bin", data)
		a = curlPost(t, gw, pre.URL, sortedFields(pre.Values), "big.bin", append(data, 'x'))
		wantPostError(t, a, http.StatusBadRequest, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")
		wantNoObject(t, sdk, bucket, "sdk/big.bin")
	})
	t.Run("minio PresignedPostPolicy", func(t *testing.T) {
		mc := minioClient(t, gw)
		p := minio.NewPostPolicy()
		for _, err := range []error{p.SetBucket(bucket), p.SetKey("minio/obj"), p.SetExpires(time.Now().UTC().Add(5 * time.Minute)),
			p.SetContentLengthRange(1, int64(len(data))), p.SetContentType("image/png"), p.SetUserMetadata("color", "blue")} {
			if err != nil {
				t.Fatal(err)
			}
		}
		u, form, err := mc.PresignedPostPolicy(testCtx(t, time.Minute), p)
		if err != nil {
			t.Fatalf("PresignedPostPolicy: %v", err)
		}
		a := curlPost(t, gw, u.String(), sortedFields(form), "ignored.bin", data)
		if a.status != http.StatusNoContent {
			t.Fatalf("POST: %d %s", a.status, a.body)
		}
		wantObject(t, sdk, bucket, "minio/obj", data)
		h, err := sdk.HeadObject(testCtx(t, time.Minute), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("minio/obj")})
		if err != nil || aws.ToString(h.ContentType) != "image/png" || h.Metadata["color"] != "blue" {
			t.Fatalf("HeadObject: %v, %v %v", err, aws.ToString(h.ContentType), h.Metadata)
		}
		p2 := minio.NewPostPolicy()
		_ = p2.SetBucket(bucket)
		_ = p2.SetKey("minio/big")
		_ = p2.SetExpires(time.Now().UTC().Add(5 * time.Minute))
		_ = p2.SetContentLengthRange(1, 1000)
		u, form, err = mc.PresignedPostPolicy(testCtx(t, time.Minute), p2)
		if err != nil {
			t.Fatal(err)
		}
		a = curlPost(t, gw, u.String(), sortedFields(form), "f", data[:1001])
		wantPostError(t, a, http.StatusBadRequest, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size")
		wantNoObject(t, sdk, bucket, "minio/big")
	})
}

// postSigner builds SigV4 POST forms for hand-written policies, the way the
// AWS documentation describes them (independent of the gateway's code).
type postSigner struct {
	gw  *testgw.Gateway
	now time.Time
}

func (s postSigner) form(t *testing.T, expiration time.Time, conds []any, extra ...[2]string) [][2]string {
	t.Helper()
	date := s.now.UTC().Format("20060102T150405Z")
	cred := s.gw.AccessKey + "/" + date[:8] + "/" + s.gw.Region + "/s3/aws4_request"
	conds = append([]any{map[string]string{"x-amz-algorithm": "AWS4-HMAC-SHA256"}, map[string]string{"x-amz-credential": cred},
		map[string]string{"x-amz-date": date}}, conds...)
	doc, err := json.Marshal(map[string]any{"expiration": expiration.UTC().Format("2006-01-02T15:04:05.000Z"), "conditions": conds})
	if err != nil {
		t.Fatal(err)
	}
	policy := base64.StdEncoding.EncodeToString(doc)
	mac := func(k []byte, v string) []byte { m := hmac.New(sha256.New, k); m.Write([]byte(v)); return m.Sum(nil) }
	key := mac(mac(mac(mac([]byte("AWS4"+s.gw.SecretKey), date[:8]), s.gw.Region), "s3"), "aws4_request")
	f := [][2]string{{"x-amz-algorithm", "AWS4-HMAC-SHA256"}, {"x-amz-credential", cred}, {"x-amz-date", date},
		{"policy", policy}, {"x-amz-signature", hex.EncodeToString(mac(key, policy))}}
	return append(f, extra...)
}

// postDetails runs the POST policy's cases.
func postDetails(t *testing.T, gw *testgw.Gateway) {
	needBinary(t, "curl", "curl")
	sdk := sdkClient(t, gw)
	bucket := mustBucket(t, sdk, "postd")
	u := gw.Endpoint + "/" + bucket
	s := postSigner{gw: gw, now: time.Now()}
	later := time.Now().Add(10 * time.Minute)
	data := []byte("hello, form")
	keyAny := []any{"starts-with", "$key", "up/"}
	tests := []struct {
		name     string
		fields   [][2]string
		filename string
		file     []byte
		status   int
		code     string
		msg      string
		stored   string // the key that must hold the file ("" when refused)
		absent   string // the key that must not exist
	}{
		{"204 by default", s.form(t, later, []any{keyAny}, [2]string{"key", "up/a"}), "f", data, 204, "", "", "up/a", ""},
		{"${filename}", s.form(t, later, []any{keyAny}, [2]string{"key", "up/${filename}"}), "name.txt", data, 204, "", "", "up/name.txt", ""},
		{"expired", s.form(t, time.Now().Add(-time.Minute), []any{keyAny}, [2]string{"key", "up/expired"}), "f", data,
			403, "AccessDenied", "Invalid according to Policy: Policy expired.", "", "up/expired"},
		{"starts-with violated", s.form(t, later, []any{keyAny}, [2]string{"key", "other/x"}), "f", data,
			403, "AccessDenied", `Invalid according to Policy: Policy Condition failed: ["starts-with", "$key", "up/"]`, "", "other/x"},
		{"eq violated", s.form(t, later, []any{keyAny, []any{"eq", "$Content-Type", "text/plain"}},
			[2]string{"key", "up/eq"}, [2]string{"Content-Type", "text/html"}), "f", data,
			403, "AccessDenied", `Invalid according to Policy: Policy Condition failed: ["eq", "$content-type", "text/plain"]`, "", "up/eq"},
		{"bucket condition", s.form(t, later, []any{keyAny, map[string]string{"bucket": "another"}}, [2]string{"key", "up/b"}), "f", data,
			403, "AccessDenied", `Invalid according to Policy: Policy Condition failed: ["eq", "$bucket", "another"]`, "", "up/b"},
		{"extra field", s.form(t, later, []any{keyAny}, [2]string{"key", "up/extra"}, [2]string{"x-amz-meta-note", "n"},
			[2]string{"x-ignore-me", "fine"}), "f", data,
			403, "AccessDenied", "Invalid according to Policy: Extra input fields: x-amz-meta-note", "", "up/extra"},
		{"too small", s.form(t, later, []any{keyAny, []any{"content-length-range", 100, 200}}, [2]string{"key", "up/small"}), "f", data,
			400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size", "", "up/small"},
		{"bad signature", append(s.form(t, later, []any{keyAny})[:4], [2]string{"x-amz-signature", strings.Repeat("0", 64)}, [2]string{"key", "up/sig"}),
			"f", data, 403, "SignatureDoesNotMatch", "", "", "up/sig"},
		{"no key", s.form(t, later, []any{keyAny}), "f", data, 400, "InvalidArgument", "Bucket POST must contain a field named 'key'.", "", ""},
		{"checksum verified", s.form(t, later, []any{keyAny, map[string]string{"x-amz-checksum-sha256": sha256b64([]byte("other"))}},
			[2]string{"key", "up/ck"}, [2]string{"x-amz-checksum-sha256", sha256b64([]byte("other"))}), "f", data,
			400, "BadDigest", "", "", "up/ck"},
		{"checksum stored", s.form(t, later, []any{keyAny, map[string]string{"x-amz-checksum-sha256": sha256b64(data)}},
			[2]string{"key", "up/ck2"}, [2]string{"x-amz-checksum-sha256", sha256b64(data)}), "f", data, 204, "", "", "up/ck2", ""},
		// A Content-MD5 field is checked against the file, as S3 checks it.
		{"content-md5 verified", s.form(t, later, []any{keyAny, map[string]string{"content-md5": base64.StdEncoding.EncodeToString(md5sum([]byte("other")))}},
			[2]string{"key", "up/md5"}, [2]string{"content-md5", base64.StdEncoding.EncodeToString(md5sum([]byte("other")))}), "f", data,
			400, "BadDigest", "", "", "up/md5"},
		{"content-md5 stored", s.form(t, later, []any{keyAny, map[string]string{"content-md5": base64.StdEncoding.EncodeToString(md5sum(data))}},
			[2]string{"key", "up/md5b"}, [2]string{"content-md5", base64.StdEncoding.EncodeToString(md5sum(data))}), "f", data, 204, "", "", "up/md5b", ""},
		{"success_action_status 200", s.form(t, later, []any{keyAny, map[string]string{"success_action_status": "200"}},
			[2]string{"key", "up/200"}, [2]string{"success_action_status", "200"}), "f", data, 200, "", "", "up/200", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := curlPost(t, gw, u, tt.fields, tt.filename, tt.file)
			if tt.code != "" {
				wantPostError(t, a, tt.status, tt.code, tt.msg)
			} else if a.status != tt.status {
				t.Fatalf("POST: %d %s, want %d", a.status, a.body, tt.status)
			}
			if tt.stored != "" {
				wantObject(t, sdk, bucket, tt.stored, tt.file)
			}
			if tt.absent != "" {
				wantNoObject(t, sdk, bucket, tt.absent)
			}
		})
	}

	t.Run("SigV2", func(t *testing.T) {
		doc := fmt.Sprintf(`{"expiration":%q,"conditions":[["starts-with","$key","up/"]]}`, later.UTC().Format(time.RFC3339))
		policy := base64.StdEncoding.EncodeToString([]byte(doc))
		m := hmac.New(sha1.New, []byte(gw.SecretKey))
		m.Write([]byte(policy))
		fields := [][2]string{{"key", "up/v2"}, {"AWSAccessKeyId", gw.AccessKey}, {"policy", policy},
			{"signature", base64.StdEncoding.EncodeToString(m.Sum(nil))}}
		if a := curlPost(t, gw, u, fields, "f", data); a.status != http.StatusNoContent {
			t.Fatalf("POST: %d %s", a.status, a.body)
		}
		wantObject(t, sdk, bucket, "up/v2", data)
		fields[3][1] = base64.StdEncoding.EncodeToString(make([]byte, sha1.Size))
		wantPostError(t, curlPost(t, gw, u, fields, "f", data), http.StatusForbidden, "SignatureDoesNotMatch", "")
	})
	t.Run("201 PostResponse", func(t *testing.T) {
		a := curlPost(t, gw, u, s.form(t, later, []any{keyAny, []any{"eq", "$success_action_status", "201"}},
			[2]string{"key", "up/201 x"}, [2]string{"success_action_status", "201"}), "f", data)
		var pr struct {
			Location, Bucket, Key, ETag string
		}
		if a.status != http.StatusCreated || xml.Unmarshal([]byte(a.body), &pr) != nil {
			t.Fatalf("POST: %d %s", a.status, a.body)
		}
		want := fmt.Sprintf(`"%x"`, md5sum(data))
		if pr.Bucket != bucket || pr.Key != "up/201 x" || pr.ETag != want || pr.Location != gw.Endpoint+"/"+bucket+"/up/201%20x" {
			t.Fatalf("PostResponse %+v", pr)
		}
		wantObject(t, sdk, bucket, "up/201 x", data)
	})
	t.Run("success_action_redirect", func(t *testing.T) {
		a := curlPost(t, gw, u, s.form(t, later, []any{keyAny, []any{"starts-with", "$success_action_redirect", "https://app.test/"}},
			[2]string{"key", "up/redir"}, [2]string{"success_action_redirect", "https://app.test/done?x=1"}), "f", data)
		loc, err := url.Parse(a.location)
		if a.status != http.StatusSeeOther || err != nil {
			t.Fatalf("POST: %d %s (Location %q)", a.status, a.body, a.location)
		}
		q := loc.Query()
		if loc.Host != "app.test" || q.Get("x") != "1" || q.Get("bucket") != bucket || q.Get("key") != "up/redir" ||
			q.Get("etag") != fmt.Sprintf(`"%x"`, md5sum(data)) {
			t.Fatalf("Location %s", a.location)
		}
		wantObject(t, sdk, bucket, "up/redir", data)
	})
}

func md5sum(b []byte) []byte {
	s := md5.Sum(b) //nolint:gosec // the ETag of a single put
	return s[:]
}

func sha256b64(b []byte) string {
	s := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

// postStalled sends a form whose file stops arriving: the idle timeout ends
// it with 400 RequestTimeout, and nothing is stored.
func postStalled(t *testing.T, gw *testgw.Gateway) {
	if testgw.External() {
		t.Skip("needs the in-process gateway's short idle timeout")
	}
	sdk := sdkClient(t, gw)
	bucket := mustBucket(t, sdk, "poststall")
	s := postSigner{gw: gw, now: time.Now()}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	for _, f := range s.form(t, time.Now().Add(10*time.Minute), []any{[]any{"starts-with", "$key", ""}}, [2]string{"key", "stalled"}) {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := mw.CreateFormFile("file", "f")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(storetest.Bytes(3, 700*kib)) // past the 512 KiB inline knee: staging has begun
	u, err := url.Parse(gw.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The declared length promises more than is sent; then the client stalls.
	fmt.Fprintf(conn, "POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		bucket, u.Host, mw.FormDataContentType(), form.Len()+1<<20)
	if _, err := conn.Write(form.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to the stalled form: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "<Code>RequestTimeout</Code>") {
		t.Fatalf("stalled form: %d %s, want 400 RequestTimeout", res.StatusCode, body)
	}
	wantNoObject(t, sdk, bucket, "stalled")
}

// postBucketSettings: a form is written as the PutObject it is, under the
// bucket's settings. A bucket's default retention locks the version (it was
// stored unlocked and could be deleted by its version id), and an
// ObjectWriter bucket without Block Public Access takes a public-read acl
// field (it was refused as if the bucket had S3's defaults).
func postBucketSettings(t *testing.T, gw *testgw.Gateway) {
	needBinary(t, "curl", "curl")
	ctx := testCtx(t, time.Minute)
	sdk := sdkClient(t, gw)
	s := postSigner{gw: gw, now: time.Now()}
	later := time.Now().Add(10 * time.Minute)
	data := []byte("form data")

	locked := bucketName("postlk")
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(locked), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String(locked),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	a := curlPost(t, gw, gw.Endpoint+"/"+locked, s.form(t, later, []any{map[string]string{"key": "k"}}, [2]string{"key", "k"}), "f", data)
	if a.status != http.StatusNoContent {
		t.Fatalf("POST into a locked bucket: %d %s", a.status, a.body)
	}
	ret, err := sdk.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(locked), Key: aws.String("k")})
	if err != nil || ret.Retention.Mode != types.ObjectLockRetentionModeGovernance {
		t.Fatalf("the POSTed version has no default retention: %+v, %v", ret, err)
	}
	head, err := sdk.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(locked), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sdk.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(locked), Key: aws.String("k"), VersionId: head.VersionId})
	wantAPIError(t, err, "AccessDenied")
	// A PutObject that the default retention will lock needs a digest, as
	// on S3, though it names no lock header.
	status, _, body := doRaw(t, gw, rawReq{Method: "PUT", Path: "/" + locked + "/unsigned", Body: data, Payload: "UNSIGNED-PAYLOAD"})
	wantRawError(t, "unsigned PutObject into a default-retention bucket", status, body, http.StatusBadRequest, "InvalidRequest")
	objectAbsent(t, sdk, locked, "unsigned")

	open := bucketName("postow")
	if _, err := sdk.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(open), ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String(open)}); err != nil {
		t.Fatal(err)
	}
	a = curlPost(t, gw, gw.Endpoint+"/"+open, s.form(t, later, []any{map[string]string{"key": "pub"}, map[string]string{"acl": "public-read"}},
		[2]string{"key", "pub"}, [2]string{"acl", "public-read"}), "f", data)
	if a.status != http.StatusNoContent {
		t.Fatalf("POST with acl=public-read into an ObjectWriter bucket: %d %s", a.status, a.body)
	}
	acl, err := sdk.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: aws.String(open), Key: aws.String("pub")})
	if err != nil {
		t.Fatal(err)
	}
	public := false
	for _, g := range acl.Grants {
		public = public || (g.Grantee != nil && aws.ToString(g.Grantee.URI) == "http://acs.amazonaws.com/groups/global/AllUsers" && g.Permission == types.PermissionRead)
	}
	if !public {
		t.Fatalf("the POSTed object has no public-read grant: %+v", acl.Grants)
	}
}
