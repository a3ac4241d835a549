package auth

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// BenchmarkVerify measures the verification of one signed request (no body
// read): a header-signed PUT of a 4 KiB payload hash, a presigned GET, and
// the seed plus one chunk signature of a signed aws-chunked PUT.
func BenchmarkVerify(b *testing.B) {
	body := testData(4 << 10)
	b.Run("header", func(b *testing.B) {
		req := overTheWire(b, signHeader(b, headerCase{method: "PUT", key: "dir/obj.bin", body: body,
			headers: map[string]string{"Content-Type": "application/octet-stream"}}, testSK, t0))
		benchVerify(b, newVerifier(t0), req)
	})
	b.Run("presigned", func(b *testing.B) {
		req, at := presignedBenchRequest(b)
		benchVerify(b, newVerifier(at), req)
	})
	b.Run("chunked", func(b *testing.B) {
		signed, enc := streamingRequest(b, modeSigned, body, t0)
		req := overTheWire(b, withBody(signed, enc, false))
		v := newVerifier(dateOf(b, req))
		b.ReportAllocs()
		for b.Loop() {
			req.Body = io.NopCloser(bytes.NewReader(enc))
			res, err := v.Verify(req)
			if err != nil {
				b.Fatal(err)
			}
			if n, err := io.Copy(io.Discard, res.Body); err != nil || n != int64(len(body)) {
				b.Fatalf("body: %d bytes, %v", n, err)
			}
		}
	})
}

// benchVerify verifies req over and over (its body is never read).
func benchVerify(b *testing.B, v *Verifier, req *http.Request) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(req); err != nil {
			b.Fatal(err)
		}
	}
}

// presignedBenchRequest is a presigned GET as an SDK makes it, with the
// time it was signed at.
func presignedBenchRequest(b *testing.B) (*http.Request, time.Time) {
	b.Helper()
	p, err := presignClient().PresignGetObject(context.Background(),
		&s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("dir/obj.bin")}, s3.WithPresignExpires(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	return presignedRequest(b, p, "")
}
