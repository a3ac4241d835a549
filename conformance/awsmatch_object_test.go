package conformance

import (
	"crypto/md5" //nolint:gosec // Content-MD5 is a protocol digest
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/internal/testgw"
)

// TestAWSMatchObject checks answers where s3gate once differed from Amazon
// S3: each case is what AWS answers, as captured in public reports of its
// responses or stated in its API reference.
func TestAWSMatchObject(t *testing.T) {
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded})
	cl := sdkClient(t, gw)
	bucket := mustBucket(t, cl, "awsmatch")
	putString(t, cl, bucket, "five", "hello")
	t.Run("SDKChecksumAlgorithmAlone", func(t *testing.T) { amSDKChecksumAlone(t, gw, cl, bucket) })
	t.Run("AnonymousResponseOverrides", func(t *testing.T) { amAnonymousOverrides(t, gw, cl) })
	t.Run("InvalidRangeDetails", func(t *testing.T) { amInvalidRange(t, gw, bucket) })
	t.Run("DirectivesCaseSensitive", func(t *testing.T) { amDirectives(t, gw, cl, bucket) })
	t.Run("CopyResultChecksumType", func(t *testing.T) { amCopyChecksumType(t, gw, cl, bucket) })
	t.Run("BadDigestMessages", func(t *testing.T) { amBadDigest(t, gw, cl, bucket) })
	t.Run("HeaderSectionTooLarge", func(t *testing.T) { amHeaderSection(t, gw, cl, bucket) })
	t.Run("WrongRegionNamed", func(t *testing.T) { amWrongRegion(t, gw, bucket) })
	t.Run("SkewDetails", func(t *testing.T) { amSkew(t, gw, cl, bucket) })
	t.Run("PayloadMismatchDigests", func(t *testing.T) { amPayloadMismatch(t, gw, cl, bucket) })
	t.Run("SecurityTokenRefused", func(t *testing.T) { amSecurityToken(t, gw, cl, bucket) })
	t.Run("PresignedNotYetValid", func(t *testing.T) { amNotYetValid(t, gw, bucket) })
}

// errorElems parses an S3 error body into its elements by name.
func errorElems(t testing.TB, body []byte) map[string]string {
	t.Helper()
	var e struct {
		Elems []struct {
			XMLName xml.Name
			Value   string `xml:",chardata"`
		} `xml:",any"`
	}
	if err := xml.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	m := map[string]string{}
	for _, el := range e.Elems {
		m[el.XMLName.Local] = el.Value
	}
	return m
}

// wantElems fails unless the error body has these elements with these values.
func wantElems(t testing.TB, what string, body []byte, want map[string]string) {
	t.Helper()
	got := errorElems(t, body)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: <%s> = %q, want %q; body: %.600s", what, k, got[k], v, body)
		}
	}
}

// amSDKChecksumAlone: x-amz-sdk-checksum-algorithm without the checksum it
// announces (header or trailer) is refused, on PutObject and UploadPart;
// the SDK's own checksummed uploads still pass.
func amSDKChecksumAlone(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	const msg = "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found."
	hdr := http.Header{"X-Amz-Sdk-Checksum-Algorithm": {"CRC32"}}
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/sdkalone", Header: hdr, Body: []byte("x")})
	wantRawError(t, "PutObject with the SDK header alone", status, body, http.StatusBadRequest, "InvalidRequest")
	wantElems(t, "PutObject", body, map[string]string{"Message": msg})
	objectAbsent(t, cl, bucket, "sdkalone")

	id := createUpload(t, cl, bucket, "sdkalone-mp")
	status, _, body = doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/sdkalone-mp",
		Query: url.Values{"partNumber": {"1"}, "uploadId": {id}}, Header: hdr, Body: []byte("x")})
	wantRawError(t, "UploadPart with the SDK header alone", status, body, http.StatusBadRequest, "InvalidRequest")

	// With the checksum it announces, the same request passes.
	sum := refSum("CRC32", []byte("x"))
	status, _, body = doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/sdkwith",
		Header: http.Header{"X-Amz-Sdk-Checksum-Algorithm": {"CRC32"}, "X-Amz-Checksum-Crc32": {sum}}, Body: []byte("x")})
	if status != http.StatusOK {
		t.Fatalf("PutObject with SDK header and checksum: HTTP %d %.300s", status, body)
	}
	// The SDK announces and sends the checksum itself.
	if _, err := cl.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("sdkput"),
		Body: strings.NewReader("sdk body"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}); err != nil {
		t.Fatalf("SDK PutObject with ChecksumAlgorithm CRC32: %v", err)
	}
}

// amAnonymousOverrides: response-* overrides need a signed request.
func amAnonymousOverrides(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	b := publicBucket(t, cl)
	if err := putPolicy(t, cl, b, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::`+b+`/public/*"}]}`); err != nil {
		t.Fatalf("PutBucketPolicy: %v", err)
	}
	wantAnon(t, gw, b+"/public/x", http.StatusOK, "")
	status, body := anonGet(t, gw, b+"/public/x?response-content-type=text%2Fhtml")
	wantRawError(t, "anonymous GET with response-content-type", status, body, http.StatusBadRequest, "InvalidRequest")
	wantElems(t, "anonymous GET", body, map[string]string{"Message": "Request specific response headers cannot be used for anonymous GET requests."})

	req, err := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodHead, gw.Endpoint+"/"+b+"/public/x?response-cache-control=no-store", nil)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, _ := send(t, gw, req); status != http.StatusBadRequest {
		t.Fatalf("anonymous HEAD with response-cache-control: HTTP %d, want 400", status)
	}
	// Signed and presigned requests keep them.
	out, err := cl.GetObject(testCtx(t, time.Minute), &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("public/x"),
		ResponseContentType: aws.String("text/plain; charset=x")})
	if err != nil {
		t.Fatalf("signed GET with ResponseContentType: %v", err)
	}
	out.Body.Close()
	if aws.ToString(out.ContentType) != "text/plain; charset=x" {
		t.Fatalf("signed GET: Content-Type %q", aws.ToString(out.ContentType))
	}
	p, err := s3.NewPresignClient(cl).PresignGetObject(testCtx(t, time.Minute), &s3.GetObjectInput{Bucket: aws.String(b),
		Key: aws.String("public/x"), ResponseContentType: aws.String("text/x-presigned")})
	if err != nil {
		t.Fatal(err)
	}
	preq, err := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, p.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := gw.HTTPClient.Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/x-presigned" {
		t.Fatalf("presigned GET with override: HTTP %d Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// amInvalidRange: the 416 body names the range as sent and the size.
func amInvalidRange(t *testing.T, gw *testgw.Gateway, bucket string) {
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + bucket + "/five", Header: http.Header{"Range": {"bytes=102-200"}}})
	wantRawError(t, "GET bytes=102-200 of 5 bytes", status, body, http.StatusRequestedRangeNotSatisfiable, "InvalidRange")
	wantElems(t, "InvalidRange", body, map[string]string{"RangeRequested": "bytes=102-200", "ActualObjectSize": "5"})
}

// amDirectives: COPY and REPLACE are upper-case words; other spellings are
// unknown directives.
func amDirectives(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	for _, tc := range []struct{ hdr, val, msg string }{
		{"X-Amz-Metadata-Directive", "replace", "Unknown metadata directive."},
		{"X-Amz-Metadata-Directive", "copy", "Unknown metadata directive."},
		{"X-Amz-Tagging-Directive", "copy", "Unknown tagging directive."},
		{"X-Amz-Tagging-Directive", "Replace", "Unknown tagging directive."},
	} {
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/dircopy",
			Header: http.Header{"X-Amz-Copy-Source": {bucket + "/five"}, tc.hdr: {tc.val}}})
		wantRawError(t, tc.hdr+": "+tc.val, status, body, http.StatusBadRequest, "InvalidArgument")
		wantElems(t, tc.hdr, body, map[string]string{"Message": tc.msg})
	}
	objectAbsent(t, cl, bucket, "dircopy")
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/dircopy",
		Header: http.Header{"X-Amz-Copy-Source": {bucket + "/five"}, "X-Amz-Metadata-Directive": {"REPLACE"}, "X-Amz-Tagging-Directive": {"COPY"}}})
	if status != http.StatusOK {
		t.Fatalf("copy with REPLACE/COPY: HTTP %d %.300s", status, body)
	}
}

// amCopyChecksumType: CopyObjectResult carries ChecksumType with the checksum.
func amCopyChecksumType(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	out, err := cl.CopyObject(testCtx(t, time.Minute), &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("copied"),
		CopySource: aws.String(bucket + "/five")})
	if err != nil {
		t.Fatalf("CopyObject: %v", err)
	}
	r := out.CopyObjectResult
	if r == nil || r.ChecksumCRC64NVME == nil || r.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("CopyObjectResult %+v: want a CRC64NVME checksum with ChecksumType FULL_OBJECT", r)
	}
}

// amBadDigest: the BadDigest message names what did not match.
func amBadDigest(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	other := md5.Sum([]byte("other")) //nolint:gosec // protocol digest
	wrongCRC := base64.StdEncoding.EncodeToString([]byte{0, 0, 0, 0})
	for _, tc := range []struct {
		name string
		hdr  http.Header
		msg  string
	}{
		{"Content-MD5", http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(other[:])}}, "The Content-MD5 you specified did not match what we received."},
		{"x-amz-checksum-crc32", http.Header{"X-Amz-Checksum-Crc32": {wrongCRC}}, "The CRC32 you specified did not match the calculated checksum."},
	} {
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/baddigest", Header: tc.hdr, Body: []byte("hello")})
		wantRawError(t, "PUT with a wrong "+tc.name, status, body, http.StatusBadRequest, "BadDigest")
		wantElems(t, tc.name, body, map[string]string{"Message": tc.msg})
	}
	objectAbsent(t, cl, bucket, "baddigest")
}

// amHeaderSection: a header section over 8 KiB is refused with the limit.
func amHeaderSection(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	big := strings.Repeat("a", 9*1024)
	for _, tc := range []struct {
		name  string
		query url.Values
		hdr   http.Header
		body  []byte
	}{
		{"PutObject", nil, http.Header{"Cache-Control": {big}}, []byte("x")},
		{"CopyObject", nil, http.Header{"Cache-Control": {big}, "X-Amz-Copy-Source": {bucket + "/five"}, "X-Amz-Metadata-Directive": {"REPLACE"}}, nil},
		{"CreateMultipartUpload", url.Values{"uploads": {""}}, http.Header{"Cache-Control": {big}}, nil},
	} {
		method := http.MethodPut
		if tc.query != nil {
			method = http.MethodPost
		}
		status, _, body := doRaw(t, gw, rawReq{Method: method, Path: "/" + bucket + "/bighdr", Query: tc.query, Header: tc.hdr, Body: tc.body})
		wantRawError(t, tc.name+" with a 9 KiB header", status, body, http.StatusBadRequest, "RequestHeaderSectionTooLarge")
		wantElems(t, tc.name, body, map[string]string{"MaxSizeAllowed": "8192"})
	}
	objectAbsent(t, cl, bucket, "bighdr")
	// Under the limit, the same header is stored.
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/bighdr",
		Header: http.Header{"Cache-Control": {big[:6*1024]}}, Body: []byte("x")})
	if status != http.StatusOK {
		t.Fatalf("PutObject with a 6 KiB header: HTTP %d %.300s", status, body)
	}
}

// amWrongRegion: a credential scope of another region names ours in <Region>
// (what botocore reads to re-sign), in both the header and the query form.
func amWrongRegion(t *testing.T, gw *testgw.Gateway, bucket string) {
	req := newRawRequest(t, testCtx(t, time.Minute), gw, rawReq{Method: http.MethodGet, Path: "/" + bucket + "/five"})
	req.Header.Set("Authorization", strings.Replace(req.Header.Get("Authorization"), "/"+gw.Region+"/", "/eu-central-1/", 1))
	status, _, body := send(t, gw, req)
	wantRawError(t, "header signed for eu-central-1", status, body, http.StatusBadRequest, "AuthorizationHeaderMalformed")
	wantElems(t, "header form", body, map[string]string{"Region": gw.Region,
		"Message": "The authorization header is malformed; the region 'eu-central-1' is wrong; expecting '" + gw.Region + "'"})

	u := presignRaw(t, gw, "/"+bucket+"/five", time.Now(), time.Hour)
	u = strings.Replace(u, "%2F"+gw.Region+"%2F", "%2Feu-central-1%2F", 1)
	preq, err := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, _, body = send(t, gw, preq)
	wantRawError(t, "presigned for eu-central-1", status, body, http.StatusBadRequest, "AuthorizationQueryParametersError")
	wantElems(t, "query form", body, map[string]string{"Region": gw.Region})
}

// amSkew: RequestTimeTooSkewed tells the request's time, the server's and
// the allowed skew.
func amSkew(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	at := time.Now().Add(-time.Hour).UTC()
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/skewed", Body: []byte("x"), Time: at})
	wantRawError(t, "PUT an hour old", status, body, http.StatusForbidden, "RequestTimeTooSkewed")
	el := errorElems(t, body)
	if el["RequestTime"] != at.Format("20060102T150405Z") || el["MaxAllowedSkewMilliseconds"] != "900000" {
		t.Errorf("RequestTimeTooSkewed elements %v: want RequestTime %s and MaxAllowedSkewMilliseconds 900000", el, at.Format("20060102T150405Z"))
	}
	if st, err := time.Parse(time.RFC3339, el["ServerTime"]); err != nil || st.Sub(at) < 59*time.Minute {
		t.Errorf("ServerTime %q: want the server's clock, an hour after the request", el["ServerTime"])
	}
	objectAbsent(t, cl, bucket, "skewed")
}

// amPayloadMismatch: XAmzContentSHA256Mismatch names both digests.
func amPayloadMismatch(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	claimed := sha([]byte("another body"))
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/mismatch", Body: []byte("the real body"), Payload: claimed})
	wantRawError(t, "PUT with another body's SHA-256", status, body, http.StatusBadRequest, "XAmzContentSHA256Mismatch")
	wantElems(t, "mismatch", body, map[string]string{"ClientComputedContentSHA256": claimed, "S3ComputedContentSHA256": sha([]byte("the real body"))})
	objectAbsent(t, cl, bucket, "mismatch")
}

// amSecurityToken: s3gate issues no session tokens; one is refused, in the
// header and in a presigned URL, as S3 refuses a token it did not issue.
func amSecurityToken(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	const msg = "The provided token is malformed or otherwise invalid."
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/token", Body: []byte("x"),
		Header: http.Header{"X-Amz-Security-Token": {"FwoGZXIvYXdzEJr"}}})
	wantRawError(t, "PUT with a session token", status, body, http.StatusBadRequest, "InvalidToken")
	wantElems(t, "header token", body, map[string]string{"Message": msg})
	objectAbsent(t, cl, bucket, "token")

	u := presignRaw(t, gw, "/"+bucket+"/five", time.Now(), time.Hour) + "&X-Amz-Security-Token=FwoGZXIvYXdzEJr"
	req, err := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, _, body = send(t, gw, req)
	wantRawError(t, "presigned GET with a session token", status, body, http.StatusBadRequest, "InvalidToken")
}

// amNotYetValid: a presigned URL dated beyond the skew is not yet valid.
func amNotYetValid(t *testing.T, gw *testgw.Gateway, bucket string) {
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	req, err := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, presignRaw(t, gw, "/"+bucket+"/five", at, time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	status, _, body := send(t, gw, req)
	wantRawError(t, "presigned GET dated in an hour", status, body, http.StatusForbidden, "AccessDenied")
	wantElems(t, "not yet valid", body, map[string]string{"Message": "Request is not yet valid",
		"X-Amz-Date": strconv.FormatInt(at.UnixMilli(), 10), "Expires": at.Add(time.Hour).Format(time.RFC3339)})
}
