package conformance

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/internal/testreq"
)

// TestExactResponses checks the answers that clients parse byte by byte
// against the shapes, codes and formats AWS uses.
func TestExactResponses(t *testing.T) {
	forEachCombo(t, func(t *testing.T, c combo, gw *testgw.Gateway) {
		cl := sdkClient(t, gw)
		t.Run("ListShapes", func(t *testing.T) { exListShapes(t, gw, cl) })
		t.Run("NotModifiedValidators", func(t *testing.T) { exNotModified(t, gw, cl) })
		t.Run("ErrorCodes", func(t *testing.T) { exErrorCodes(t, gw, cl) })
		t.Run("UTF8Metadata", func(t *testing.T) { exMetadata(t, gw, cl) })
		t.Run("CreateOwnBucket", func(t *testing.T) { exCreateOwnBucket(t, gw, cl) })
		t.Run("CannedACLs", func(t *testing.T) { exACLs(t, cl) })
		t.Run("ConditionalWrites", func(t *testing.T) { exConditionalWrites(t, cl) })
		t.Run("ConditionalWritesRace", func(t *testing.T) { exConditionalRace(t, cl) })
		t.Run("ObjectAttributes", func(t *testing.T) { exObjectAttributes(t, gw, cl) })
		if c.Engine == testgw.Embedded || c.Engine == "pgchunks" || c.Engine == "external" {
			t.Run("Boto3", func(t *testing.T) { exBoto3(t, gw, cl) })
		}
	})
}

// awkwardKeys need URL encoding in listings (botocore decodes them).
var awkwardKeys = []string{"dir a/x+y=z&w.txt", "dir a/ünï cödé ✓", "dir a/sub/deep", "plain", "pct%41"}

// listV1XML and listV2XML keep the raw elements, pointers telling absent
// from empty.
type listXML struct {
	XMLName               xml.Name `xml:"ListBucketResult"`
	Prefix                *string  `xml:"Prefix"`
	Marker                *string  `xml:"Marker"`
	NextMarker            *string  `xml:"NextMarker"`
	Delimiter             *string  `xml:"Delimiter"`
	StartAfter            *string  `xml:"StartAfter"`
	KeyCount              *int     `xml:"KeyCount"`
	MaxKeys               *int     `xml:"MaxKeys"`
	EncodingType          *string  `xml:"EncodingType"`
	IsTruncated           *bool    `xml:"IsTruncated"`
	NextContinuationToken *string  `xml:"NextContinuationToken"`
	Contents              []struct {
		Key          string `xml:"Key"`
		LastModified string `xml:"LastModified"`
		ETag         string `xml:"ETag"`
		StorageClass string `xml:"StorageClass"`
	} `xml:"Contents"`
	CommonPrefixes []struct {
		Prefix string `xml:"Prefix"`
	} `xml:"CommonPrefixes"`
}

func rawList(t *testing.T, gw *testgw.Gateway, bucket string, q url.Values) (listXML, string) {
	t.Helper()
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + bucket, Query: q})
	if status != http.StatusOK {
		t.Fatalf("list %v: HTTP %d %s", q, status, body)
	}
	var l listXML
	if err := xml.Unmarshal(body, &l); err != nil {
		t.Fatalf("list %v: %v: %s", q, err, body)
	}
	return l, string(body)
}

var xmlDate = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func exListShapes(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	bucket := mustBucket(t, cl, "shape")
	ctx := testCtx(t, time.Minute)
	for _, k := range awkwardKeys {
		if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatalf("PutObject %q: %v", k, err)
		}
	}
	// V1 without parameters: <Prefix/> and <Marker/> present and empty, no
	// <Delimiter>, no <EncodingType>.
	l, raw := rawList(t, gw, bucket, nil)
	if l.Prefix == nil || *l.Prefix != "" || l.Marker == nil || *l.Marker != "" || l.Delimiter != nil || l.EncodingType != nil {
		t.Fatalf("V1 plain: want empty Prefix and Marker only; got %s", raw)
	}
	if len(l.Contents) != len(awkwardKeys) {
		t.Fatalf("V1 plain: %d keys, want %d", len(l.Contents), len(awkwardKeys))
	}
	for _, o := range l.Contents {
		if !xmlDate.MatchString(o.LastModified) || !strings.HasPrefix(o.ETag, `"`) || o.StorageClass != "STANDARD" {
			t.Fatalf("V1 entry %+v: want AWS date format, quoted ETag, STANDARD", o)
		}
	}
	// An empty delimiter groups nothing and is not echoed, as AWS answers.
	l, raw = rawList(t, gw, bucket, url.Values{"delimiter": {""}})
	if l.Delimiter != nil {
		t.Fatalf("V1 delimiter= : want no <Delimiter>; got %s", raw)
	}

	// V2 with encoding-type=url: every key, prefix, delimiter and start-after
	// URL-encoded, KeyCount counting keys and prefixes.
	q := url.Values{"list-type": {"2"}, "encoding-type": {"url"}, "prefix": {"dir a/"}, "delimiter": {"/"}, "start-after": {"dir a/"}}
	l, raw = rawList(t, gw, bucket, q)
	if l.EncodingType == nil || *l.EncodingType != "url" || l.Prefix == nil || *l.Prefix != "dir%20a/" ||
		l.Delimiter == nil || *l.Delimiter != "/" || l.StartAfter == nil || *l.StartAfter != "dir%20a/" {
		t.Fatalf("V2 url: Prefix/Delimiter/StartAfter/EncodingType not encoded as AWS does: %s", raw)
	}
	if l.KeyCount == nil || *l.KeyCount != 3 || len(l.Contents) != 2 || len(l.CommonPrefixes) != 1 {
		t.Fatalf("V2 url: want KeyCount 3 (2 keys, 1 prefix): %s", raw)
	}
	// A space is %20 and a "+" is %2B (path encoding), as AWS sends them.
	wantKeys := map[string]string{"dir%20a/x%2By%3Dz%26w.txt": "dir a/x+y=z&w.txt", "dir%20a/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9%20%E2%9C%93": "dir a/ünï cödé ✓"}
	for _, o := range l.Contents {
		dec, err := url.QueryUnescape(o.Key)
		if wantKeys[o.Key] == "" || err != nil || dec != wantKeys[o.Key] {
			t.Fatalf("V2 url: key %q is not the AWS encoding of one of %v", o.Key, wantKeys)
		}
	}
	if l.CommonPrefixes[0].Prefix != "dir%20a/sub/" {
		t.Fatalf("V2 url: common prefix %q, want dir%%20a/sub/", l.CommonPrefixes[0].Prefix)
	}
	// V1 with encoding-type=url encodes the marker too.
	l, raw = rawList(t, gw, bucket, url.Values{"encoding-type": {"url"}, "marker": {"a b"}, "max-keys": {"1"}, "delimiter": {"/"}})
	if l.Marker == nil || *l.Marker != "a%20b" || l.NextMarker == nil || *l.NextMarker != "dir%20a/" {
		t.Fatalf("V1 url: Marker/NextMarker not encoded: %s", raw)
	}
	// The SDK (which asks for encoding-type=url itself) sees the real keys.
	out, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("dir a/"), EncodingType: types.EncodingTypeUrl})
	if err != nil {
		t.Fatalf("SDK ListObjectsV2: %v", err)
	}
	if aws.ToInt32(out.KeyCount) != 3 || len(out.Contents) != 3 {
		t.Fatalf("SDK ListObjectsV2: KeyCount %d, %d keys; want 3", aws.ToInt32(out.KeyCount), len(out.Contents))
	}
}

func exNotModified(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	bucket := mustBucket(t, cl, "nm")
	put, err := cl.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("hello")})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	for _, hdr := range []http.Header{
		{"If-None-Match": {aws.ToString(put.ETag)}},
		{"If-Modified-Since": {time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}},
	} {
		status, h, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + bucket + "/k", Header: hdr})
		if status != http.StatusNotModified || len(body) != 0 {
			t.Fatalf("GET %v: HTTP %d body %q, want an empty 304", hdr, status, body)
		}
		if h.Get("ETag") != aws.ToString(put.ETag) {
			t.Fatalf("304: ETag %q, want %q", h.Get("ETag"), aws.ToString(put.ETag))
		}
		if _, err := time.Parse(http.TimeFormat, h.Get("Last-Modified")); err != nil {
			t.Fatalf("304: Last-Modified %q is not an HTTP date: %v", h.Get("Last-Modified"), err)
		}
	}
	// 200 answers carry the same formats.
	status, h, _ := doRaw(t, gw, rawReq{Method: http.MethodHead, Path: "/" + bucket + "/k"})
	if _, err := time.Parse(http.TimeFormat, h.Get("Last-Modified")); status != http.StatusOK || err != nil {
		t.Fatalf("HEAD: HTTP %d Last-Modified %q", status, h.Get("Last-Modified"))
	}
}

func exErrorCodes(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	bucket := mustBucket(t, cl, "codes")
	if _, err := cl.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("0123456789")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	otherMD5 := md5.Sum([]byte("other"))
	many := &bytes.Buffer{}
	many.WriteString("<Delete>")
	for i := range 1001 {
		fmt.Fprintf(many, "<Object><Key>k%d</Key></Object>", i)
	}
	many.WriteString("</Delete>")
	manyMD5 := md5.Sum(many.Bytes())
	badXML := []byte("<Delete><Object><Key>k</Key></Obj")
	badXMLMD5 := md5.Sum(badXML)
	for _, tc := range []struct {
		name   string
		r      rawReq
		status int
		code   string
	}{
		{"Content-MD5 mismatch is BadDigest", rawReq{Method: "PUT", Path: "/" + bucket + "/bd", Body: []byte("data"),
			Header: http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(otherMD5[:])}}}, 400, "BadDigest"},
		{"malformed Content-MD5 is InvalidDigest", rawReq{Method: "PUT", Path: "/" + bucket + "/id", Body: []byte("data"),
			Header: http.Header{"Content-Md5": {"not-base64!"}}}, 400, "InvalidDigest"},
		{"checksum mismatch is BadDigest", rawReq{Method: "PUT", Path: "/" + bucket + "/bc", Body: []byte("data"),
			Header: http.Header{"X-Amz-Checksum-Crc32": {"AAAAAA=="}}}, 400, "BadDigest"},
		{"malformed checksum is InvalidRequest", rawReq{Method: "PUT", Path: "/" + bucket + "/ic", Body: []byte("data"),
			Header: http.Header{"X-Amz-Checksum-Crc32": {"AAAA"}}}, 400, "InvalidRequest"},
		{"partNumber=0", rawReq{Method: "GET", Path: "/" + bucket + "/k", Query: url.Values{"partNumber": {"0"}}}, 400, "InvalidArgument"},
		{"partNumber=abc", rawReq{Method: "GET", Path: "/" + bucket + "/k", Query: url.Values{"partNumber": {"abc"}}}, 400, "InvalidArgument"},
		{"max-keys=-1", rawReq{Method: "GET", Path: "/" + bucket, Query: url.Values{"list-type": {"2"}, "max-keys": {"-1"}}}, 400, "InvalidArgument"},
		{"max-keys=x", rawReq{Method: "GET", Path: "/" + bucket, Query: url.Values{"max-keys": {"x"}}}, 400, "InvalidArgument"},
		{"unsatisfiable range", rawReq{Method: "GET", Path: "/" + bucket + "/k", Header: http.Header{"Range": {"bytes=10-"}}}, 416, "InvalidRange"},
		{"DeleteObjects over 1000 keys", rawReq{Method: "POST", Path: "/" + bucket, Query: url.Values{"delete": {""}}, Body: many.Bytes(),
			Header: http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(manyMD5[:])}}}, 400, "MalformedXML"},
		{"DeleteObjects malformed", rawReq{Method: "POST", Path: "/" + bucket, Query: url.Values{"delete": {""}}, Body: badXML,
			Header: http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(badXMLMD5[:])}}}, 400, "MalformedXML"},
		{"Complete malformed", rawReq{Method: "POST", Path: "/" + bucket + "/k", Query: url.Values{"uploadId": {"nope"}}, Body: []byte("<CompleteMultipartUpload><Part>")}, 400, "MalformedXML"},
		{"CreateBucket malformed", rawReq{Method: "PUT", Path: "/" + bucketName("mx"), Body: []byte("<CreateBucketConfiguration><Loc")}, 400, "MalformedXML"},
		// New buckets block public access (BlockPublicAcls), as on AWS; without
		// it the answer is NotImplemented (exACLs).
		{"public-read refused", rawReq{Method: "PUT", Path: "/" + bucket + "/pub", Body: []byte("x"), Header: http.Header{"X-Amz-Acl": {"public-read"}}}, 403, "AccessDenied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := doRaw(t, gw, tc.r)
			wantRawError(t, tc.name, status, body, tc.status, tc.code)
		})
	}
	// Nothing of the refused writes was stored; the 1001 keys were not deleted.
	for _, k := range []string{"bd", "id", "bc", "ic", "pub"} {
		objectAbsent(t, cl, bucket, k)
	}
	// A syntactically invalid range is ignored (200, whole object), as on AWS.
	status, _, body := doRaw(t, gw, rawReq{Method: "GET", Path: "/" + bucket + "/k", Header: http.Header{"Range": {"bytes=5-2"}}})
	if status != http.StatusOK || string(body) != "0123456789" {
		t.Fatalf("invalid Range: HTTP %d %q, want 200 and the whole object", status, body)
	}
}

// exMetadata: user metadata is UTF-8 preserved; non-ASCII values come back
// RFC 2047-encoded as AWS returns them, and an RFC 2047 value sent is decoded
// before it is stored.
func exMetadata(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	bucket := mustBucket(t, cl, "meta")
	ctx := testCtx(t, time.Minute)
	const value = "Grüße, 世界 ✓"
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("raw"), Body: strings.NewReader("x"),
		Metadata: map[string]string{"Title": value, "ascii": "plain value"}}); err != nil {
		t.Fatalf("PutObject with UTF-8 metadata: %v", err)
	}
	encoded := mime.QEncoding.Encode("UTF-8", value) // decoded on the way in, whatever the encoding
	status, _, _ := doRaw(t, gw, rawReq{Method: "PUT", Path: "/" + bucket + "/encoded", Body: []byte("x"),
		Header: http.Header{"X-Amz-Meta-Title": {encoded}}})
	if status != http.StatusOK {
		t.Fatalf("PUT with RFC 2047 metadata: HTTP %d", status)
	}
	dec := new(mime.WordDecoder)
	for _, key := range []string{"raw", "encoded"} {
		head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("HeadObject %s: %v", key, err)
		}
		got := head.Metadata["title"]
		if got != "=?UTF-8?B?"+base64.StdEncoding.EncodeToString([]byte(value))+"?=" {
			t.Fatalf("%s: x-amz-meta-title = %q, want an RFC 2047 B-encoded word as AWS sends", key, got)
		}
		plain, err := dec.DecodeHeader(got)
		if err != nil || plain != value {
			t.Fatalf("%s: x-amz-meta-title decodes to %q (%v), want %q", key, plain, err, value)
		}
		if key == "raw" && head.Metadata["ascii"] != "plain value" {
			t.Fatalf("ASCII metadata changed: %q", head.Metadata["ascii"])
		}
	}
}

func exCreateOwnBucket(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	bucket := mustBucket(t, cl, "own")
	_, err := cl.CreateBucket(testCtx(t, time.Minute), &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	if gw.Region == "us-east-1" {
		// AWS's legacy answer in us-east-1: success, the bucket unchanged.
		if err != nil {
			t.Fatalf("CreateBucket of an own bucket in us-east-1: %v, want success as AWS answers", err)
		}
		return
	}
	wantAPIError(t, err, "BucketAlreadyOwnedByYou")
}

func exACLs(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	name := bucketName("acl")
	if _, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name), ACL: types.BucketCannedACLPrivate}); err != nil {
		t.Fatalf("CreateBucket ACL private: %v", err)
	}
	t.Cleanup(func() { emptyAndDelete(t, cl, name) })
	// A new bucket has ACLs off (BucketOwnerEnforced, as on AWS).
	_, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucketName("aclpub")), ACL: types.BucketCannedACLPublicRead})
	wantAPIError(t, err, "InvalidBucketAclWithObjectOwnership")

	for _, acl := range []types.ObjectCannedACL{types.ObjectCannedACLPrivate, types.ObjectCannedACLBucketOwnerFullControl, types.ObjectCannedACLBucketOwnerRead} {
		if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("o-" + string(acl)), Body: strings.NewReader("x"), ACL: acl}); err != nil {
			t.Fatalf("PutObject ACL %s: %v", acl, err)
		}
	}
	if _, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(name), Key: aws.String("copy"), CopySource: aws.String(name + "/o-private"),
		ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatalf("CopyObject ACL private: %v", err)
	}
	// Public ACLs: AccessDenied under the new bucket's Block Public Access
	// (BlockPublicAcls); without it AccessControlListNotSupported while ACLs
	// are off (BucketOwnerEnforced); stored under ObjectWriter.
	for _, acl := range []types.ObjectCannedACL{types.ObjectCannedACLPublicRead, types.ObjectCannedACLPublicReadWrite, types.ObjectCannedACLAuthenticatedRead} {
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("refused"), Body: strings.NewReader("x"), ACL: acl})
		wantAPIError(t, err, "AccessDenied")
	}
	objectAbsent(t, cl, name, "refused")
	if _, err := cl.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("DeletePublicAccessBlock: %v", err)
	}
	_, err = cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("refused"), Body: strings.NewReader("x"), ACL: types.ObjectCannedACLPublicRead})
	wantAPIError(t, err, "AccessControlListNotSupported")
	if _, err := cl.PutBucketOwnershipControls(ctx, &s3.PutBucketOwnershipControlsInput{Bucket: aws.String(name),
		OwnershipControls: &types.OwnershipControls{Rules: []types.OwnershipControlsRule{{ObjectOwnership: types.ObjectOwnershipObjectWriter}}}}); err != nil {
		t.Fatalf("PutBucketOwnershipControls ObjectWriter: %v", err)
	}
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String("public"), Body: strings.NewReader("x"),
		ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatalf("PutObject public-read without Block Public Access: %v", err)
	}

	bacl, err := cl.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: aws.String(name)})
	if err != nil {
		t.Fatalf("GetBucketAcl: %v", err)
	}
	oacl, err := cl.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: aws.String(name), Key: aws.String("copy")})
	if err != nil {
		t.Fatalf("GetObjectAcl: %v", err)
	}
	for what, g := range map[string][]types.Grant{"bucket": bacl.Grants, "object": oacl.Grants} {
		if len(g) != 1 || g[0].Permission != types.PermissionFullControl || g[0].Grantee == nil || g[0].Grantee.Type != types.TypeCanonicalUser ||
			aws.ToString(g[0].Grantee.ID) != aws.ToString(bacl.Owner.ID) {
			t.Fatalf("%s ACL: %+v, want one FULL_CONTROL grant to the owner %q", what, g, aws.ToString(bacl.Owner.ID))
		}
	}
	if _, err := cl.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String(name), ACL: types.BucketCannedACLPrivate}); err != nil {
		t.Fatalf("PutBucketAcl private: %v", err)
	}
	// The owner-only policy read back is accepted as a body, and so is a
	// grant to everyone (Block Public Access is off, ACLs on).
	owner := &types.AccessControlPolicy{Owner: bacl.Owner, Grants: bacl.Grants}
	if _, err := cl.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(name), Key: aws.String("copy"), AccessControlPolicy: owner}); err != nil {
		t.Fatalf("PutObjectAcl owner-only body: %v", err)
	}
	public := &types.AccessControlPolicy{Owner: bacl.Owner, Grants: append(append([]types.Grant{}, bacl.Grants...), types.Grant{
		Grantee:    &types.Grantee{Type: types.TypeGroup, URI: aws.String("http://acs.amazonaws.com/groups/global/AllUsers")},
		Permission: types.PermissionRead,
	})}
	if _, err = cl.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String(name), AccessControlPolicy: public}); err != nil {
		t.Fatalf("PutBucketAcl public body: %v", err)
	}
	if _, err = cl.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(name), Key: aws.String("copy"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatalf("PutObjectAcl public-read: %v", err)
	}
}

func exConditionalWrites(t *testing.T, cl *s3.Client) {
	bucket := mustBucket(t, cl, "cw")
	ctx := testCtx(t, 2*time.Minute)
	put := func(key, body string, ifMatch, ifNoneMatch *string) (*s3.PutObjectOutput, error) {
		return cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body),
			IfMatch: ifMatch, IfNoneMatch: ifNoneMatch})
	}
	first, err := put("k", "one", nil, aws.String("*"))
	if err != nil {
		t.Fatalf("If-None-Match: * on a new key: %v", err)
	}
	_, err = put("k", "two", nil, aws.String("*"))
	wantAPIError(t, err, "PreconditionFailed")
	wantStatus(t, err, http.StatusPreconditionFailed)
	_, err = put("k", "two", aws.String(`"0123456789abcdef0123456789abcdef"`), nil)
	wantAPIError(t, err, "PreconditionFailed")
	_, err = put("missing", "x", aws.String(aws.ToString(first.ETag)), nil)
	wantAPIError(t, err, "NoSuchKey")
	second, err := put("k", "two", first.ETag, nil)
	if err != nil {
		t.Fatalf("If-Match with the current ETag: %v", err)
	}
	ckBody(t, cl, bucket, "k", "two")

	// CompleteMultipartUpload obeys the same conditions, and a failed
	// condition leaves the upload in place.
	create, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	up, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("k"), UploadId: create.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("three")})
	if err != nil {
		t.Fatalf("UploadPart: %v", err)
	}
	complete := func(ifMatch, ifNoneMatch *string) error {
		_, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("k"), UploadId: create.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag}}},
			IfMatch:         ifMatch, IfNoneMatch: ifNoneMatch})
		return err
	}
	wantAPIError(t, complete(nil, aws.String("*")), "PreconditionFailed")
	wantAPIError(t, complete(first.ETag, nil), "PreconditionFailed")
	ckBody(t, cl, bucket, "k", "two")
	if _, err := cl.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("k"), UploadId: create.UploadId}); err != nil {
		t.Fatalf("the upload must survive a failed conditional Complete: %v", err)
	}
	if err := complete(second.ETag, nil); err != nil {
		t.Fatalf("Complete with If-Match of the current ETag: %v", err)
	}
	ckBody(t, cl, bucket, "k", "three")
}

func ckBody(t *testing.T, cl *s3.Client, bucket, key, want string) {
	t.Helper()
	got, _, err := getRange(t, cl, bucket, key, "")
	if err != nil || string(got) != want {
		t.Fatalf("GET %s: %q (%v), want %q", key, got, err, want)
	}
}

// exConditionalRace: N concurrent If-None-Match: * puts of one key, each with
// its own content: exactly one succeeds, every other one is refused with 412
// (or AWS's 409 ConditionalRequestConflict), and the stored content is the
// winner's.
func exConditionalRace(t *testing.T, cl *s3.Client) {
	bucket := mustBucket(t, cl, "race")
	ctx := testCtx(t, 2*time.Minute)
	const n = 12
	type result struct {
		body string
		err  error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf("writer %d %s", i, strings.Repeat("x", i*1000))
			<-start
			_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("contended"),
				Body: strings.NewReader(body), IfNoneMatch: aws.String("*")})
			results[i] = result{body, err}
		})
	}
	close(start)
	wg.Wait()
	winners := 0
	var winner string
	for i, r := range results {
		switch {
		case r.err == nil:
			winners++
			winner = r.body
		case apiCode(r.err) == "PreconditionFailed" || apiCode(r.err) == "ConditionalRequestConflict":
		default:
			t.Errorf("writer %d: unexpected error %v", i, r.err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d writers succeeded with If-None-Match: *, want exactly 1", winners)
	}
	ckBody(t, cl, bucket, "contended", winner)
}

func exObjectAttributes(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	bucket := mustBucket(t, cl, "attrs")
	ctx := testCtx(t, time.Minute)
	put, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("attributes")})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	out, err := cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(bucket), Key: aws.String("k"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag, types.ObjectAttributesStorageClass,
			types.ObjectAttributesObjectSize, types.ObjectAttributesObjectParts}})
	if err != nil {
		t.Fatalf("GetObjectAttributes: %v", err)
	}
	if aws.ToString(out.ETag) != strings.Trim(aws.ToString(put.ETag), `"`) || out.StorageClass != types.StorageClassStandard ||
		aws.ToInt64(out.ObjectSize) != int64(len("attributes")) || out.ObjectParts != nil || out.LastModified == nil {
		t.Fatalf("GetObjectAttributes: ETag %q class %q size %d parts %+v lm %v", aws.ToString(out.ETag), out.StorageClass,
			aws.ToInt64(out.ObjectSize), out.ObjectParts, out.LastModified)
	}
	// Only the attributes asked for are returned.
	out, err = cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(bucket), Key: aws.String("k"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectSize}})
	if err != nil || out.ETag != nil || out.StorageClass != "" || aws.ToInt64(out.ObjectSize) != 10 {
		t.Fatalf("GetObjectAttributes ObjectSize only: %+v (%v)", out, err)
	}
	status, _, body := doRaw(t, gw, rawReq{Method: "GET", Path: "/" + bucket + "/k", Query: url.Values{"attributes": {""}},
		Header: http.Header{"X-Amz-Object-Attributes": {"ETag,Colour"}}})
	wantRawError(t, "unknown attribute", status, body, 400, "InvalidArgument")
	_, err = cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(bucket), Key: aws.String("nope"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesEtag}})
	wantAPIError(t, err, "NoSuchKey")
}

// exBoto3 checks that botocore parses our XML as it parses AWS's: listings
// with awkward keys (it decodes encoding-type=url itself), a V1 listing's
// Marker and Prefix, metadata, ACLs and GetObjectAttributes.
func exBoto3(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	if err := exec.Command("python3", "-c", "import boto3").Run(); err != nil {
		testreq.Missing(t, "boto3 is not importable by python3; skipping the botocore shape check (install the Debian package \"python3-boto3\")")
	}
	bucket := mustBucket(t, cl, "boto")
	ctx := testCtx(t, time.Minute)
	for _, k := range awkwardKeys {
		if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
			t.Fatalf("PutObject %q: %v", k, err)
		}
	}
	script := `
import json, os, sys, boto3
from botocore.config import Config
s3 = boto3.client("s3", endpoint_url=os.environ["EP"], region_name=os.environ["RG"],
    aws_access_key_id=os.environ["AK"], aws_secret_access_key=os.environ["SK"],
    verify=os.environ.get("CA") or None, config=Config(s3={"addressing_style": "path"}))
b = os.environ["BK"]
out = {}
v2 = s3.list_objects_v2(Bucket=b, Prefix="dir a/", Delimiter="/")
out["v2_keys"] = [o["Key"] for o in v2.get("Contents", [])]
out["v2_prefixes"] = [p["Prefix"] for p in v2.get("CommonPrefixes", [])]
out["v2_prefix"] = v2["Prefix"]; out["v2_delimiter"] = v2["Delimiter"]; out["v2_keycount"] = v2["KeyCount"]
v1 = s3.list_objects(Bucket=b)
out["v1_marker"] = v1["Marker"]; out["v1_prefix"] = v1["Prefix"]; out["v1_count"] = len(v1["Contents"])
pages = [k["Key"] for p in s3.get_paginator("list_objects").paginate(Bucket=b, PaginationConfig={"PageSize": 2}) for k in p.get("Contents", [])]
out["v1_paged"] = pages
# botocore sends only ASCII metadata: non-ASCII goes as an RFC 2047 word.
s3.put_object(Bucket=b, Key="m", Body=b"x", Metadata={"title": os.environ["MV"]})
out["meta"] = s3.head_object(Bucket=b, Key="m")["Metadata"]["title"]
acl = s3.get_bucket_acl(Bucket=b)
out["acl"] = [g["Permission"] for g in acl["Grants"]]
a = s3.get_object_attributes(Bucket=b, Key="m", ObjectAttributes=["ETag", "ObjectSize", "StorageClass"])
out["attrs"] = [a["ETag"], a["ObjectSize"], a["StorageClass"]]
json.dump(out, sys.stdout)
`
	cmd := exec.CommandContext(ctx, "python3", "-c", script)
	cmd.Env = append(os.Environ(), "EP="+gw.Endpoint, "RG="+gw.Region, "AK="+gw.AccessKey, "SK="+gw.SecretKey, "CA="+gw.CAFile, "BK="+bucket,
		"MV==?UTF-8?B?"+base64.StdEncoding.EncodeToString([]byte("Grüße ✓"))+"?=",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	outb, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("boto3: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("boto3: %v", err)
	}
	got := string(outb)
	for _, want := range []string{
		`"v2_keys": ["dir a/x+y=z&w.txt", "dir a/\u00fcn\u00ef c\u00f6d\u00e9 \u2713"]`,
		`"v2_prefixes": ["dir a/sub/"]`, `"v2_prefix": "dir a/"`, `"v2_delimiter": "/"`, `"v2_keycount": 3`,
		`"v1_marker": ""`, `"v1_prefix": ""`, `"v1_count": 5`,
		`"meta": "=?UTF-8?B?` + base64.StdEncoding.EncodeToString([]byte("Grüße ✓")) + `?="`, `"acl": ["FULL_CONTROL"]`, `"STANDARD"]`,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("boto3 output lacks %s:\n%s", want, got)
		}
	}
	if !strings.Contains(got, `"v1_paged": ["dir a/sub/deep", "dir a/x+y=z&w.txt", "dir a/\u00fcn\u00ef c\u00f6d\u00e9 \u2713", "pct%41", "plain"]`) {
		t.Fatalf("boto3 V1 pagination did not return every key once, in order:\n%s", got)
	}
}
