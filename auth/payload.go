package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// checkPayloadMode validates an x-amz-content-sha256 value before the
// signature is computed over it.
func checkPayloadMode(p string) *Error {
	switch p {
	case unsignedPayload, streamingSigned, streamingSignedTrailer, streamingUnsignedTrailer:
		return nil
	}
	if strings.HasPrefix(p, "STREAMING-") {
		return newErr(CodeInvalidArgument, "Unsupported x-amz-content-sha256 streaming mode")
	}
	if isHexSig(p) { // 64 hex digits, as hex.DecodeString in payloadResult takes them
		return nil
	}
	return newErr(CodeInvalidArgument, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.")
}

// announcedTrailers parses x-amz-trailer (comma-separated, possibly repeated).
// S3 takes a single trailer and only an x-amz-checksum-* one: another name is
// "not supported" and a second checksum is refused, both before the body is
// read, so that no trailer is ever announced and then ignored.
func announcedTrailers(r *http.Request) ([]string, *Error) {
	var names []string
	for _, v := range r.Header.Values("X-Amz-Trailer") {
		for _, n := range strings.Split(v, ",") {
			n = strings.ToLower(strings.TrimSpace(n))
			switch {
			case n == "":
				continue
			case !strings.HasPrefix(n, checksumTrailerPrefix):
				return nil, newErr(CodeInvalidRequest, "The value specified in the x-amz-trailer header is not supported")
			case len(names) > 0:
				return nil, errSingleChecksum()
			case len(n) > 64:
				return nil, newErr(CodeInvalidArgument, "invalid x-amz-trailer header")
			}
			names = append(names, n)
		}
	}
	return names, nil
}

const checksumTrailerPrefix = "x-amz-checksum-"

// errSingleChecksum is S3's answer to a request that names more than one
// checksum value, in headers, in x-amz-trailer or in both.
func errSingleChecksum() *Error {
	return newErr(CodeInvalidRequest, "Expecting a single x-amz-checksum- header")
}

// hasChecksumValueHeader reports an x-amz-checksum-<algorithm> header (a
// checksum value, not x-amz-checksum-type, -mode or -algorithm).
func hasChecksumValueHeader(h http.Header) bool {
	for k := range h {
		lk := strings.ToLower(k)
		if a, ok := strings.CutPrefix(lk, checksumTrailerPrefix); ok && a != "type" && a != "mode" && a != "algorithm" {
			return true
		}
	}
	return false
}

// hasAWSChunked reports the aws-chunked token in a Content-Encoding value.
func hasAWSChunked(contentEncoding string) bool {
	for _, tok := range strings.Split(contentEncoding, ",") {
		if strings.EqualFold(strings.TrimSpace(tok), "aws-chunked") {
			return true
		}
	}
	return false
}

// payloadResult wraps the body according to the (already signed) payload
// mode. signer carries the seed signature for chunk-signed modes.
func payloadResult(r *http.Request, accessKey, payload string, signer *chunkSigner) (*Result, error) {
	body := bodyOf(r)
	trailers, aerr := announcedTrailers(r)
	if aerr != nil {
		return nil, aerr
	}
	res := &Result{AccessKey: accessKey, Body: body, DecodedLength: r.ContentLength}
	switch payload {
	case streamingSigned, streamingSignedTrailer, streamingUnsignedTrailer:
		// S3 requires the decoded length of every streaming upload and
		// answers a missing or unreadable one as a missing length.
		declared, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
		if err != nil || declared < 0 {
			return nil, errMissingLength()
		}
		if payload == streamingSigned && len(trailers) > 0 {
			return nil, newErr(CodeInvalidRequest, "x-amz-trailer requires a STREAMING-*-TRAILER payload")
		}
		if len(trailers) > 0 && hasChecksumValueHeader(r.Header) {
			return nil, errSingleChecksum()
		}
		cfg := chunkedConfig{
			declared:      declared,
			trailerMode:   payload != streamingSigned,
			signedTrailer: payload == streamingSignedTrailer,
			wantTrailers:  trailers,
			wireLen:       r.ContentLength,
		}
		if payload != streamingUnsignedTrailer {
			cfg.signer = signer
		}
		cr := newChunkedReader(body, cfg)
		res.Body = cr
		res.DecodedLength = declared
		if len(trailers) > 0 {
			res.Trailer = cr.Trailer
		}
		return res, nil
	}
	if len(trailers) > 0 {
		return nil, newErr(CodeInvalidRequest, "x-amz-trailer requires a STREAMING-*-TRAILER payload")
	}
	if payload == unsignedPayload {
		// The framing would otherwise be stored as the object's bytes.
		if hasAWSChunked(r.Header.Get("Content-Encoding")) {
			return nil, newErr(CodeInvalidArgument, "aws-chunked encoding is not supported when x-amz-content-sha256 UNSIGNED-PAYLOAD is supplied")
		}
		return res, nil
	}
	sr := &sha256Reader{src: body, h: sha256.New()}
	if n, err := hex.Decode(sr.want[:], []byte(payload)); err != nil || len(payload) != 2*n { // checkPayloadMode ran first; keep the guard anyway
		return nil, newErr(CodeInvalidArgument, "invalid x-amz-content-sha256")
	}
	res.Body = sr
	return res, nil
}

// sha256Reader passes the body through and, at its end, compares its SHA-256
// with the signed value: a mismatch replaces io.EOF.
type sha256Reader struct {
	src  io.ReadCloser
	h    hash.Hash // nil once TakeSignedSHA256 took the check over
	want [sha256.Size]byte
	read bool  // a Read happened: the check can no longer be handed over
	err  error // sticky
}

// TakeSignedSHA256 hands the check of a signed payload hash over to the
// caller, for a consumer that computes the body's SHA-256 anyway (the object
// put path): if body is a Result's Body for x-amz-content-sha256: <hex> and
// nothing was read from it yet, it stops hashing and returns the signed
// value, which the caller must then compare with the SHA-256 of everything it
// read, at EOF, before it uses the body. Otherwise (unsigned, chunk-signed,
// already read) it returns nil and the body keeps checking itself.
func TakeSignedSHA256(body io.Reader) *[sha256.Size]byte {
	s, ok := body.(*sha256Reader)
	if !ok || s.read || s.h == nil {
		return nil
	}
	s.h = nil
	want := s.want
	return &want
}

func (s *sha256Reader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	s.read = true
	n, err := s.src.Read(p)
	if s.h != nil {
		s.h.Write(p[:n])
	}
	if err == nil {
		return n, nil
	}
	if !errors.Is(err, io.EOF) {
		s.err = bodyReadError(err)
		return n, s.err
	}
	if s.h == nil {
		s.err = io.EOF
		return n, io.EOF
	}
	var sum [sha256.Size]byte
	if got := s.h.Sum(sum[:0]); !hashEqual(got, s.want[:]) {
		// The tail of the body is withheld: nothing after a mismatch is usable.
		s.err = errSHA256Mismatch(s.want[:], got)
		return 0, s.err
	}
	s.err = io.EOF
	return n, io.EOF
}

func (s *sha256Reader) Close() error { return s.src.Close() }

func hashEqual(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	var d byte
	for i := range a {
		d |= a[i] ^ b[i]
	}
	return d == 0
}

// bodyReadError maps a transport failure while reading the body: a body cut
// short is IncompleteBody, anything else keeps its cause.
func bodyReadError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return newErr(CodeIncompleteBody, "You did not provide the number of bytes specified by the Content-Length HTTP header.")
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return fmt.Errorf("auth: reading request body: %w", err)
}
