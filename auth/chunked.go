package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"strconv"
	"strings"
)

// Limits of the aws-chunked decoder. Data is streamed, so the chunk size
// limit only rejects nonsense: aws-sdk-go-v2 sends a body of known length as
// one single chunk, and S3 accepts a single PUT of up to 5 GiB.
const (
	maxChunkHeader  = 4 << 10 // one chunk-size line, extensions included
	maxChunkSize    = 5 << 30
	maxTrailerLine  = 4 << 10
	maxTrailerBytes = 16 << 10
	chunkedBufSize  = 32 << 10
	minChunkedBuf   = 8 << 10
	// minChunkSize is S3's floor for every data chunk but the last one
	// (the zero-size final chunk and the last data chunk may be smaller).
	// Real clients send 64 KiB or more (aws-sdk-go-v2, minio-go).
	minChunkSize = 8 << 10

	chunkSigAlgorithm   = "AWS4-HMAC-SHA256-PAYLOAD"
	trailerSigAlgorithm = "AWS4-HMAC-SHA256-TRAILER"
	trailerSigName      = "x-amz-trailer-signature"
)

// chunkSigner holds what the chunk-signature chain needs; it never holds the
// secret itself, only the day's derived signing key.
type chunkSigner struct {
	key     []byte
	amzDate string
	scope   string
	seed    string // the verified seed (request) signature, hex
}

func (s *chunkSigner) chunkSignature(prev string, dataHash []byte) string {
	var buf [512]byte
	return s.sign(appendLines(buf[:0], chunkSigAlgorithm, s.amzDate, s.scope, prev, emptySHA256), dataHash)
}

func (s *chunkSigner) trailerSignature(prev string, trailerHash []byte) string {
	var buf [512]byte
	return s.sign(appendLines(buf[:0], trailerSigAlgorithm, s.amzDate, s.scope, prev), trailerHash)
}

// sign completes a string to sign with the hex of hash and signs it.
func (s *chunkSigner) sign(sts, hash []byte) string {
	mac := hmacSHA256(s.key, hex.AppendEncode(sts, hash))
	return hex.EncodeToString(mac[:])
}

type chunkedConfig struct {
	signer        *chunkSigner // nil: chunks are not signed
	declared      int64        // x-amz-decoded-content-length, -1 if unknown
	trailerMode   bool         // a trailer section may follow the last chunk
	signedTrailer bool         // the trailer carries x-amz-trailer-signature
	wantTrailers  []string     // announced in x-amz-trailer, lower-case
	wireLen       int64        // the encoded body's Content-Length; <= 0 if unknown
}

type trailerKV struct{ name, value string }

// chunkedReader decodes an aws-chunked body as it is read, verifying every
// chunk signature in chain and the trailer. It returns io.EOF only after the
// final chunk and the trailer have been verified; any failure is sticky.
type chunkedReader struct {
	cfg      chunkedConfig
	src      *bufio.Reader
	closer   io.Closer
	prevSig  string
	h        hash.Hash
	inChunk  bool
	final    bool   // the current chunk is the zero-size last one
	remain   int64  // data bytes left in the current chunk
	chunkSig string // signature the client sent for the current chunk
	decoded  int64
	lastData int64 // size of the previous data chunk, 0 before the first
	chunks   int   // data chunks begun so far
	err      error // sticky; io.EOF once fully verified
	trailers []trailerKV
}

func newChunkedReader(body io.ReadCloser, cfg chunkedConfig) *chunkedReader {
	c := &chunkedReader{
		cfg:    cfg,
		src:    bufio.NewReaderSize(body, chunkedBufferSize(cfg.wireLen)),
		closer: body,
	}
	if cfg.signer != nil {
		c.prevSig = cfg.signer.seed
		c.h = sha256.New()
	}
	return c
}

// chunkedBufferSize fits the read buffer to a small body. It never goes
// below minChunkedBuf, which exceeds every line limit, so a line too long
// fails the same way whatever the body's size.
func chunkedBufferSize(wireLen int64) int {
	if wireLen > 0 && wireLen < chunkedBufSize {
		return max(int(wireLen), minChunkedBuf)
	}
	return chunkedBufSize
}

// malformedChunk answers framing that does not parse (a size that is not
// hex, a missing CRLF or chunk signature, data longer or shorter than its
// chunk's size, a line too long): S3 reads any of it as a body that ended
// unexpectedly, whatever the fault.
func malformedChunk() *Error { return incompleteBody() }

// errChunkTooSmall is InvalidChunkSizeError naming, as S3 does, the chunk
// (1-based) that was smaller than minChunkSize without being the last one,
// and its size.
func errChunkTooSmall(chunk int, size int64) *Error {
	e := newErr(CodeInvalidChunkSizeError, "Only the last chunk is allowed to have a size less than 8192 bytes")
	e.Details = []Detail{{"Chunk", strconv.Itoa(chunk)}, {"BadChunkSize", strconv.FormatInt(size, 10)}}
	return e
}

func incompleteBody() *Error {
	return newErr(CodeIncompleteBody, "The request body terminated unexpectedly")
}

// Read implements io.Reader over the decoded content.
func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if !c.inChunk {
		if err := c.nextChunk(); err != nil {
			c.err = err
			return 0, err
		}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > c.remain {
		p = p[:c.remain]
	}
	n, err := c.src.Read(p)
	if n > 0 {
		if c.h != nil {
			c.h.Write(p[:n])
		}
		c.remain -= int64(n)
		c.decoded += int64(n)
	}
	if c.remain == 0 {
		if ferr := c.finishChunk(); ferr != nil {
			// The chunk's bytes are withheld: they are not authenticated.
			c.err = ferr
			return 0, ferr
		}
		return n, nil
	}
	if err != nil {
		c.err = bodyReadError(err)
		return 0, c.err
	}
	return n, nil
}

// Close closes the underlying body.
func (c *chunkedReader) Close() error { return c.closer.Close() }

// Trailer returns the trailing checksum (algorithm upper-case, e.g. "CRC32",
// and its base64 value) once the body has been read to io.EOF.
func (c *chunkedReader) Trailer() (alg, value string, err error) {
	if c.err != io.EOF { //nolint:errorlint // io.EOF is stored unwrapped as the done state
		if c.err != nil {
			return "", "", c.err
		}
		return "", "", errors.New("auth: trailer read before the body reached EOF")
	}
	for _, t := range c.trailers {
		if a, ok := strings.CutPrefix(t.name, "x-amz-checksum-"); ok {
			return strings.ToUpper(a), t.value, nil
		}
	}
	return "", "", nil
}

// readLine reads one line up to max bytes, '\n' included.
func (c *chunkedReader) readLine(max int) ([]byte, error) {
	line, err := c.src.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(line) > max {
		return nil, malformedChunk() // line too long
	}
	return line, err
}

// nextChunk reads and parses a chunk header; on the final (zero) chunk it
// reads and verifies the trailer and returns io.EOF.
func (c *chunkedReader) nextChunk() error {
	line, err := c.readLine(maxChunkHeader)
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) {
			return ae
		}
		return bodyReadError(err)
	}
	if !bytes.HasSuffix(line, []byte("\r\n")) {
		return malformedChunk() // chunk header must end with CRLF
	}
	line = line[:len(line)-2]
	sizePart, ext, _ := bytes.Cut(line, []byte(";"))
	size, ok := parseChunkSize(sizePart)
	if !ok {
		return malformedChunk() // invalid chunk size
	}
	if c.cfg.declared >= 0 && size > c.cfg.declared-c.decoded {
		return newErr(CodeInvalidRequest, "The decoded body is longer than x-amz-decoded-content-length")
	}
	if size > 0 {
		// Another data chunk follows the previous one, so that one was not
		// the last: it must have been at least minChunkSize.
		if c.lastData > 0 && c.lastData < minChunkSize {
			return errChunkTooSmall(c.chunks, c.lastData)
		}
		c.lastData = size
		c.chunks++
	}
	if c.cfg.signer != nil {
		sig, ok := chunkSignatureExt(ext)
		if !ok {
			return malformedChunk() // missing or invalid chunk-signature
		}
		c.chunkSig = sig
		c.h.Reset()
	}
	c.remain = size
	c.inChunk = true
	c.final = size == 0
	if size > 0 {
		return nil
	}
	if err := c.finishChunk(); err != nil {
		return err
	}
	if err := c.readTrailer(); err != nil {
		return err
	}
	if c.cfg.declared >= 0 && c.decoded != c.cfg.declared {
		return incompleteBody()
	}
	return io.EOF
}

// finishChunk consumes the CRLF after chunk data and verifies the chunk
// signature. The final chunk has no CRLF of its own: the trailer section
// (possibly just an empty line) follows.
func (c *chunkedReader) finishChunk() error {
	c.inChunk = false
	if c.remain != 0 {
		return incompleteBody()
	}
	if !c.final {
		var crlf [2]byte
		if _, err := io.ReadFull(c.src, crlf[:]); err != nil {
			return bodyReadError(err)
		}
		if crlf != [2]byte{'\r', '\n'} {
			return malformedChunk() // chunk data must end with CRLF
		}
	}
	if c.cfg.signer != nil {
		want := c.cfg.signer.chunkSignature(c.prevSig, c.h.Sum(nil))
		if !sigEqual(want, c.chunkSig) {
			return errSignature()
		}
		c.prevSig = want
	}
	return nil
}

// parseChunkSize parses 1 to 16 hex digits (no sign, no spaces).
func parseChunkSize(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		var d byte
		switch {
		case '0' <= ch && ch <= '9':
			d = ch - '0'
		case 'a' <= ch && ch <= 'f':
			d = ch - 'a' + 10
		case 'A' <= ch && ch <= 'F':
			d = ch - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | uint64(d)
		if n > maxChunkSize {
			return 0, false
		}
	}
	return int64(n), true
}

// chunkSignatureExt finds chunk-signature=<64 hex> among chunk extensions.
func chunkSignatureExt(ext []byte) (string, bool) {
	for len(ext) > 0 {
		var e []byte
		e, ext, _ = bytes.Cut(ext, []byte(";"))
		k, v, ok := bytes.Cut(e, []byte("="))
		if ok && string(bytes.TrimSpace(k)) == "chunk-signature" {
			sig := string(bytes.TrimSpace(v))
			return sig, isHexSig(sig)
		}
	}
	return "", false
}

// readTrailer reads what follows the final chunk up to the end of the body:
// blank lines and, in trailer mode, "name:value" lines (CRLF or LF; minio-go
// ends a trailer value with LF and aws-sdk-go-v2 with CRLF). It checks the
// names against x-amz-trailer and verifies x-amz-trailer-signature.
func (c *chunkedReader) readTrailer() error {
	var sig string
	haveSig := false
	total := 0
	for {
		line, err := c.readLine(maxTrailerLine)
		if err != nil && !errors.Is(err, io.EOF) {
			if ae := (*Error)(nil); errors.As(err, &ae) {
				return newErr(CodeMalformedTrailerError, "The request contained trailing data that was not well-formed.")
			}
			return bodyReadError(err)
		}
		total += len(line)
		if total > maxTrailerBytes {
			return newErr(CodeMalformedTrailerError, "The trailer section is too large.")
		}
		text := strings.TrimRight(string(line), "\r\n")
		if strings.TrimSpace(text) != "" {
			name, value, ok := strings.Cut(text, ":")
			name = strings.ToLower(strings.TrimSpace(name))
			value = strings.TrimSpace(value)
			switch {
			case !ok || name == "":
				return newErr(CodeMalformedTrailerError, "The request contained trailing data that was not well-formed.")
			case name == trailerSigName:
				if haveSig {
					return newErr(CodeMalformedTrailerError, "x-amz-trailer-signature is repeated.")
				}
				sig, haveSig = value, true
			default:
				if !c.cfg.trailerMode || !containsFold(c.cfg.wantTrailers, name) {
					return newErr(CodeMalformedTrailerError, "The request contained trailing data that was not announced in x-amz-trailer.")
				}
				for _, t := range c.trailers {
					if t.name == name {
						return newErr(CodeMalformedTrailerError, "A trailer is repeated.")
					}
				}
				c.trailers = append(c.trailers, trailerKV{name: name, value: value})
			}
		}
		if err != nil { // io.EOF: the body ends here
			break
		}
	}
	if len(c.trailers) != len(c.cfg.wantTrailers) {
		return newErr(CodeMalformedTrailerError, "A trailer announced in x-amz-trailer is missing.")
	}
	if !c.cfg.signedTrailer || c.cfg.signer == nil {
		return nil
	}
	if !haveSig || !isHexSig(sig) {
		return newErr(CodeMalformedTrailerError, "The trailer signature is missing or malformed.")
	}
	// The signed form of the trailer is "name:value\n" per trailer, in order.
	th := sha256.New()
	for _, t := range c.trailers {
		th.Write([]byte(t.name + ":" + t.value + "\n"))
	}
	want := c.cfg.signer.trailerSignature(c.prevSig, th.Sum(nil))
	if !sigEqual(want, sig) {
		return errSignature()
	}
	c.prevSig = want
	return nil
}
