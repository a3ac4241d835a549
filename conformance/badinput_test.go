package conformance

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/s3gate/s3gate/internal/testgw"
)

// sha256Hasher adapts crypto/sha256 to the md5simd.Hasher that minio's
// streaming signer takes.
type sha256Hasher struct{ hash.Hash }

func (sha256Hasher) Close() {}

// flipAt corrupts one byte of a stream at a fixed offset.
type flipAt struct {
	r   io.Reader
	off int64 // offset of the byte to flip
	pos int64
}

func (f *flipAt) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if f.off >= f.pos && f.off < f.pos+int64(n) {
		i := f.off - f.pos
		switch b := p[i]; {
		case b >= '0' && b <= '9' || b >= 'a' && b <= 'f':
			// Keep a hex digit a hex digit, so a flipped signature is still well-formed.
			if b == '0' {
				p[i] = '1'
			} else {
				p[i] = '0'
			}
		default:
			p[i] ^= 0xff
		}
	}
	f.pos += int64(n)
	return n, err
}

func (f *flipAt) Close() error { return nil }

// TestBadInput sends what a careless or hostile client would, and checks both
// the S3 error and that nothing was left behind.
func TestBadInput(t *testing.T) {
	forEachCombo(t, func(t *testing.T, _ combo, gw *testgw.Gateway) {
		c := sdkClient(t, gw)
		bucket := mustBucket(t, c, "bad")
		body := genBytes(900, 100*kib)

		t.Run("WrongSecret", func(t *testing.T) {
			bad := sdkClientWithKeys(t, gw, gw.AccessKey, gw.SecretKey+"x")
			_, err := bad.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("wrong-secret"), Body: bytes.NewReader(body)})
			wantAPIError(t, err, "SignatureDoesNotMatch")
			wantStatus(t, err, http.StatusForbidden)
			objectAbsent(t, c, bucket, "wrong-secret")
			_, err = bad.CreateBucket(testCtx(t, time.Minute), &s3.CreateBucketInput{Bucket: aws.String(bucket + "-ws")})
			wantAPIError(t, err, "SignatureDoesNotMatch")
			_, err = c.HeadBucket(testCtx(t, time.Minute), &s3.HeadBucketInput{Bucket: aws.String(bucket + "-ws")})
			wantStatus(t, err, http.StatusNotFound)
		})

		t.Run("UnknownAccessKey", func(t *testing.T) {
			bad := sdkClientWithKeys(t, gw, "AKIDUNKNOWNKEY000000", gw.SecretKey)
			_, err := bad.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("unknown-key"), Body: bytes.NewReader(body)})
			wantAPIError(t, err, "InvalidAccessKeyId")
			wantStatus(t, err, http.StatusForbidden)
			objectAbsent(t, c, bucket, "unknown-key")
		})

		t.Run("Anonymous", func(t *testing.T) {
			req, _ := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodPut, gw.Endpoint+"/"+bucket+"/anonymous", bytes.NewReader(body))
			status, _, resp := send(t, gw, req)
			wantRawError(t, "anonymous PUT", status, resp, http.StatusForbidden, "AccessDenied")
			objectAbsent(t, c, bucket, "anonymous")
		})

		t.Run("StaleDate", func(t *testing.T) {
			status, _, resp := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/stale", Body: body, Time: time.Now().Add(-20 * time.Minute)})
			wantRawError(t, "PUT signed 20 minutes ago", status, resp, http.StatusForbidden, "RequestTimeTooSkewed")
			status, _, resp = doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/stale", Body: body, Time: time.Now().Add(20 * time.Minute)})
			wantRawError(t, "PUT signed 20 minutes ahead", status, resp, http.StatusForbidden, "RequestTimeTooSkewed")
			objectAbsent(t, c, bucket, "stale")
		})

		t.Run("PayloadHashMismatch", func(t *testing.T) {
			// PutObject and UploadPart check the signed hash in the store's
			// content SHA-256, inline and above the knee; a wrong Content-MD5
			// beside it still answers the hash mismatch, found first.
			large := genBytes(902, 2*mib+3)
			up, err := c.CreateMultipartUpload(testCtx(t, time.Minute), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("payload-part")})
			if err != nil {
				t.Fatalf("CreateMultipartUpload: %v", err)
			}
			wrongMD5 := md5.Sum([]byte("not the body"))
			for _, tc := range []struct {
				name   string
				part   bool
				body   []byte
				header http.Header
			}{
				{"put inline", false, body, nil},
				{"put large", false, large, nil},
				{"put large, wrong content-md5 too", false, large, http.Header{"Content-MD5": {base64.StdEncoding.EncodeToString(wrongMD5[:])}}},
				{"part inline", true, body, nil},
				{"part large", true, large, nil},
			} {
				r := rawReq{Method: http.MethodPut, Path: "/" + bucket + "/payload", Body: tc.body, Header: tc.header, Payload: sha([]byte("something else"))}
				if tc.part {
					r.Path = "/" + bucket + "/payload-part"
					r.Query = url.Values{"partNumber": {"1"}, "uploadId": {aws.ToString(up.UploadId)}}
				}
				status, _, resp := doRaw(t, gw, r)
				wantRawError(t, tc.name+" with a wrong signed payload hash", status, resp, http.StatusBadRequest, "XAmzContentSHA256Mismatch")
				if !strings.Contains(string(resp), "<Message>The provided &#39;x-amz-content-sha256&#39; header does not match what was computed.</Message>") {
					t.Fatalf("%s: message: %.400s", tc.name, resp)
				}
				objectAbsent(t, c, bucket, "payload")
				lp, err := c.ListParts(testCtx(t, time.Minute), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("payload-part"), UploadId: up.UploadId})
				if err != nil {
					t.Fatalf("ListParts: %v", err)
				}
				if len(lp.Parts) != 0 {
					t.Fatalf("%s: a part with a wrong signed payload hash was kept: %+v", tc.name, lp.Parts)
				}
			}
			// The right hash, signed, stores the part and the object.
			for _, part := range []bool{false, true} {
				r := rawReq{Method: http.MethodPut, Path: "/" + bucket + "/payload", Body: large}
				if part {
					r.Path = "/" + bucket + "/payload-part"
					r.Query = url.Values{"partNumber": {"1"}, "uploadId": {aws.ToString(up.UploadId)}}
				}
				if status, _, resp := doRaw(t, gw, r); status != http.StatusOK {
					t.Fatalf("signed PUT (part %v): HTTP %d: %.400s", part, status, resp)
				}
			}
			readBackSDK(t, c, bucket, "payload", large)
		})

		t.Run("TamperedChunkSignature", func(t *testing.T) {
			data := genBytes(901, 150*kib) // three 64 KiB chunks and a last one
			for _, tc := range []struct {
				name string
				off  int64 // byte of the encoded stream to flip
				ok   bool
			}{
				{"intact", -1, true},
				{"first chunk data", 1000, false},
				{"second chunk data", 64*kib + 300, false},
				{"chunk signature", 40, false}, // inside "chunk-signature=..." of the first chunk
			} {
				t.Run(tc.name, func(t *testing.T) {
					key := "chunked-" + strings.ReplaceAll(tc.name, " ", "-")
					ctx := testCtx(t, time.Minute)
					req, err := http.NewRequestWithContext(ctx, http.MethodPut, gw.Endpoint+"/"+bucket+"/"+key, io.NopCloser(bytes.NewReader(data)))
					if err != nil {
						t.Fatalf("request: %v", err)
					}
					req = signer.StreamingSignV4(req, gw.AccessKey, gw.SecretKey, "", gw.Region, int64(len(data)), time.Now().UTC(), sha256Hasher{sha256.New()})
					if tc.off >= 0 {
						req.Body = &flipAt{r: req.Body, off: tc.off}
					}
					status, _, resp := send(t, gw, req)
					if tc.ok {
						if status != http.StatusOK {
							t.Fatalf("intact streaming PUT: HTTP %d: %.400s", status, resp)
						}
						readBackSDK(t, c, bucket, key, data)
						return
					}
					wantRawError(t, "streaming PUT with a flipped byte", status, resp, http.StatusForbidden, "SignatureDoesNotMatch")
					objectAbsent(t, c, bucket, key)
				})
			}
		})

		t.Run("WrongChecksumHeader", func(t *testing.T) {
			for _, h := range []struct{ name, value string }{
				{"x-amz-checksum-crc32", checksumOf(types.ChecksumAlgorithmCrc32, []byte("not the body"))},
				{"x-amz-checksum-crc32c", checksumOf(types.ChecksumAlgorithmCrc32c, []byte("not the body"))},
				{"x-amz-checksum-sha256", checksumOf(types.ChecksumAlgorithmSha256, []byte("not the body"))},
			} {
				status, _, resp := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/wrong-checksum", Body: body,
					Header: http.Header{h.name: {h.value}}})
				wantRawError(t, "PUT with a wrong "+h.name, status, resp, http.StatusBadRequest, "BadDigest")
				objectAbsent(t, c, bucket, "wrong-checksum")
			}
			// Also in an UploadPart: the upload must not gain the part.
			up, err := c.CreateMultipartUpload(testCtx(t, time.Minute), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("wrong-part")})
			if err != nil {
				t.Fatalf("CreateMultipartUpload: %v", err)
			}
			status, _, resp := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/wrong-part",
				Query:  url.Values{"partNumber": {"1"}, "uploadId": {aws.ToString(up.UploadId)}},
				Body:   body,
				Header: http.Header{"x-amz-checksum-crc32": {checksumOf(types.ChecksumAlgorithmCrc32, []byte("nope"))}}})
			wantRawError(t, "UploadPart with a wrong x-amz-checksum-crc32", status, resp, http.StatusBadRequest, "BadDigest")
			lp, err := c.ListParts(testCtx(t, time.Minute), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("wrong-part"), UploadId: up.UploadId})
			if err != nil {
				t.Fatalf("ListParts: %v", err)
			}
			if len(lp.Parts) != 0 {
				t.Fatalf("a part with a bad checksum was kept: %+v", lp.Parts)
			}
		})

		t.Run("ContentMD5Mismatch", func(t *testing.T) {
			wrong := md5.Sum([]byte("not the body"))
			status, _, resp := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/wrong-md5", Body: body,
				Header: http.Header{"Content-MD5": {base64.StdEncoding.EncodeToString(wrong[:])}}})
			wantRawError(t, "PUT with a wrong Content-MD5", status, resp, http.StatusBadRequest, "BadDigest")
			objectAbsent(t, c, bucket, "wrong-md5")
			// A Content-MD5 that is not an MD5 at all is InvalidDigest.
			status, _, resp = doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/wrong-md5", Body: body,
				Header: http.Header{"Content-MD5": {"not-base64!"}}})
			wantRawError(t, "PUT with a malformed Content-MD5", status, resp, http.StatusBadRequest, "InvalidDigest")
			objectAbsent(t, c, bucket, "wrong-md5")
		})

		t.Run("MalformedCompleteXML", func(t *testing.T) {
			ctx := testCtx(t, time.Minute)
			up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("bad-complete")})
			if err != nil {
				t.Fatalf("CreateMultipartUpload: %v", err)
			}
			if _, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("bad-complete"), UploadId: up.UploadId,
				PartNumber: aws.Int32(1), Body: bytes.NewReader(body)}); err != nil {
				t.Fatalf("UploadPart: %v", err)
			}
			for _, xmlBody := range []string{
				"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>",
				"this is not xml",
				"<CompleteMultipartUpload></CompleteMultipartUpload>", // no parts
			} {
				status, _, resp := doRaw(t, gw, rawReq{Method: http.MethodPost, Path: "/" + bucket + "/bad-complete",
					Query: url.Values{"uploadId": {aws.ToString(up.UploadId)}}, Body: []byte(xmlBody)})
				wantRawError(t, "Complete with "+xmlBody, status, resp, http.StatusBadRequest, "MalformedXML")
			}
			objectAbsent(t, c, bucket, "bad-complete")
			// The upload survives a malformed Complete.
			lp, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("bad-complete"), UploadId: up.UploadId})
			if err != nil || len(lp.Parts) != 1 {
				t.Fatalf("ListParts after a malformed Complete: %v, %d parts", err, len(lp.Parts))
			}
		})

		t.Run("MalformedDeleteObjectsXML", func(t *testing.T) {
			ctx := testCtx(t, time.Minute)
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("keep-me"), Body: strings.NewReader("keep")}); err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			for _, xmlBody := range []string{
				"<Delete><Object><Key>keep-me</Key></Object>",
				"<<<>>>",
				"<Delete></Delete>", // no objects
			} {
				sum := md5.Sum([]byte(xmlBody))
				status, _, resp := doRaw(t, gw, rawReq{Method: http.MethodPost, Path: "/" + bucket, Query: url.Values{"delete": {""}}, Body: []byte(xmlBody),
					Header: http.Header{"Content-MD5": {base64.StdEncoding.EncodeToString(sum[:])}}})
				wantRawError(t, "DeleteObjects with "+xmlBody, status, resp, http.StatusBadRequest, "MalformedXML")
			}
			if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("keep-me")}); err != nil {
				t.Fatalf("a malformed DeleteObjects deleted keep-me: %v", err)
			}
		})

		t.Run("KeyTooLong", func(t *testing.T) {
			key := strings.Repeat("k", 1025)
			status, _, resp := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/" + key, Body: body})
			wantRawError(t, "PUT of a 1025-byte key", status, resp, http.StatusBadRequest, "KeyTooLongError")
			for _, k := range listKeys(t, c, bucket, "kkkk") {
				t.Fatalf("a key was stored: %.40s... (%d bytes)", k, len(k))
			}
			// 1024 bytes is the limit and is fine.
			if _, err := c.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key[:1024]), Body: strings.NewReader("x")}); err != nil {
				t.Fatalf("PUT of a 1024-byte key: %v", err)
			}
			if _, err := c.DeleteObject(testCtx(t, time.Minute), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key[:1024])}); err != nil {
				t.Fatalf("DeleteObject: %v", err)
			}
		})

		t.Run("InvalidBucketName", func(t *testing.T) {
			for _, name := range []string{"Bad_Bucket", "ab", "a..b", "-dash", strings.Repeat("b", 64)} {
				status, _, resp := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + name})
				wantRawError(t, "CreateBucket "+name, status, resp, http.StatusBadRequest, "InvalidBucketName")
				lb, err := c.ListBuckets(testCtx(t, time.Minute), &s3.ListBucketsInput{})
				if err != nil {
					t.Fatalf("ListBuckets: %v", err)
				}
				for _, b := range lb.Buckets {
					if aws.ToString(b.Name) == name {
						t.Fatalf("invalid bucket %q was created", name)
					}
				}
			}
		})

		t.Run("ExpiredPresignedURL", func(t *testing.T) {
			if _, err := c.PutObject(testCtx(t, time.Minute), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("presigned"), Body: bytes.NewReader(body)}); err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			fresh := presignRaw(t, gw, "/"+bucket+"/presigned", time.Now(), 10*time.Minute)
			req, _ := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, fresh, nil)
			if status, _, resp := send(t, gw, req); status != http.StatusOK || !bytes.Equal(resp, body) {
				t.Fatalf("fresh presigned URL: HTTP %d, %d bytes: %.300s", status, len(resp), resp)
			}
			expired := presignRaw(t, gw, "/"+bucket+"/presigned", time.Now().Add(-time.Hour), time.Minute)
			req, _ = http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, expired, nil)
			status, _, resp := send(t, gw, req)
			wantRawError(t, "expired presigned URL", status, resp, http.StatusForbidden, "AccessDenied")
			// More than 7 days is refused even when fresh.
			tooLong := presignRaw(t, gw, "/"+bucket+"/presigned", time.Now(), 8*24*time.Hour)
			req, _ = http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, tooLong, nil)
			status, _, resp = send(t, gw, req)
			if status < 400 || status >= 500 {
				t.Fatalf("presigned URL valid for 8 days: HTTP %d, want a 4xx: %.300s", status, resp)
			}
		})

		// Whatever happened above, the bucket holds only what the good requests put there.
		t.Run("NothingLeftBehind", func(t *testing.T) {
			keys := listKeys(t, c, bucket, "")
			allowed := map[string]bool{"chunked-intact": true, "keep-me": true, "presigned": true, "payload": true}
			for _, k := range keys {
				if !allowed[k] {
					t.Errorf("unexpected object %.60q left behind", k)
				}
			}
		})
	})
}

// readBackSDK reads an object with the SDK and compares it by SHA-256.
func readBackSDK(t testing.TB, c *s3.Client, bucket, key string, want []byte) {
	t.Helper()
	out, err := c.GetObject(testCtx(t, time.Minute), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	defer out.Body.Close()
	got, n, err := shaReader(out.Body)
	if err != nil || got != sha(want) {
		t.Fatalf("GetObject %s: %d bytes sha %s (err %v), want %d bytes sha %s", key, n, got, err, len(want), sha(want))
	}
}
