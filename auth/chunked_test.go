package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"
)

// sha256Hasher adapts crypto/sha256 to the md5simd.Hasher that minio's signer wants.
type sha256Hasher struct{ hash.Hash }

func (sha256Hasher) Close() {}

func testData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func crc32B64(b []byte) string {
	var s [4]byte
	c := crc32.ChecksumIEEE(b)
	s[0], s[1], s[2], s[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	return base64.StdEncoding.EncodeToString(s[:])
}

type streamMode int

const (
	modeSigned streamMode = iota
	modeSignedTrailer
	modeUnsignedTrailer
)

func (m streamMode) String() string {
	return [...]string{"signed", "signed-trailer", "unsigned-trailer"}[m]
}

// streamingRequest builds an aws-chunked PUT with minio-go's signer (the
// oracle) and returns it with its encoded body already materialized, so
// tests can tamper with the bytes on the wire.
func streamingRequest(t testing.TB, mode streamMode, data []byte, when time.Time) (*http.Request, []byte) {
	t.Helper()
	req, err := http.NewRequest("PUT", "http://"+testHost+"/bucket/"+uriEncode("dir/obj ü+=.bin", false), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	trailer := http.Header{"x-amz-checksum-crc32": []string{crc32B64(data)}}
	var signed *http.Request
	switch mode {
	case modeSigned:
		signed = signer.StreamingSignV4(req, testAK, testSK, "", testRegion, int64(len(data)), when, sha256Hasher{sha256.New()})
	case modeSignedTrailer:
		req.Trailer = trailer
		signed = signer.StreamingSignV4(req, testAK, testSK, "", testRegion, int64(len(data)), when, sha256Hasher{sha256.New()})
	case modeUnsignedTrailer:
		req.Header.Set("X-Amz-Content-Sha256", streamingUnsignedTrailer)
		signed = signer.SignV4Trailer(*req, testAK, testSK, "", testRegion, trailer)
	}
	enc, err := io.ReadAll(signed.Body)
	if err != nil {
		t.Fatal(err)
	}
	signed.Body = io.NopCloser(bytes.NewReader(enc))
	signed.ContentLength = int64(len(enc))
	return signed, enc
}

// withBody returns r (a client request) carrying enc as its encoded body.
func withBody(r *http.Request, enc []byte, chunkedTE bool) *http.Request {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(enc))
	r2.ContentLength = int64(len(enc))
	if chunkedTE {
		r2.ContentLength = -1 // HTTP Transfer-Encoding: chunked on top of aws-chunked
	}
	return r2
}

func dateOf(t testing.TB, r *http.Request) time.Time {
	t.Helper()
	d, err := time.Parse(iso8601Format, r.Header.Get("X-Amz-Date"))
	if err != nil {
		t.Fatalf("X-Amz-Date: %v", err)
	}
	return d
}

func TestStreamingMinioOracle(t *testing.T) {
	for _, mode := range []streamMode{modeSigned, modeSignedTrailer, modeUnsignedTrailer} {
		for _, size := range []int{0, 1, 65535, 65536, 65537, 200_000} {
			for _, te := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%d/te=%v", mode, size, te), func(t *testing.T) {
					data := testData(size)
					req, enc := streamingRequest(t, mode, data, t0)
					sreq := overTheWire(t, withBody(req, enc, te))
					if te && len(sreq.TransferEncoding) == 0 {
						t.Fatal("test setup: expected Transfer-Encoding: chunked")
					}
					res, err := newVerifier(dateOf(t, req)).Verify(sreq)
					if err != nil {
						t.Fatalf("Verify: %v", err)
					}
					if res.DecodedLength != int64(size) {
						t.Fatalf("DecodedLength = %d, want %d", res.DecodedLength, size)
					}
					if mode != modeSigned && res.Trailer != nil {
						if _, _, err := res.Trailer(); err == nil {
							t.Fatal("Trailer before EOF must fail")
						}
					}
					got, code := readBody(t, res)
					if code != "" {
						t.Fatalf("read: %s", code)
					}
					if !bytes.Equal(got, data) {
						t.Fatalf("decoded body differs: %d bytes vs %d", len(got), len(data))
					}
					if mode == modeSigned {
						if res.Trailer != nil {
							t.Fatal("Trailer set without x-amz-trailer")
						}
						return
					}
					alg, val, err := res.Trailer()
					if err != nil || alg != "CRC32" || val != crc32B64(data) {
						t.Fatalf("Trailer = %q %q %v", alg, val, err)
					}
				})
			}
		}
	}
}

// tamper helpers operate on the encoded body.
func flipByteAfter(enc []byte, marker string, skip int) []byte {
	out := bytes.Clone(enc)
	i := bytes.Index(out, []byte(marker))
	if i < 0 {
		panic("marker not found: " + marker)
	}
	out[i+len(marker)+skip] ^= 0x01
	return out
}

func TestStreamingTampering(t *testing.T) {
	data := testData(100_000) // two data chunks with minio's 64 KiB chunks
	tests := []struct {
		name   string
		mode   streamMode
		tamper func(enc []byte) []byte
		want   string // code from Read
	}{
		{name: "chunk data", mode: modeSigned, tamper: func(e []byte) []byte { return flipByteAfter(e, "\r\n", 10) }, want: CodeSignatureDoesNotMatch},
		{name: "second chunk data", mode: modeSigned, tamper: func(e []byte) []byte { return flipByteAfter(e, "\r\n", 65536+100+90) }, want: CodeSignatureDoesNotMatch},
		{name: "chunk signature", mode: modeSigned, tamper: func(e []byte) []byte {
			out := bytes.Clone(e)
			i := bytes.Index(out, []byte("chunk-signature=")) + len("chunk-signature=")
			if out[i] == 'a' {
				out[i] = 'b'
			} else {
				out[i] = 'a'
			}
			return out
		}, want: CodeSignatureDoesNotMatch},
		{name: "final chunk signature", mode: modeSigned, tamper: func(e []byte) []byte {
			out := bytes.Clone(e)
			i := bytes.LastIndex(out, []byte("chunk-signature=")) + len("chunk-signature=")
			out[i] = "01"[out[i]&1]
			if bytes.Equal(out, e) {
				out[i] = '2'
			}
			return out
		}, want: CodeSignatureDoesNotMatch},
		{name: "chunks swapped out of chain", mode: modeSigned, tamper: func(e []byte) []byte {
			// Drop the first chunk entirely: the second's signature is chained
			// to the first, so it must fail.
			first := bytes.Index(e, []byte("\r\n")) + 2 + 65536 + 2
			return append([]byte(nil), e[first:]...)
		}, want: CodeSignatureDoesNotMatch},
		{name: "truncated mid chunk", mode: modeSigned, tamper: func(e []byte) []byte { return e[:len(e)/2] }, want: CodeIncompleteBody},
		{name: "missing final chunk", mode: modeSigned, tamper: func(e []byte) []byte {
			return e[:bytes.LastIndex(e, []byte("0;chunk-signature="))]
		}, want: CodeIncompleteBody},
		{name: "wrong trailer signature", mode: modeSignedTrailer, tamper: func(e []byte) []byte {
			return flipByteAfter(e, "x-amz-trailer-signature:", 3)
		}, want: CodeSignatureDoesNotMatch},
		{name: "wrong trailer value", mode: modeSignedTrailer, tamper: func(e []byte) []byte {
			return bytes.Replace(e, []byte("x-amz-checksum-crc32:"+crc32B64(data)), []byte("x-amz-checksum-crc32:AAAAAA=="), 1)
		}, want: CodeSignatureDoesNotMatch},
		{name: "missing trailer signature", mode: modeSignedTrailer, tamper: func(e []byte) []byte {
			i := bytes.Index(e, []byte("x-amz-trailer-signature:"))
			return append(bytes.Clone(e[:i]), "\r\n"...)
		}, want: CodeMalformedTrailerError},
		{name: "unannounced trailer", mode: modeUnsignedTrailer, tamper: func(e []byte) []byte {
			return bytes.Replace(e, []byte("x-amz-checksum-crc32:"), []byte("x-amz-checksum-crc64nvme:"), 1)
		}, want: CodeMalformedTrailerError},
		{name: "unsigned trailer missing", mode: modeUnsignedTrailer, tamper: func(e []byte) []byte {
			return append(bytes.Clone(e[:bytes.LastIndex(e, []byte("0\r\n"))+3]), "\r\n"...)
		}, want: CodeMalformedTrailerError},
		{name: "unsigned truncated", mode: modeUnsignedTrailer, tamper: func(e []byte) []byte { return e[:1000] }, want: CodeIncompleteBody},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, enc := streamingRequest(t, tc.mode, data, t0)
			sreq := overTheWire(t, withBody(req, tc.tamper(enc), false))
			res, err := newVerifier(dateOf(t, req)).Verify(sreq)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			got, code := readBody(t, res)
			if code != tc.want {
				t.Fatalf("code = %q, want %q (read %d bytes)", code, tc.want, len(got))
			}
			// Sticky: the failure never turns into io.EOF on a later Read.
			if _, err := res.Body.Read(make([]byte, 8)); errCode(err) != tc.want {
				t.Fatalf("second read: %v", err)
			}
			if res.Trailer != nil {
				if _, _, err := res.Trailer(); err == nil {
					t.Fatal("Trailer must fail after a failed body")
				}
			}
		})
	}
}

func TestStreamingSeedSignatureWrong(t *testing.T) {
	req, enc := streamingRequest(t, modeSigned, testData(10), t0)
	sreq := overTheWire(t, withBody(req, enc, false))
	sreq.Header.Set("X-Amz-Decoded-Content-Length", "11") // signed header
	if _, err := newVerifier(t0).Verify(sreq); errCode(err) != CodeSignatureDoesNotMatch {
		t.Fatalf("err = %v", err)
	}
}

// decode runs the decoder directly on hand-written aws-chunked input.
func decode(body string, cfg chunkedConfig) ([]byte, string, *chunkedReader) {
	cr := newChunkedReader(io.NopCloser(strings.NewReader(body)), cfg)
	b, err := io.ReadAll(cr)
	return b, errCode(err), cr
}

func TestChunkedDecoderUnsigned(t *testing.T) {
	crc := "x-amz-checksum-crc32"
	tests := []struct {
		name     string
		body     string
		declared int64
		trailers []string
		wantData string
		wantCode string
		wantAlg  string
		wantVal  string
	}{
		{name: "aws-sdk-go-v2 format", body: "5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n",
			declared: 5, trailers: []string{crc}, wantData: "hello", wantAlg: "CRC32", wantVal: "NhCmhg=="},
		// S3's chunk-size rule: every data chunk but the last is >= 8 KiB.
		{name: "8 KiB then small last chunk", body: "2000\r\n" + strings.Repeat("a", 8192) + "\r\n5\r\nhello\r\n0\r\n\r\n",
			declared: 8197, wantData: strings.Repeat("a", 8192) + "hello"},
		{name: "small non-final chunk", body: "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", declared: 11, wantCode: CodeInvalidChunkSizeError},
		{name: "8191-byte non-final chunk", body: "1fff\r\n" + strings.Repeat("a", 8191) + "\r\n1\r\nb\r\n0\r\n\r\n", declared: 8192, wantCode: CodeInvalidChunkSizeError},
		{name: "minio-go format", body: "5\r\nhello\r\n0\r\nx-amz-checksum-crc32c:abc=\n\r\n\r\n",
			declared: 5, trailers: []string{"x-amz-checksum-crc32c"}, wantData: "hello", wantAlg: "CRC32C", wantVal: "abc="},
		{name: "unknown length", body: "3\r\nabc\r\n0\r\n\r\n", declared: -1, wantData: "abc"},
		{name: "upper-case hex size", body: "A\r\n0123456789\r\n0\r\n\r\n", declared: 10, wantData: "0123456789"},
		{name: "longer than declared", body: "5\r\nhello\r\n0\r\n\r\n", declared: 4, wantCode: CodeInvalidRequest},
		{name: "shorter than declared", body: "5\r\nhello\r\n0\r\n\r\n", declared: 6, wantCode: CodeIncompleteBody},
		{name: "no final chunk", body: "5\r\nhello\r\n", declared: -1, wantCode: CodeIncompleteBody},
		{name: "empty body", body: "", declared: -1, wantCode: CodeIncompleteBody},
		{name: "data without CRLF", body: "5\r\nhelloXX0\r\n\r\n", declared: -1, wantCode: CodeIncompleteBody},
		{name: "header without CR", body: "5\nhello\r\n0\r\n\r\n", declared: -1, wantCode: CodeIncompleteBody},
		{name: "negative size", body: "-5\r\nhello\r\n0\r\n\r\n", declared: -1, wantCode: CodeIncompleteBody},
		{name: "size with sign", body: "+5\r\nhello\r\n0\r\n\r\n", declared: -1, wantCode: CodeIncompleteBody},
		{name: "huge size", body: "ffffffffffffffff\r\nhello", declared: -1, wantCode: CodeIncompleteBody},
		{name: "header too long", body: "5;" + strings.Repeat("x", 5000) + "\r\nhello\r\n0\r\n\r\n", declared: -1, wantCode: CodeIncompleteBody},
		{name: "trailer not announced", body: "0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", declared: 0, wantCode: CodeMalformedTrailerError},
		{name: "trailer announced missing", body: "0\r\n\r\n", declared: 0, trailers: []string{crc}, wantCode: CodeMalformedTrailerError},
		{name: "trailer repeated", body: "0\r\nx-amz-checksum-crc32:A\r\nx-amz-checksum-crc32:B\r\n\r\n", declared: 0, trailers: []string{crc}, wantCode: CodeMalformedTrailerError},
		{name: "trailer without colon", body: "0\r\nx-amz-checksum-crc32\r\n\r\n", declared: 0, trailers: []string{crc}, wantCode: CodeMalformedTrailerError},
		{name: "trailer too large", body: "0\r\n" + strings.Repeat("x-amz-checksum-crc32:"+strings.Repeat("A", 3000)+"\r\n", 8), declared: 0, trailers: []string{crc}, wantCode: CodeMalformedTrailerError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, code, cr := decode(tc.body, chunkedConfig{declared: tc.declared, trailerMode: true, wantTrailers: tc.trailers})
			if code != tc.wantCode {
				t.Fatalf("code = %q, want %q", code, tc.wantCode)
			}
			if tc.wantCode != "" {
				return
			}
			if string(got) != tc.wantData {
				t.Fatalf("data = %q, want %q", got, tc.wantData)
			}
			alg, val, err := cr.Trailer()
			if err != nil || alg != tc.wantAlg || val != tc.wantVal {
				t.Fatalf("Trailer = %q %q %v", alg, val, err)
			}
		})
	}
}

func TestChunkedDecoderSignedRequiresSignature(t *testing.T) {
	s := &chunkSigner{key: []byte("k"), amzDate: "20260102T030405Z", scope: "20260102/us-east-1/s3/aws4_request", seed: strings.Repeat("0", 64)}
	sig0 := s.chunkSignature(s.seed, sha256Sum(""))
	for _, tc := range []struct {
		name, body, want string
	}{
		{"no signature", "0\r\n\r\n", CodeIncompleteBody},
		{"short signature", "0;chunk-signature=abc\r\n\r\n", CodeIncompleteBody},
		{"valid empty body", "0;chunk-signature=" + sig0 + "\r\n\r\n", ""},
		{"valid with other extension", "0;foo=bar;chunk-signature=" + sig0 + "\r\n\r\n", ""},
		{"trailer in non-trailer mode", "0;chunk-signature=" + sig0 + "\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n", CodeMalformedTrailerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, _ := decode(tc.body, chunkedConfig{signer: s, declared: 0})
			if code != tc.want {
				t.Fatalf("code = %q, want %q", code, tc.want)
			}
		})
	}
}

func sha256Sum(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// TestChunkedDecoderBoundedReads reads a 3 MiB single-chunk body through a
// tiny buffer: the decoder must stream (it never needs the chunk whole).
func TestChunkedDecoderBoundedReads(t *testing.T) {
	const n = 3 << 20
	body := io.MultiReader(strings.NewReader(strconv.FormatInt(n, 16)+"\r\n"),
		bytes.NewReader(testData(n)), strings.NewReader("\r\n0\r\n\r\n"))
	cr := newChunkedReader(io.NopCloser(body), chunkedConfig{declared: n})
	buf := make([]byte, 7)
	var total int
	for {
		k, err := cr.Read(buf)
		total += k
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
	}
	if total != n {
		t.Fatalf("read %d bytes, want %d", total, n)
	}
}

// TestChunkTooSmallDetails: InvalidChunkSizeError names the offending chunk
// (1-based) and its size in <Chunk> and <BadChunkSize>, as S3 does.
func TestChunkTooSmallDetails(t *testing.T) {
	big := "2000\r\n" + strings.Repeat("a", 8192) + "\r\n"
	for _, tc := range []struct {
		name, body, chunk, size string
	}{
		{"first chunk small", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "1", "5"},
		{"second chunk small", big + "3\r\nabc\r\n" + big + "0\r\n\r\n", "2", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := newChunkedReader(io.NopCloser(strings.NewReader(tc.body)), chunkedConfig{declared: -1})
			_, err := io.ReadAll(cr)
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != CodeInvalidChunkSizeError {
				t.Fatalf("err = %v, want InvalidChunkSizeError", err)
			}
			want := []Detail{{"Chunk", tc.chunk}, {"BadChunkSize", tc.size}}
			if fmt.Sprint(ae.Details) != fmt.Sprint(want) {
				t.Fatalf("details = %v, want %v", ae.Details, want)
			}
		})
	}
}

// TestPayloadResultRefusals: what S3 refuses from the headers alone, before
// a byte of the body is read.
func TestPayloadResultRefusals(t *testing.T) {
	const (
		ut           = streamingUnsignedTrailer
		single       = "Expecting a single x-amz-checksum- header"
		notSupported = "The value specified in the x-amz-trailer header is not supported"
		chunkedMsg   = "aws-chunked encoding is not supported when x-amz-content-sha256 UNSIGNED-PAYLOAD is supplied"
		noLength     = "You must provide the Content-Length HTTP header."
	)
	for _, tc := range []struct {
		name     string
		payload  string
		header   map[string]string
		wantCode string
		wantMsg  string
	}{
		{name: "two checksum trailers", payload: ut, header: map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32,x-amz-checksum-sha256"},
			wantCode: CodeInvalidRequest, wantMsg: single},
		{name: "checksum trailers in two headers", payload: streamingSignedTrailer, header: map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32", "x-amz-trailer": "x-amz-checksum-crc32c"},
			wantCode: CodeInvalidRequest, wantMsg: single},
		{name: "same checksum twice", payload: ut, header: map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32, x-amz-checksum-crc32"},
			wantCode: CodeInvalidRequest, wantMsg: single},
		{name: "metadata trailer", payload: ut, header: map[string]string{"X-Amz-Trailer": "x-amz-meta-foo"},
			wantCode: CodeInvalidRequest, wantMsg: notSupported},
		{name: "content-md5 trailer", payload: ut, header: map[string]string{"X-Amz-Trailer": "content-md5"},
			wantCode: CodeInvalidRequest, wantMsg: notSupported},
		{name: "checksum then other trailer", payload: ut, header: map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32,x-amz-meta-foo"},
			wantCode: CodeInvalidRequest, wantMsg: notSupported},
		{name: "checksum header and trailer", payload: ut, header: map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32", "X-Amz-Checksum-Sha256": "x"},
			wantCode: CodeInvalidRequest, wantMsg: single},
		{name: "checksum type header and trailer", payload: ut, header: map[string]string{"X-Amz-Trailer": "x-amz-checksum-crc32", "X-Amz-Checksum-Type": "FULL_OBJECT"}},
		{name: "one checksum trailer", payload: ut, header: map[string]string{"X-Amz-Trailer": " X-Amz-Checksum-CRC32 "}},
		{name: "aws-chunked unsigned", payload: unsignedPayload, header: map[string]string{"Content-Encoding": "aws-chunked"},
			wantCode: CodeInvalidArgument, wantMsg: chunkedMsg},
		{name: "aws-chunked among codings, unsigned", payload: unsignedPayload, header: map[string]string{"Content-Encoding": "gzip, AWS-Chunked"},
			wantCode: CodeInvalidArgument, wantMsg: chunkedMsg},
		{name: "gzip unsigned", payload: unsignedPayload, header: map[string]string{"Content-Encoding": "gzip"}},
		{name: "aws-chunked signed hash", payload: emptySHA256, header: map[string]string{"Content-Encoding": "aws-chunked"}},
		{name: "streaming without decoded length", payload: streamingSigned, header: map[string]string{"X-Amz-Decoded-Content-Length": ""},
			wantCode: CodeMissingContentLength, wantMsg: noLength},
		{name: "unsigned trailer without decoded length", payload: ut, header: map[string]string{"X-Amz-Decoded-Content-Length": ""},
			wantCode: CodeMissingContentLength, wantMsg: noLength},
		{name: "decoded length not a number", payload: ut, header: map[string]string{"X-Amz-Decoded-Content-Length": "abc"},
			wantCode: CodeMissingContentLength, wantMsg: noLength},
		{name: "decoded length negative", payload: streamingSignedTrailer, header: map[string]string{"X-Amz-Decoded-Content-Length": "-1"},
			wantCode: CodeMissingContentLength, wantMsg: noLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPut, "http://x/b/k", strings.NewReader("0\r\n\r\n"))
			if strings.HasPrefix(tc.payload, "STREAMING-") {
				r.Header.Set("X-Amz-Decoded-Content-Length", "0")
			}
			for k, v := range tc.header {
				if http.CanonicalHeaderKey(k) != "X-Amz-Trailer" {
					r.Header.Del(k)
				}
				if v != "" {
					r.Header[k] = append(r.Header[k], v) // two spellings of x-amz-trailer: two values
				}
			}
			r.Header = canonical(r.Header)
			_, err := payloadResult(r, "ak", tc.payload, nil)
			if tc.wantCode == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != tc.wantCode || ae.Message != tc.wantMsg {
				t.Fatalf("err = %v, want %s %q", err, tc.wantCode, tc.wantMsg)
			}
			if ae.HTTPStatus() != map[bool]int{true: http.StatusLengthRequired, false: http.StatusBadRequest}[tc.wantCode == CodeMissingContentLength] {
				t.Fatalf("status %d", ae.HTTPStatus())
			}
		})
	}
}

// canonical merges header keys that differ only in case, in order.
func canonical(h http.Header) http.Header {
	out := http.Header{}
	for k, vs := range h {
		for _, v := range vs {
			out.Add(k, v)
		}
	}
	return out
}
