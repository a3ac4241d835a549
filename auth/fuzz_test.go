package auth

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzChunkedDecoder feeds arbitrary bytes to the aws-chunked decoder in its
// unsigned-trailer and signed modes: it must never panic, never produce more
// bytes than it was given, and end with io.EOF or an *Error.
func FuzzChunkedDecoder(f *testing.F) {
	for _, s := range []string{
		"5\r\nhello\r\n0\r\n\r\n",
		"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n",
		"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\n\r\n\r\n",
		"0;chunk-signature=" + strings.Repeat("a", 64) + "\r\n\r\n",
		"3;chunk-signature=" + strings.Repeat("0", 64) + "\r\nabc\r\n0;chunk-signature=" + strings.Repeat("1", 64) +
			"\r\nx-amz-checksum-crc32:AAAAAA==\r\nx-amz-trailer-signature:" + strings.Repeat("2", 64) + "\r\n\r\n",
		"ffffffff\r\n",
		"",
	} {
		f.Add([]byte(s), false, int64(-1))
		f.Add([]byte(s), true, int64(5))
	}
	signer := &chunkSigner{key: []byte("key"), amzDate: "20260102T030405Z",
		scope: "20260102/us-east-1/s3/aws4_request", seed: strings.Repeat("0", 64)}
	f.Fuzz(func(t *testing.T, in []byte, signed bool, declared int64) {
		cfg := chunkedConfig{declared: declared, trailerMode: true, wantTrailers: []string{"x-amz-checksum-crc32"}}
		if declared < -1 {
			cfg.declared = -1
		}
		if signed {
			cfg.signer, cfg.signedTrailer = signer, true
		}
		cr := newChunkedReader(io.NopCloser(strings.NewReader(string(in))), cfg)
		out, err := io.ReadAll(cr)
		if len(out) > len(in) {
			t.Fatalf("decoded %d bytes from %d", len(out), len(in))
		}
		var ae *Error
		if err != nil && !errors.As(err, &ae) {
			t.Fatalf("error is not an *Error: %v", err)
		}
		if err == nil {
			if _, _, terr := cr.Trailer(); terr != nil {
				t.Fatalf("Trailer after EOF: %v", terr)
			}
		}
	})
}

// FuzzParseV4Header checks the Authorization header parser never panics and
// only ever accepts headers with all three well-formed components.
func FuzzParseV4Header(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKID/20260102/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("ab", 32))
	f.Add("AWS4-HMAC-SHA256 Credential=AKID/20260102/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=" + strings.Repeat("0", 64))
	f.Add("AWS4-HMAC-SHA256 Credential=,,,=")
	f.Add("AWS4-HMAC-SHA256")
	f.Fuzz(func(t *testing.T, s string) {
		h, aerr := parseV4Header(s)
		if aerr != nil {
			if h != nil || aerr.Code != CodeAuthorizationHeaderMalformed {
				t.Fatalf("bad failure: %v %v", h, aerr)
			}
			return
		}
		if h.cred.accessKey == "" || len(h.signedHeaders) == 0 || !isHexSig(h.signature) {
			t.Fatalf("accepted incomplete header %q: %+v", s, h)
		}
	})
}
