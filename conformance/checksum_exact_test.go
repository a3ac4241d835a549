package conformance

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/cespare/xxhash/v2"
	"github.com/minio/crc64nvme"
	"github.com/zeebo/xxh3"

	"github.com/s3gate/s3gate/internal/testgw"
)

// TestChecksumExact checks the checksum, range and chunk-size answers of
// issue 9 against what S3 answers. The code paths that differ between
// engines (Complete, Copy) run on the embedded default and on one PostgreSQL
// engine, over plain HTTP: the transport only changes how the SDK sends a
// checksum (header or trailer), which TestChecksumMatrix covers.
func TestChecksumExact(t *testing.T) {
	cells := []string{testgw.Embedded, "pgchunks"}
	if testgw.External() {
		cells = []string{"external"}
	}
	for _, engine := range cells {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			gw := testgw.Start(t, testgw.Options{Engine: engine})
			cl := sdkClient(t, gw)
			bucket := mustBucket(t, cl, "ckx")
			t.Run("NewAlgorithms", func(t *testing.T) { cxNewAlgorithms(t, gw, cl, bucket) })
			t.Run("NewAlgorithmTrailer", func(t *testing.T) { cxTrailer(t, gw, cl, bucket) })
			t.Run("DefaultCRC64NVME", func(t *testing.T) { cxDefault(t, gw, cl, bucket) })
			t.Run("CompositeComplete", func(t *testing.T) { cxComposite(t, gw, cl, bucket) })
			t.Run("CompleteErrors", func(t *testing.T) { cxCompleteErrors(t, cl, bucket) })
			t.Run("ConflictingHeaders", func(t *testing.T) { cxConflicts(t, gw, cl, bucket) })
			t.Run("CopyChecksum", func(t *testing.T) { cxCopy(t, cl, bucket) })
			t.Run("Ranges", func(t *testing.T) { cxRanges(t, gw, cl, bucket) })
			t.Run("ChunkSize", func(t *testing.T) { cxChunkSize(t, gw, cl, bucket) })
		})
	}
}

// refSum is the expected x-amz-checksum value, computed with the reference
// libraries directly (big-endian digest, base64).
func refSum(alg string, data []byte) string {
	var raw []byte
	switch alg {
	case "CRC32":
		raw = binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(data))
	case "CRC64NVME":
		raw = binary.BigEndian.AppendUint64(nil, crc64nvme.Checksum(data))
	case "SHA256":
		s := sha256.Sum256(data)
		raw = s[:]
	case "MD5":
		s := md5.Sum(data)
		raw = s[:]
	case "SHA512":
		s := sha512.Sum512(data)
		raw = s[:]
	case "XXHASH64":
		raw = binary.BigEndian.AppendUint64(nil, xxhash.Sum64(data))
	case "XXHASH3":
		raw = binary.BigEndian.AppendUint64(nil, xxh3.Hash(data))
	case "XXHASH128":
		h := xxh3.Hash128(data)
		raw = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, h.Hi), h.Lo)
	default:
		panic(alg)
	}
	return base64.StdEncoding.EncodeToString(raw)
}

// refComposite is the COMPOSITE multipart value: the checksum of the
// concatenated raw part checksums, then "-N".
func refComposite(alg string, parts [][]byte) string {
	var cat []byte
	for _, p := range parts {
		raw, _ := base64.StdEncoding.DecodeString(refSum(alg, p))
		cat = append(cat, raw...)
	}
	return refSum(alg, cat) + "-" + strconv.Itoa(len(parts))
}

// newAlgs are the algorithms S3 added after the SDKs' defaults; the SDK
// version here knows their fields but computes only SHA512, so the tests send
// the values themselves.
var newAlgs = []string{"MD5", "SHA512", "XXHASH64", "XXHASH3", "XXHASH128"}

func headChecksums(t *testing.T, gw *testgw.Gateway, bucket, key string, q url.Values) (int, http.Header) {
	t.Helper()
	status, h, _ := doRaw(t, gw, rawReq{Method: http.MethodHead, Path: "/" + bucket + "/" + key, Query: q,
		Header: http.Header{"X-Amz-Checksum-Mode": {"ENABLED"}}})
	return status, h
}

// errMessage is the Message element of a raw S3 error body.
func errMessage(body []byte) string {
	var e struct {
		Message string `xml:"Message"`
	}
	_ = xml.Unmarshal(body, &e)
	return e.Message
}

// wantSDKError fails unless err is an S3 error with this code and message.
func wantSDKError(t *testing.T, what string, err error, code, msg string) {
	t.Helper()
	var ae smithy.APIError
	if err == nil {
		t.Fatalf("%s: succeeded, want %s", what, code)
	}
	if !asAPIError(err, &ae) || ae.ErrorCode() != code || (msg != "" && ae.ErrorMessage() != msg) {
		t.Fatalf("%s: got %v, want %s %q", what, err, code, msg)
	}
}

func asAPIError(err error, ae *smithy.APIError) bool {
	for e := err; e != nil; {
		if a, ok := e.(smithy.APIError); ok {
			*ae = a
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

func cxNewAlgorithms(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	ctx := testCtx(t, 2*time.Minute)
	data := []byte(strings.Repeat("new checksum algorithms ", 3000))
	for _, alg := range newAlgs {
		key := "new-" + strings.ToLower(alg)
		want := refSum(alg, data)
		in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}
		setPutChecksum(in, alg, want)
		out, err := cl.PutObject(ctx, in)
		if err != nil {
			t.Fatalf("%s: PutObject: %v", alg, err)
		}
		if got := putOutChecksum(out, alg); got != want {
			t.Fatalf("%s: PutObject answered %q, want %q", alg, got, want)
		}
		status, h := headChecksums(t, gw, bucket, key, nil)
		if status != http.StatusOK || h.Get("x-amz-checksum-"+strings.ToLower(alg)) != want || h.Get("x-amz-checksum-type") != "FULL_OBJECT" {
			t.Fatalf("%s: HEAD %d %v, want %s FULL_OBJECT", alg, status, h, want)
		}
		attrs, err := cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(bucket), Key: aws.String(key),
			ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesChecksum}})
		if err != nil || attrs.Checksum == nil || attrChecksum(attrs.Checksum, alg) != want || attrs.Checksum.ChecksumType != types.ChecksumTypeFullObject {
			t.Fatalf("%s: GetObjectAttributes %+v %v, want %s", alg, attrs, err, want)
		}
		// A wrong value is BadDigest and stores nothing.
		bad := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key + "-bad"), Body: bytes.NewReader(data)}
		setPutChecksum(bad, alg, refSum(alg, data[1:]))
		_, err = cl.PutObject(ctx, bad)
		wantSDKError(t, alg+" wrong value", err, "BadDigest", "")
		if st, _ := headChecksums(t, gw, bucket, key+"-bad", nil); st != http.StatusNotFound {
			t.Fatalf("%s: a refused PUT left an object (HEAD %d)", alg, st)
		}
	}

	// A multipart upload of a new algorithm is COMPOSITE (none of them can
	// be combined into a full-object value).
	part1, part2 := bytes.Repeat([]byte{'x'}, 5<<20), []byte("the last part")
	const alg = "XXHASH128"
	key := "new-mp-xxhash128"
	up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		ChecksumAlgorithm: types.ChecksumAlgorithmXxhash128})
	if err != nil {
		t.Fatal(err)
	}
	if up.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("CreateMultipartUpload XXHASH128: type %q, want COMPOSITE", up.ChecksumType)
	}
	var done []types.CompletedPart
	for i, p := range [][]byte{part1, part2} {
		n := int32(i + 1)
		o, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(p), ChecksumXXHASH128: aws.String(refSum(alg, p))})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", n, err)
		}
		if aws.ToString(o.ChecksumXXHASH128) != refSum(alg, p) {
			t.Fatalf("UploadPart %d answered %q", n, aws.ToString(o.ChecksumXXHASH128))
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(n), ETag: o.ETag, ChecksumXXHASH128: o.ChecksumXXHASH128})
	}
	comp, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	want := refComposite(alg, [][]byte{part1, part2})
	if aws.ToString(comp.ChecksumXXHASH128) != want || comp.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("Complete: %q %q, want %q COMPOSITE", aws.ToString(comp.ChecksumXXHASH128), comp.ChecksumType, want)
	}
	if _, h := headChecksums(t, gw, bucket, key, nil); h.Get("x-amz-checksum-xxhash128") != want {
		t.Fatalf("HEAD: %q, want %q", h.Get("x-amz-checksum-xxhash128"), want)
	}
}

func setPutChecksum(in *s3.PutObjectInput, alg, v string) {
	switch alg {
	case "MD5":
		in.ChecksumMD5 = aws.String(v)
	case "SHA512":
		in.ChecksumSHA512 = aws.String(v)
	case "XXHASH64":
		in.ChecksumXXHASH64 = aws.String(v)
	case "XXHASH3":
		in.ChecksumXXHASH3 = aws.String(v)
	case "XXHASH128":
		in.ChecksumXXHASH128 = aws.String(v)
	}
}

func putOutChecksum(o *s3.PutObjectOutput, alg string) string {
	switch alg {
	case "MD5":
		return aws.ToString(o.ChecksumMD5)
	case "SHA512":
		return aws.ToString(o.ChecksumSHA512)
	case "XXHASH64":
		return aws.ToString(o.ChecksumXXHASH64)
	case "XXHASH3":
		return aws.ToString(o.ChecksumXXHASH3)
	case "XXHASH128":
		return aws.ToString(o.ChecksumXXHASH128)
	}
	return ""
}

func attrChecksum(c *types.Checksum, alg string) string {
	switch alg {
	case "CRC32":
		return aws.ToString(c.ChecksumCRC32)
	case "CRC64NVME":
		return aws.ToString(c.ChecksumCRC64NVME)
	case "SHA256":
		return aws.ToString(c.ChecksumSHA256)
	case "MD5":
		return aws.ToString(c.ChecksumMD5)
	case "SHA512":
		return aws.ToString(c.ChecksumSHA512)
	case "XXHASH64":
		return aws.ToString(c.ChecksumXXHASH64)
	case "XXHASH3":
		return aws.ToString(c.ChecksumXXHASH3)
	case "XXHASH128":
		return aws.ToString(c.ChecksumXXHASH128)
	}
	return ""
}

// chunkedBody encodes data as an unsigned aws-chunked body with the given
// data chunk sizes and trailers ("name:value").
func chunkedBody(data []byte, sizes []int, trailers ...string) []byte {
	var b bytes.Buffer
	for _, n := range sizes {
		fmt.Fprintf(&b, "%x\r\n", n)
		b.Write(data[:n])
		b.WriteString("\r\n")
		data = data[n:]
	}
	b.WriteString("0\r\n")
	for _, tr := range trailers {
		b.WriteString(tr + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// putChunked sends an unsigned-trailer aws-chunked PUT with the stock signer.
func putChunked(t *testing.T, gw *testgw.Gateway, bucket, key string, data []byte, sizes []int, trailer, value string) (int, []byte) {
	t.Helper()
	h := http.Header{
		"Content-Encoding":             {"aws-chunked"},
		"X-Amz-Decoded-Content-Length": {strconv.Itoa(len(data))},
	}
	var trailers []string
	if trailer != "" {
		h.Set("X-Amz-Trailer", trailer)
		trailers = append(trailers, trailer+":"+value)
	}
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/" + key, Header: h,
		Body: chunkedBody(data, sizes, trailers...), Payload: "STREAMING-UNSIGNED-PAYLOAD-TRAILER"})
	return status, body
}

func cxTrailer(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	data := bytes.Repeat([]byte("trailer "), 4096) // 32 KiB: 16 KiB + 16 KiB chunks
	for _, alg := range []string{"XXHASH3", "SHA512"} {
		key := "trailer-" + strings.ToLower(alg)
		hdr := "x-amz-checksum-" + strings.ToLower(alg)
		status, body := putChunked(t, gw, bucket, key, data, []int{16 << 10, 16 << 10}, hdr, refSum(alg, data))
		if status != http.StatusOK {
			t.Fatalf("%s trailer PUT: %d %s", alg, status, body)
		}
		if _, h := headChecksums(t, gw, bucket, key, nil); h.Get(hdr) != refSum(alg, data) {
			t.Fatalf("%s trailer: HEAD %s = %q, want %q", alg, hdr, h.Get(hdr), refSum(alg, data))
		}
		status, body = putChunked(t, gw, bucket, key+"-bad", data, []int{16 << 10, 16 << 10}, hdr, refSum(alg, data[1:]))
		wantRawError(t, alg+" wrong trailer", status, body, http.StatusBadRequest, "BadDigest")
	}
}

func cxDefault(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	ctx := testCtx(t, 2*time.Minute)
	data := []byte("no checksum sent with this body")
	// A raw signed PUT: the SDK would add its own CRC32.
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/plain-default", Body: data})
	if status != http.StatusOK {
		t.Fatalf("PUT: %d %s", status, body)
	}
	_, h := headChecksums(t, gw, bucket, "plain-default", nil)
	if h.Get("x-amz-checksum-crc64nvme") != refSum("CRC64NVME", data) || h.Get("x-amz-checksum-type") != "FULL_OBJECT" {
		t.Fatalf("HEAD of a PUT without checksum: %v, want CRC64NVME %s FULL_OBJECT", h, refSum("CRC64NVME", data))
	}
	attrs, err := cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(bucket), Key: aws.String("plain-default"),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesChecksum}})
	if err != nil || attrs.Checksum == nil || aws.ToString(attrs.Checksum.ChecksumCRC64NVME) != refSum("CRC64NVME", data) ||
		attrs.Checksum.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("GetObjectAttributes: %+v %v", attrs, err)
	}

	// A multipart upload without an algorithm (the SDK told to send none)
	// gets a FULL_OBJECT CRC64NVME of the whole object; a part of it has no
	// checksum of its own to return.
	bare := sdkClient(t, gw, func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
	part1, part2 := bytes.Repeat([]byte{'d'}, 5<<20), []byte("default tail")
	key := "mp-default"
	up, err := bare.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	for i, p := range [][]byte{part1, part2} {
		o, err := bare.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: o.ETag})
	}
	comp, err := bare.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	whole := append(append([]byte{}, part1...), part2...)
	if aws.ToString(comp.ChecksumCRC64NVME) != refSum("CRC64NVME", whole) || comp.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("Complete without algorithm: %q %q, want %s FULL_OBJECT", aws.ToString(comp.ChecksumCRC64NVME), comp.ChecksumType, refSum("CRC64NVME", whole))
	}
	status, h = headChecksums(t, gw, bucket, key, url.Values{"partNumber": {"1"}})
	if status != http.StatusPartialContent || h.Get("x-amz-checksum-crc64nvme") != "" || h.Get("x-amz-mp-parts-count") != "2" {
		t.Fatalf("HEAD part 1 of a FULL_OBJECT upload: %d %v, want 206, no part checksum, 2 parts", status, h)
	}
}

func cxComposite(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	ctx := testCtx(t, 2*time.Minute)
	part1, part2 := bytes.Repeat([]byte{'c'}, 5<<20), []byte("composite tail")
	key := "mp-composite"
	up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	for i, p := range [][]byte{part1, part2} {
		o, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: o.ETag, ChecksumCRC32: o.ChecksumCRC32})
	}
	want := refComposite("CRC32", [][]byte{part1, part2})
	// The object checksum with its "-N" suffix, as clients send it.
	in := &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}, ChecksumCRC32: aws.String(want),
		MpuObjectSize: aws.Int64(int64(len(part1) + len(part2)))}
	// First a wrong part count: BadDigest, and the upload stays.
	bad := *in
	bad.ChecksumCRC32 = aws.String(strings.TrimSuffix(want, "-2") + "-3")
	_, err = cl.CompleteMultipartUpload(ctx, &bad)
	wantSDKError(t, "Complete with a wrong -N", err, "BadDigest", "")
	comp, err := cl.CompleteMultipartUpload(ctx, in)
	if err != nil {
		t.Fatalf("Complete with %q: %v", want, err)
	}
	if aws.ToString(comp.ChecksumCRC32) != want || comp.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("Complete: %q %q, want %q COMPOSITE", aws.ToString(comp.ChecksumCRC32), comp.ChecksumType, want)
	}
	_, h := headChecksums(t, gw, bucket, key, nil)
	if h.Get("x-amz-checksum-crc32") != want || h.Get("x-amz-checksum-type") != "COMPOSITE" {
		t.Fatalf("HEAD: %v, want %s COMPOSITE", h, want)
	}
	// GetObjectAttributes gives the value without "-N" (the count is
	// ObjectParts.TotalPartsCount), as S3 does.
	attrs, err := cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(bucket), Key: aws.String(key),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesChecksum, types.ObjectAttributesObjectParts}})
	if err != nil || attrs.Checksum == nil || aws.ToString(attrs.Checksum.ChecksumCRC32) != strings.TrimSuffix(want, "-2") ||
		attrs.Checksum.ChecksumType != types.ChecksumTypeComposite || attrs.ObjectParts == nil || aws.ToInt32(attrs.ObjectParts.TotalPartsCount) != 2 {
		t.Fatalf("GetObjectAttributes: %+v %v", attrs, err)
	}
	// A part of a COMPOSITE object returns that part's checksum.
	status, h := headChecksums(t, gw, bucket, key, url.Values{"partNumber": {"2"}})
	if status != http.StatusPartialContent || h.Get("x-amz-checksum-crc32") != refSum("CRC32", part2) {
		t.Fatalf("HEAD part 2: %d %v, want part checksum %s", status, h, refSum("CRC32", part2))
	}
}

func cxCompleteErrors(t *testing.T, cl *s3.Client, bucket string) {
	ctx := testCtx(t, 2*time.Minute)
	data := []byte("one small part")
	start := func(key string, alg types.ChecksumAlgorithm, typ types.ChecksumType) (*string, types.CompletedPart) {
		up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
			ChecksumAlgorithm: alg, ChecksumType: typ})
		if err != nil {
			t.Fatal(err)
		}
		o, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(data), ChecksumAlgorithm: alg})
		if err != nil {
			t.Fatal(err)
		}
		return up.UploadId, types.CompletedPart{PartNumber: aws.Int32(1), ETag: o.ETag, ChecksumSHA256: o.ChecksumSHA256, ChecksumCRC32: o.ChecksumCRC32}
	}
	complete := func(key string, id *string, p types.CompletedPart, mod func(*s3.CompleteMultipartUploadInput)) error {
		in := &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: id,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{p}}}
		if mod != nil {
			mod(in)
		}
		_, err := cl.CompleteMultipartUpload(ctx, in)
		return err
	}

	id, p := start("ce-missing", types.ChecksumAlgorithmSha256, "")
	noSum := p
	noSum.ChecksumSHA256 = nil
	wantSDKError(t, "Complete without part checksums", complete("ce-missing", id, noSum, nil), "InvalidRequest",
		"The upload was created using a sha256 checksum. The complete request must include the checksum for each part. It was missing for part 1 in the request.")
	wantSDKError(t, "Complete with a wrong x-amz-mp-object-size", complete("ce-missing", id, p, func(in *s3.CompleteMultipartUploadInput) {
		in.MpuObjectSize = aws.Int64(int64(len(data) + 1))
	}), "InvalidRequest", fmt.Sprintf("The provided 'x-amz-mp-object-size' header value %d does not match what was computed: %d", len(data)+1, len(data)))
	wantSDKError(t, "Complete with another checksum type", complete("ce-missing", id, p, func(in *s3.CompleteMultipartUploadInput) {
		in.ChecksumType = types.ChecksumTypeFullObject
	}), "InvalidRequest", "The upload was created using the COMPOSITE checksum mode. The complete request must use the same checksum mode.")
	// The refused Completes changed nothing: the right one still works.
	if err := complete("ce-missing", id, p, nil); err != nil {
		t.Fatalf("Complete after refusals: %v", err)
	}

	// A part checksum of another algorithm than the upload's.
	up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("ce-alg"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("ce-alg"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(data), ChecksumSHA256: aws.String(refSum("SHA256", data))})
	wantSDKError(t, "UploadPart SHA256 into a CRC32 upload", err, "InvalidRequest",
		"Checksum Type mismatch occurred, expected checksum Type: crc32, actual checksum Type: sha256")
	parts, err := cl.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String("ce-alg"), UploadId: up.UploadId})
	if err != nil || len(parts.Parts) != 0 {
		t.Fatalf("a refused part was stored: %+v %v", parts, err)
	}
}

func cxConflicts(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	data := []byte("conflicting checksum headers")
	tests := []struct {
		name string
		h    http.Header
		msg  string
	}{
		{"two values", http.Header{"X-Amz-Checksum-Crc32": {refSum("CRC32", data)}, "X-Amz-Checksum-Sha256": {refSum("SHA256", data)}},
			"Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."},
		{"sdk algorithm names another", http.Header{"X-Amz-Sdk-Checksum-Algorithm": {"CRC32"}, "X-Amz-Checksum-Sha256": {refSum("SHA256", data)}},
			"x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found."},
		{"checksum algorithm names another", http.Header{"X-Amz-Checksum-Algorithm": {"SHA1"}, "X-Amz-Checksum-Crc32": {refSum("CRC32", data)}},
			"x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found."},
		{"malformed value", http.Header{"X-Amz-Checksum-Xxhash64": {"AAAA"}}, "Value for x-amz-checksum-xxhash64 header is invalid."},
	}
	for i, tc := range tests {
		key := "conflict-" + strconv.Itoa(i)
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/" + key, Header: tc.h, Body: data})
		wantRawError(t, tc.name, status, body, http.StatusBadRequest, "InvalidRequest")
		if got := errMessage(body); got != tc.msg {
			t.Errorf("%s: message %q, want %q", tc.name, got, tc.msg)
		}
		if st, _ := headChecksums(t, gw, bucket, key, nil); st != http.StatusNotFound {
			t.Errorf("%s: a refused PUT left an object (HEAD %d)", tc.name, st)
		}
	}
}

func cxCopy(t *testing.T, cl *s3.Client, bucket string) {
	ctx := testCtx(t, 2*time.Minute)
	// A multipart source with a COMPOSITE SHA256: its copy gets the
	// full-object SHA256 of the bytes, computed from the source.
	part1, part2 := bytes.Repeat([]byte{'s'}, 5<<20), []byte("copy tail")
	whole := append(append([]byte{}, part1...), part2...)
	src := "copy-src-mp"
	up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(src),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	for i, p := range [][]byte{part1, part2} {
		o, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(src), UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: o.ETag, ChecksumSHA256: o.ChecksumSHA256})
	}
	if _, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(src),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatal(err)
	}
	headSum := func(key string) *s3.HeadObjectOutput {
		t.Helper()
		h, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatalf("HEAD %s: %v", key, err)
		}
		return h
	}
	copyTo := func(dst, from string, alg types.ChecksumAlgorithm) *s3.CopyObjectOutput {
		t.Helper()
		o, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(dst),
			CopySource: aws.String(bucket + "/" + from), ChecksumAlgorithm: alg})
		if err != nil {
			t.Fatalf("CopyObject %s -> %s (%q): %v", from, dst, alg, err)
		}
		return o
	}
	o := copyTo("copy-of-mp", src, "")
	if aws.ToString(o.CopyObjectResult.ChecksumSHA256) != refSum("SHA256", whole) {
		t.Fatalf("copy of a multipart object: %q, want the full-object %s", aws.ToString(o.CopyObjectResult.ChecksumSHA256), refSum("SHA256", whole))
	}
	if h := headSum("copy-of-mp"); aws.ToString(h.ChecksumSHA256) != refSum("SHA256", whole) || h.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("HEAD of the copy: %q %q", aws.ToString(h.ChecksumSHA256), h.ChecksumType)
	}
	readBackSDK(t, cl, bucket, "copy-of-mp", whole)

	// A copy asked for another algorithm computes it.
	o = copyTo("copy-crc32", "copy-of-mp", types.ChecksumAlgorithmCrc32)
	if aws.ToString(o.CopyObjectResult.ChecksumCRC32) != refSum("CRC32", whole) {
		t.Fatalf("copy with CRC32: %q, want %s", aws.ToString(o.CopyObjectResult.ChecksumCRC32), refSum("CRC32", whole))
	}
	if h := headSum("copy-crc32"); aws.ToString(h.ChecksumCRC32) != refSum("CRC32", whole) || h.ChecksumSHA256 != nil {
		t.Fatalf("HEAD of the CRC32 copy: %+v", h)
	}
	// A copy onto itself that only changes the algorithm is allowed and
	// recomputes it.
	o = copyTo("copy-crc32", "copy-crc32", types.ChecksumAlgorithmXxhash64)
	if aws.ToString(o.CopyObjectResult.ChecksumXXHASH64) != refSum("XXHASH64", whole) {
		t.Fatalf("self-copy with XXHASH64: %+v", o.CopyObjectResult)
	}
	readBackSDK(t, cl, bucket, "copy-crc32", whole)
}

func cxRanges(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	ctx := testCtx(t, 2*time.Minute)
	data := []byte("0123456789abcdef")
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("r-plain"), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("r-empty"), Body: bytes.NewReader(nil)}); err != nil {
		t.Fatal(err)
	}
	get := func(key, rng string, q url.Values) (int, http.Header, []byte) {
		h := http.Header{}
		if rng != "" {
			h.Set("Range", rng)
		}
		return doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + bucket + "/" + key, Query: q, Header: h})
	}
	tests := []struct {
		name, key, rng string
		q              url.Values
		status         int
		body, crange   string
		code           string
	}{
		{"malformed range ignored", "r-plain", "bytes=abc", nil, 200, string(data), "", ""},
		{"inverted range ignored", "r-plain", "bytes=9-3", nil, 200, string(data), "", ""},
		{"other unit ignored", "r-plain", "items=0-3", nil, 200, string(data), "", ""},
		{"suffix of an empty object", "r-empty", "bytes=-1", nil, 200, "", "", ""},
		{"first-pos of an empty object", "r-empty", "bytes=0-", nil, 416, "", "", "InvalidRange"},
		{"part 1 of a plain object", "r-plain", "", url.Values{"partNumber": {"1"}}, 206, string(data), "bytes 0-15/16", ""},
		{"part 2 of a plain object", "r-plain", "", url.Values{"partNumber": {"2"}}, 416, "", "", "InvalidPartNumber"},
		{"part beyond a multipart object", "mp-composite", "", url.Values{"partNumber": {"3"}}, 416, "", "", "InvalidPartNumber"},
	}
	for _, tc := range tests {
		status, h, body := get(tc.key, tc.rng, tc.q)
		if tc.code != "" {
			wantRawError(t, tc.name, status, body, tc.status, tc.code)
			continue
		}
		if status != tc.status || string(body) != tc.body || h.Get("Content-Range") != tc.crange {
			t.Errorf("%s: %d %q Content-Range %q, want %d %q %q", tc.name, status, body, h.Get("Content-Range"), tc.status, tc.body, tc.crange)
		}
		if tc.q != nil && h.Get("x-amz-mp-parts-count") != "" {
			t.Errorf("%s: x-amz-mp-parts-count %q on a plain object", tc.name, h.Get("x-amz-mp-parts-count"))
		}
	}
	// A multipart upload made without a checksum returns no part checksum.
	if status, h := headChecksums(t, gw, bucket, "mp-default", url.Values{"partNumber": {"2"}}); status != 206 || h.Get("x-amz-checksum-crc32") != "" || h.Get("x-amz-checksum-crc64nvme") != "" {
		t.Errorf("part of an upload without checksum: %d %v", status, h)
	}
}

func cxChunkSize(t *testing.T, gw *testgw.Gateway, cl *s3.Client, bucket string) {
	data := bytes.Repeat([]byte("c"), 8192+5)
	// Every data chunk but the last is at least 8 KiB: accepted.
	if status, body := putChunked(t, gw, bucket, "chunks-ok", data, []int{8192, 5}, "x-amz-checksum-crc32", refSum("CRC32", data)); status != 200 {
		t.Fatalf("8 KiB + 5 B chunks: %d %s", status, body)
	}
	readBackSDK(t, cl, bucket, "chunks-ok", data)
	// A small chunk that is not the last: InvalidChunkSizeError, nothing stored.
	status, body := putChunked(t, gw, bucket, "chunks-small", data, []int{5, 8192}, "x-amz-checksum-crc32", refSum("CRC32", data))
	wantRawError(t, "5 B then 8 KiB chunks", status, body, http.StatusBadRequest, "InvalidChunkSizeError")
	if errMessage(body) != "Only the last chunk is allowed to have a size less than 8192 bytes" {
		t.Errorf("message %q", errMessage(body))
	}
	if st, _ := headChecksums(t, gw, bucket, "chunks-small", nil); st != http.StatusNotFound {
		t.Fatalf("a refused chunked PUT left an object (HEAD %d)", st)
	}
}
