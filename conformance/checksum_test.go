package conformance

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/internal/testgw"
)

// checksumEngines are the engines the checksum matrix runs on: the embedded
// default and the PostgreSQL default. The other engines share the store code
// that computes and combines checksums; TestAWSSDK covers them for single puts.
var checksumEngines = map[string]bool{testgw.Embedded: true, "pgchunks": true, "external": true}

// forChecksumCombos is forEachCombo restricted to checksumEngines.
func forChecksumCombos(t *testing.T, fn func(t *testing.T, c combo, gw *testgw.Gateway)) {
	t.Helper()
	for _, c := range combos() {
		if !checksumEngines[c.Engine] {
			continue
		}
		t.Run(fmt.Sprintf("%s/%s", c.Engine, c.Transport), func(t *testing.T) {
			t.Parallel()
			gw := testgw.Start(t, testgw.Options{Engine: c.Engine, TLS: c.TLS()})
			fn(t, c, gw)
		})
	}
}

var allChecksumAlgos = []types.ChecksumAlgorithm{
	types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmCrc64nvme,
	types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256,
}

func isCRCAlgo(a types.ChecksumAlgorithm) bool {
	return a == types.ChecksumAlgorithmCrc32 || a == types.ChecksumAlgorithmCrc32c || a == types.ChecksumAlgorithmCrc64nvme
}

// ckValues is the checksum fields every SDK output shape carries.
type ckValues struct{ crc32, crc32c, crc64, sha1, sha256 *string }

func (v ckValues) of(a types.ChecksumAlgorithm) string {
	return aws.ToString(map[types.ChecksumAlgorithm]*string{
		types.ChecksumAlgorithmCrc32: v.crc32, types.ChecksumAlgorithmCrc32c: v.crc32c,
		types.ChecksumAlgorithmCrc64nvme: v.crc64, types.ChecksumAlgorithmSha1: v.sha1,
		types.ChecksumAlgorithmSha256: v.sha256,
	}[a])
}

// others lists the algorithms other than a that carry a value (there must be none).
func (v ckValues) others(a types.ChecksumAlgorithm) []string {
	var out []string
	for _, b := range allChecksumAlgos {
		if b != a && v.of(b) != "" {
			out = append(out, string(b))
		}
	}
	return out
}

// compositeOf is the COMPOSITE multipart checksum AWS defines: the checksum
// of the concatenated raw part checksums, then "-N".
func compositeOf(a types.ChecksumAlgorithm, parts [][]byte) string {
	var cat []byte
	for _, p := range parts {
		raw, _ := base64.StdEncoding.DecodeString(checksumOf(a, p))
		cat = append(cat, raw...)
	}
	return fmt.Sprintf("%s-%d", checksumOf(a, cat), len(parts))
}

// setCk sets the checksum value of algorithm a on an input or part shape.
func setCk(a types.ChecksumAlgorithm, v string, crc32, crc32c, crc64, sha1, sha256 **string) {
	switch a {
	case types.ChecksumAlgorithmCrc32:
		*crc32 = aws.String(v)
	case types.ChecksumAlgorithmCrc32c:
		*crc32c = aws.String(v)
	case types.ChecksumAlgorithmCrc64nvme:
		*crc64 = aws.String(v)
	case types.ChecksumAlgorithmSha1:
		*sha1 = aws.String(v)
	case types.ChecksumAlgorithmSha256:
		*sha256 = aws.String(v)
	}
}

// wrongValue is a well-formed checksum of algorithm a that matches nothing
// the tests upload.
func wrongValue(a types.ChecksumAlgorithm) string { return checksumOf(a, []byte("not the content")) }

// TestChecksumMatrix drives every checksum algorithm through aws-sdk-go-v2
// (default settings: trailers over HTTPS, headers over HTTP) as a single put
// (value sent as a header, and computed by the SDK), and as multipart uploads
// of type COMPOSITE and FULL_OBJECT where S3 allows the combination. Each
// case checks the value in every place S3 returns it, the bytes read back,
// and that a mismatch is BadDigest and stores nothing.
func TestChecksumMatrix(t *testing.T) {
	forChecksumCombos(t, func(t *testing.T, c combo, gw *testgw.Gateway) {
		rgw, wire := recordingGateway(gw)
		cl := sdkClient(t, rgw)
		bucket := mustBucket(t, cl, "ck")
		for i, a := range allChecksumAlgos {
			t.Run(string(a)+"/single", func(t *testing.T) { ckSingle(t, cl, bucket, a, uint64(700+i)) })
			if a != types.ChecksumAlgorithmCrc64nvme {
				t.Run(string(a)+"/COMPOSITE", func(t *testing.T) {
					ckMultipart(t, cl, bucket, a, types.ChecksumTypeComposite, uint64(720+i))
				})
			}
			if isCRCAlgo(a) {
				t.Run(string(a)+"/FULL_OBJECT", func(t *testing.T) {
					ckMultipart(t, cl, bucket, a, types.ChecksumTypeFullObject, uint64(740+i))
				})
			}
		}
		t.Run("refused combinations", func(t *testing.T) { ckRefusedTypes(t, cl, bucket) })
		// The SDK really used the wire format this transport implies.
		if c.TLS() && !testgw.External() && !wire.Saw("STREAMING-UNSIGNED-PAYLOAD-TRAILER+x-amz-trailer") {
			t.Errorf("over HTTPS no trailing checksum was sent; wire formats seen: %s", wire)
		}
	})
}

func ckSingle(t *testing.T, cl *s3.Client, bucket string, a types.ChecksumAlgorithm, seed uint64) {
	ctx := testCtx(t, 2*time.Minute)
	for _, mode := range []string{"header", "computed"} {
		for _, size := range []int{3 * kib, 600 * kib} { // inline and streamed tiers
			data := genBytes(seed, size)
			want := checksumOf(a, data)
			key := fmt.Sprintf("single/%s/%s/%d", a, mode, size)
			in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data), ChecksumAlgorithm: a}
			if mode == "header" {
				setCk(a, want, &in.ChecksumCRC32, &in.ChecksumCRC32C, &in.ChecksumCRC64NVME, &in.ChecksumSHA1, &in.ChecksumSHA256)
			}
			put, err := cl.PutObject(ctx, in)
			if err != nil {
				t.Fatalf("PutObject %s: %v", key, err)
			}
			pv := ckValues{put.ChecksumCRC32, put.ChecksumCRC32C, put.ChecksumCRC64NVME, put.ChecksumSHA1, put.ChecksumSHA256}
			if pv.of(a) != want {
				t.Fatalf("PutObject %s answered %s %q, want %q", key, a, pv.of(a), want)
			}
			ckCheckStored(t, cl, bucket, key, a, want, types.ChecksumTypeFullObject, data)

			// A wrong value is BadDigest and leaves nothing behind.
			bad := key + "/bad"
			in = &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(bad), Body: bytes.NewReader(data), ChecksumAlgorithm: a}
			setCk(a, wrongValue(a), &in.ChecksumCRC32, &in.ChecksumCRC32C, &in.ChecksumCRC64NVME, &in.ChecksumSHA1, &in.ChecksumSHA256)
			_, err = cl.PutObject(ctx, in)
			wantAPIError(t, err, "BadDigest")
			objectAbsent(t, cl, bucket, bad)
		}
	}
}

// ckCheckStored verifies the checksum of a stored object on GET and HEAD
// (x-amz-checksum-mode: ENABLED), in GetObjectAttributes, and the bytes.
func ckCheckStored(t *testing.T, cl *s3.Client, bucket, key string, a types.ChecksumAlgorithm, want string, typ types.ChecksumType, data []byte) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	get, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	body, err := io.ReadAll(get.Body) // the SDK validates full-object checksums at EOF
	get.Body.Close()
	if err != nil || sha(body) != sha(data) {
		t.Fatalf("GetObject %s: %d bytes, err %v; want the %d bytes stored", key, len(body), err, len(data))
	}
	gv := ckValues{get.ChecksumCRC32, get.ChecksumCRC32C, get.ChecksumCRC64NVME, get.ChecksumSHA1, get.ChecksumSHA256}
	if gv.of(a) != want || len(gv.others(a)) > 0 || get.ChecksumType != typ {
		t.Fatalf("GetObject %s: %s %q type %q (others %v), want %q type %s", key, a, gv.of(a), get.ChecksumType, gv.others(a), want, typ)
	}
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatalf("HeadObject %s: %v", key, err)
	}
	hv := ckValues{head.ChecksumCRC32, head.ChecksumCRC32C, head.ChecksumCRC64NVME, head.ChecksumSHA1, head.ChecksumSHA256}
	if hv.of(a) != want || head.ChecksumType != typ {
		t.Fatalf("HeadObject %s: %s %q type %q, want %q type %s", key, a, hv.of(a), head.ChecksumType, want, typ)
	}
	// Without checksum mode no checksum is returned, as on AWS.
	plain, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("HeadObject %s: %v", key, err)
	}
	if pv := (ckValues{plain.ChecksumCRC32, plain.ChecksumCRC32C, plain.ChecksumCRC64NVME, plain.ChecksumSHA1, plain.ChecksumSHA256}); pv.of(a) != "" {
		t.Fatalf("HeadObject %s without checksum mode returned %s %q", key, a, pv.of(a))
	}
	attrs, err := cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(bucket), Key: aws.String(key),
		ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesChecksum, types.ObjectAttributesObjectSize}})
	if err != nil {
		t.Fatalf("GetObjectAttributes %s: %v", key, err)
	}
	if attrs.Checksum == nil {
		t.Fatalf("GetObjectAttributes %s: no Checksum", key)
	}
	av := ckValues{attrs.Checksum.ChecksumCRC32, attrs.Checksum.ChecksumCRC32C, attrs.Checksum.ChecksumCRC64NVME, attrs.Checksum.ChecksumSHA1, attrs.Checksum.ChecksumSHA256}
	// GetObjectAttributes reports a composite checksum without its "-N".
	wantAttr, _, _ := strings.Cut(want, "-")
	if av.of(a) != wantAttr || attrs.Checksum.ChecksumType != typ || aws.ToInt64(attrs.ObjectSize) != int64(len(data)) {
		t.Fatalf("GetObjectAttributes %s: %s %q type %q size %d, want %q type %s size %d",
			key, a, av.of(a), attrs.Checksum.ChecksumType, aws.ToInt64(attrs.ObjectSize), wantAttr, typ, len(data))
	}
}

func ckMultipart(t *testing.T, cl *s3.Client, bucket string, a types.ChecksumAlgorithm, typ types.ChecksumType, seed uint64) {
	ctx := testCtx(t, 4*time.Minute)
	key := fmt.Sprintf("mp/%s/%s", a, typ)
	parts := [][]byte{genBytes(seed, 5*mib), genBytes(seed+1, 5*mib), genBytes(seed+2, 100*kib)}
	all := bytes.Join(parts, nil)

	create, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key),
		ChecksumAlgorithm: a, ChecksumType: typ})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	if create.ChecksumAlgorithm != a || create.ChecksumType != typ {
		t.Fatalf("CreateMultipartUpload answered algorithm %q type %q, want %s %s", create.ChecksumAlgorithm, create.ChecksumType, a, typ)
	}
	id := create.UploadId

	// A part whose checksum does not match is BadDigest and is not stored.
	bad := &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: id, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(parts[0]), ChecksumAlgorithm: a}
	setCk(a, wrongValue(a), &bad.ChecksumCRC32, &bad.ChecksumCRC32C, &bad.ChecksumCRC64NVME, &bad.ChecksumSHA1, &bad.ChecksumSHA256)
	_, err = cl.UploadPart(ctx, bad)
	wantAPIError(t, err, "BadDigest")

	completed := make([]types.CompletedPart, len(parts))
	for i, p := range parts {
		up, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: id,
			PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p), ChecksumAlgorithm: a})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", i+1, err)
		}
		uv := ckValues{up.ChecksumCRC32, up.ChecksumCRC32C, up.ChecksumCRC64NVME, up.ChecksumSHA1, up.ChecksumSHA256}
		if uv.of(a) != checksumOf(a, p) {
			t.Fatalf("UploadPart %d answered %s %q, want %q", i+1, a, uv.of(a), checksumOf(a, p))
		}
		completed[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag}
		setCk(a, checksumOf(a, p), &completed[i].ChecksumCRC32, &completed[i].ChecksumCRC32C, &completed[i].ChecksumCRC64NVME, &completed[i].ChecksumSHA1, &completed[i].ChecksumSHA256)
	}

	// ListParts carries every part's checksum and the upload's algorithm and type.
	lp, err := cl.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: id})
	if err != nil {
		t.Fatalf("ListParts: %v", err)
	}
	if len(lp.Parts) != len(parts) || lp.ChecksumAlgorithm != a || lp.ChecksumType != typ {
		t.Fatalf("ListParts: %d parts, algorithm %q type %q; want %d parts, %s %s", len(lp.Parts), lp.ChecksumAlgorithm, lp.ChecksumType, len(parts), a, typ)
	}
	for i, p := range lp.Parts {
		v := ckValues{p.ChecksumCRC32, p.ChecksumCRC32C, p.ChecksumCRC64NVME, p.ChecksumSHA1, p.ChecksumSHA256}
		if v.of(a) != checksumOf(a, parts[i]) {
			t.Fatalf("ListParts part %d: %s %q, want %q", i+1, a, v.of(a), checksumOf(a, parts[i]))
		}
	}

	want := compositeOf(a, parts)
	if typ == types.ChecksumTypeFullObject {
		want = checksumOf(a, all) // combined from the part CRCs by the gateway
	}
	in := &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}}
	if typ == types.ChecksumTypeFullObject {
		// A wrong full-object value is BadDigest; the upload stays, nothing is stored.
		setCk(a, wrongValue(a), &in.ChecksumCRC32, &in.ChecksumCRC32C, &in.ChecksumCRC64NVME, &in.ChecksumSHA1, &in.ChecksumSHA256)
		in.ChecksumType = typ
		_, err := cl.CompleteMultipartUpload(ctx, in)
		wantAPIError(t, err, "BadDigest")
		objectAbsent(t, cl, bucket, key)
		setCk(a, want, &in.ChecksumCRC32, &in.ChecksumCRC32C, &in.ChecksumCRC64NVME, &in.ChecksumSHA1, &in.ChecksumSHA256)
	}
	done, err := cl.CompleteMultipartUpload(ctx, in)
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	dv := ckValues{done.ChecksumCRC32, done.ChecksumCRC32C, done.ChecksumCRC64NVME, done.ChecksumSHA1, done.ChecksumSHA256}
	if dv.of(a) != want || done.ChecksumType != typ {
		t.Fatalf("CompleteMultipartUpload: %s %q type %q, want %q type %s", a, dv.of(a), done.ChecksumType, want, typ)
	}
	ckCheckStored(t, cl, bucket, key, a, want, typ, all)

	// GET/HEAD of one part of a COMPOSITE object return that part's
	// checksum; S3 returns none for a part of a FULL_OBJECT one (the
	// object's checksum describes no single part).
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), PartNumber: aws.Int32(2), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatalf("HeadObject partNumber=2: %v", err)
	}
	wantPart := checksumOf(a, parts[1])
	if typ == types.ChecksumTypeFullObject {
		wantPart = ""
	}
	if hv := (ckValues{head.ChecksumCRC32, head.ChecksumCRC32C, head.ChecksumCRC64NVME, head.ChecksumSHA1, head.ChecksumSHA256}); hv.of(a) != wantPart || aws.ToInt32(head.PartsCount) != 3 {
		t.Fatalf("HeadObject partNumber=2: %s %q parts %d, want %q and 3 parts", a, hv.of(a), aws.ToInt32(head.PartsCount), wantPart)
	}

	// GetObjectAttributes pages the parts with their checksums.
	var seen []types.ObjectPart
	marker := (*string)(nil)
	for page := 0; ; page++ {
		attrs, err := cl.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: aws.String(bucket), Key: aws.String(key),
			ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesObjectParts, types.ObjectAttributesEtag},
			MaxParts:         aws.Int32(2), PartNumberMarker: marker})
		if err != nil {
			t.Fatalf("GetObjectAttributes page %d: %v", page, err)
		}
		op := attrs.ObjectParts
		if op == nil || aws.ToInt32(op.TotalPartsCount) != 3 || aws.ToInt32(op.MaxParts) != 2 {
			t.Fatalf("GetObjectAttributes page %d: ObjectParts %+v, want 3 parts in pages of 2", page, op)
		}
		if want := strings.Trim(aws.ToString(done.ETag), `"`); aws.ToString(attrs.ETag) != want {
			t.Fatalf("GetObjectAttributes ETag %q, want %q (unquoted)", aws.ToString(attrs.ETag), want)
		}
		seen = append(seen, op.Parts...)
		if !aws.ToBool(op.IsTruncated) {
			break
		}
		if page > 3 {
			t.Fatal("GetObjectAttributes: parts paging does not end")
		}
		marker = op.NextPartNumberMarker
	}
	if len(seen) != 3 {
		t.Fatalf("GetObjectAttributes paged %d parts, want 3", len(seen))
	}
	for i, p := range seen {
		v := ckValues{p.ChecksumCRC32, p.ChecksumCRC32C, p.ChecksumCRC64NVME, p.ChecksumSHA1, p.ChecksumSHA256}
		if aws.ToInt32(p.PartNumber) != int32(i+1) || aws.ToInt64(p.Size) != int64(len(parts[i])) || v.of(a) != checksumOf(a, parts[i]) {
			t.Fatalf("GetObjectAttributes part %d: number %d size %d %s %q", i+1, aws.ToInt32(p.PartNumber), aws.ToInt64(p.Size), a, v.of(a))
		}
	}
}

// ckRefusedTypes: S3 allows FULL_OBJECT only for CRCs and COMPOSITE for all
// but CRC64NVME.
func ckRefusedTypes(t *testing.T, cl *s3.Client, bucket string) {
	ctx := testCtx(t, time.Minute)
	for _, tc := range []struct {
		a   types.ChecksumAlgorithm
		typ types.ChecksumType
	}{
		{types.ChecksumAlgorithmSha256, types.ChecksumTypeFullObject},
		{types.ChecksumAlgorithmSha1, types.ChecksumTypeFullObject},
		{types.ChecksumAlgorithmCrc64nvme, types.ChecksumTypeComposite},
	} {
		_, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("refused"),
			ChecksumAlgorithm: tc.a, ChecksumType: tc.typ})
		if err == nil || httpStatus(err) != http.StatusBadRequest {
			t.Fatalf("CreateMultipartUpload %s %s: got %v, want a 400 error", tc.a, tc.typ, err)
		}
	}
	ups, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String("refused")})
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	if len(ups.Uploads) != 0 {
		t.Fatalf("refused CreateMultipartUpload left %d uploads", len(ups.Uploads))
	}
}
