package store

import (
	"bytes"
	"crypto/md5"  //nolint:gosec // MD5 is the S3 ETag and Content-MD5, not a security function.
	"crypto/sha1" //nolint:gosec // SHA-1 is an S3 checksum algorithm.
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"runtime"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/minio/crc64nvme"
	"github.com/zeebo/xxh3"
)

// Body wraps the content of a PUT or UploadPart and hashes it as it is read:
// SHA-256 (the content address), MD5 (the ETag), CRC64NVME (the checksum S3
// stores when the client names none) and the x-amz-checksum algorithms the
// request needs, all in the same pass. Engines read it to EOF, then call
// Finish. A Body is used by one goroutine.
type Body struct {
	r    io.Reader
	opts PutOptions

	sha256 hash.Hash
	md5    hash.Hash
	sha1   hash.Hash      // nil unless SHA1 is needed
	sha512 hash.Hash      // nil unless SHA512 is needed
	xx64   *xxhash.Digest // nil unless XXHASH64 is needed
	xx3    *xxh3.Hasher   // nil unless XXHASH3 or XXHASH128 is needed (one state serves both)

	want    algSet
	crc32   uint32
	crc32c  uint32
	crc64   uint64
	n       int64
	eof     bool
	err     error // sticky: a setup error or a body longer than declared
	stored  string
	limit   int64 // most bytes accepted
	trailer bool
}

// NewBody wraps r. It never fails: a bad option (unknown algorithm, several
// declared checksums, a malformed checksum value) is reported by the first
// Read, before any content is consumed, as an error wrapping
// ErrInvalidRequest.
func NewBody(r io.Reader, opts PutOptions) *Body {
	b := &Body{
		r:       r,
		opts:    opts,
		sha256:  sha256.New(),
		md5:     md5.New(), //nolint:gosec // see import
		limit:   opts.Size,
		trailer: opts.TrailerChecksum != nil,
	}
	if b.limit < 0 {
		b.limit = MaxObjectSize
	}
	b.want, b.stored, b.err = planChecksums(opts)
	if b.want&bitSHA1 != 0 {
		b.sha1 = sha1.New() //nolint:gosec // see import
	}
	if b.want&bitSHA512 != 0 {
		b.sha512 = sha512.New()
	}
	if b.want&bitXXHASH64 != 0 {
		b.xx64 = xxhash.New()
	}
	if b.want&(bitXXHASH3|bitXXHASH128) != 0 {
		b.xx3 = xxh3.New()
	}
	return b
}

// planChecksums decides which checksums to compute and which one to store.
// The SHA256 and MD5 checksums are the content SHA-256 and the ETag's MD5,
// computed anyway; CRC64NVME is always computed, as it is what S3 stores when
// the client sends no checksum (it costs little beside SHA-256 and MD5).
func planChecksums(opts PutOptions) (want algSet, stored string, err error) {
	want = bitCRC64NVME
	if len(opts.Checksums) > 1 {
		return 0, "", ClientError(ErrInvalidRequest, "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
	}
	for alg, value := range opts.Checksums {
		up, err := NormalizeChecksumAlgorithm(alg)
		if err != nil {
			return 0, "", err
		}
		if _, err := decodeChecksum(up, value); err != nil {
			return 0, "", err
		}
		bit, _ := algBit(up)
		want |= bit
		stored = up
	}
	requested, err := NormalizeChecksumAlgorithm(opts.ChecksumAlgorithm)
	if err != nil {
		return 0, "", err
	}
	if requested != "" && stored != "" && requested != stored {
		// x-amz-sdk-checksum-algorithm names another algorithm than the
		// x-amz-checksum-* value the client sent.
		return 0, "", ClientError(ErrInvalidRequest, "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.")
	}
	if requested != "" {
		bit, _ := algBit(requested)
		want |= bit
		if stored == "" {
			stored = requested
		}
	}
	// A trailing checksum names its algorithm only after the body. The SDKs
	// announce it in x-amz-sdk-checksum-algorithm (ChecksumAlgorithm); if
	// nothing announced it, compute every algorithm rather than fail.
	if opts.TrailerChecksum != nil && requested == "" {
		want |= bitAll
	}
	return want, stored, nil
}

// Read reads from the wrapped reader and hashes what it returns. Errors of the
// wrapped reader are returned unchanged (they may be *auth.Error values); more
// content than the declared size is an error wrapping ErrInvalidRequest (or
// ErrEntityTooLarge beyond MaxObjectSize when no size was declared).
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	// A large read is filled from several reads of the wrapped reader (an
	// HTTP body returns a few KiB at a time), so that it is hashed in one
	// piece, MD5 beside the rest (hash).
	for len(p) >= parallelHashMin && n < len(p) && err == nil && b.n+int64(n) <= b.limit {
		var k int
		k, err = b.r.Read(p[n:])
		n += k
	}
	if over := b.n + int64(n) - b.limit; over > 0 {
		n -= int(over)
		b.hash(p[:n])
		if b.opts.Size >= 0 {
			b.err = fmt.Errorf("%w: the body is longer than the declared %d bytes", ErrInvalidRequest, b.opts.Size)
		} else {
			b.err = fmt.Errorf("%w: the body exceeds %d bytes", ErrEntityTooLarge, int64(MaxObjectSize))
		}
		return n, b.err
	}
	b.hash(p[:n])
	if err == io.EOF {
		if w := b.opts.PayloadSHA256; w != nil {
			pe := &PayloadSHA256Error{Client: *w}
			if !bytes.Equal(b.sha256.Sum(pe.Computed[:0]), w[:]) {
				// As the signed-payload check in auth did: the mismatch
				// replaces io.EOF and the tail is withheld.
				b.err = pe
				return 0, b.err
			}
		}
		b.eof = true
	}
	return n, err
}

// parallelHashMin is the read size from which MD5 runs on a second goroutine
// beside the other hashes: MD5 is the slowest of them (about half the speed of
// SHA-256 with SHA-NI), and for large reads the hand-off costs next to nothing.
const parallelHashMin = 64 << 10

func (b *Body) hash(p []byte) {
	if len(p) == 0 {
		return
	}
	b.n += int64(len(p))
	if len(p) >= parallelHashMin && runtime.GOMAXPROCS(0) > 1 {
		// Both goroutines only read p, and hashing ends before Read
		// returns, so the caller may reuse its buffer as usual.
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = b.md5.Write(p) })
		b.hashOthers(p)
		wg.Wait()
		return
	}
	_, _ = b.md5.Write(p) // hash.Hash.Write never fails
	b.hashOthers(p)
}

// hashOthers feeds p to every hash but MD5.
func (b *Body) hashOthers(p []byte) {
	_, _ = b.sha256.Write(p)
	if b.want&bitCRC32 != 0 {
		b.crc32 = crc32.Update(b.crc32, crc32.IEEETable, p)
	}
	if b.want&bitCRC32C != 0 {
		b.crc32c = crc32.Update(b.crc32c, castagnoli, p)
	}
	if b.want&bitCRC64NVME != 0 {
		b.crc64 = crc64nvme.Update(b.crc64, p)
	}
	if b.sha1 != nil {
		_, _ = b.sha1.Write(p)
	}
	if b.sha512 != nil {
		_, _ = b.sha512.Write(p)
	}
	if b.xx64 != nil {
		_, _ = b.xx64.Write(p)
	}
	if b.xx3 != nil {
		_, _ = b.xx3.Write(p)
	}
}

// Finish is called once the body hit EOF (if it did not, Finish reads one
// more byte to find out). It returns ErrIncompleteBody when fewer bytes than
// declared arrived, ErrBadDigest when Content-MD5, a declared checksum or the
// trailing checksum does not match, and otherwise the digests, with the one
// x-amz-checksum to store.
func (b *Body) Finish() (Digests, error) {
	if b.err != nil {
		return Digests{}, b.err
	}
	if !b.eof {
		// Past the declared size this read fails with the "longer than
		// declared" error; a trailer is only known once the reader hit EOF.
		var one [1]byte
		n, err := io.ReadFull(b, one[:])
		switch {
		case errors.Is(err, io.EOF):
			b.eof = true
		case err != nil:
			return Digests{}, err
		case n > 0:
			return Digests{}, errors.New("store: Body.Finish called before the body was read to the end")
		}
	}
	if b.opts.Size >= 0 && b.n < b.opts.Size {
		return Digests{}, fmt.Errorf("%w: got %d of %d bytes", ErrIncompleteBody, b.n, b.opts.Size)
	}

	d := Digests{Size: b.n}
	b.sha256.Sum(d.SHA256[:0])
	b.md5.Sum(d.MD5[:0])

	if b.opts.ContentMD5 != nil && !bytes.Equal(b.opts.ContentMD5, d.MD5[:]) {
		return Digests{}, ClientError(ErrBadDigest, "The Content-MD5 you specified did not match what we received.")
	}
	for alg, value := range b.opts.Checksums {
		if err := b.verify(strings.ToUpper(alg), value, &d); err != nil {
			return Digests{}, err
		}
	}
	stored := b.stored
	if b.trailer {
		alg, value, err := b.opts.TrailerChecksum()
		if err != nil {
			return Digests{}, fmt.Errorf("trailing checksum: %w", err)
		}
		if alg != "" {
			up, err := NormalizeChecksumAlgorithm(alg)
			if err != nil {
				return Digests{}, err
			}
			if req := strings.ToUpper(b.opts.ChecksumAlgorithm); req != "" && req != up {
				return Digests{}, ClientError(ErrInvalidRequest, "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.")
			}
			if _, err := decodeChecksum(up, value); err != nil {
				return Digests{}, err
			}
			if err := b.verify(up, value, &d); err != nil {
				return Digests{}, err
			}
			stored = up
		}
	}
	if stored == "" {
		// No checksum declared, requested or trailed: S3 adds CRC64NVME.
		stored = AlgCRC64NVME
	}
	d.Checksum = Checksum{Algorithm: stored, Value: base64.StdEncoding.EncodeToString(b.raw(stored, &d))}
	d.RawCRC = b.crcValue(stored)
	return d, nil
}

// verify compares a client's checksum of alg with the computed one.
func (b *Body) verify(alg, value string, d *Digests) error {
	want, err := decodeChecksum(alg, value)
	if err != nil {
		return err
	}
	if !bytes.Equal(want, b.raw(alg, d)) {
		return ClientError(ErrBadDigest, "The "+alg+" you specified did not match the calculated checksum.")
	}
	return nil
}

// raw returns the computed big-endian digest of alg.
func (b *Body) raw(alg string, d *Digests) []byte {
	switch alg {
	case AlgSHA256:
		return d.SHA256[:]
	case AlgSHA1:
		return b.sha1.Sum(nil)
	case AlgMD5:
		return d.MD5[:]
	case AlgSHA512:
		return b.sha512.Sum(nil)
	case AlgXXHASH64:
		return binary.BigEndian.AppendUint64(nil, b.xx64.Sum64())
	case AlgXXHASH3:
		return binary.BigEndian.AppendUint64(nil, b.xx3.Sum64())
	case AlgXXHASH128:
		s := b.xx3.Sum128().Bytes()
		return s[:]
	default:
		return crcBytes(alg, b.crcValue(alg))
	}
}

// crcValue returns the computed CRC of alg, 0 for non-CRC algorithms.
func (b *Body) crcValue(alg string) uint64 {
	switch alg {
	case AlgCRC32:
		return uint64(b.crc32)
	case AlgCRC32C:
		return uint64(b.crc32c)
	case AlgCRC64NVME:
		return b.crc64
	}
	return 0
}

// ReadKnee reads up to max+1 bytes of r. fits is true when r reached EOF
// within max bytes: head is then the whole content (the inline tier).
// Otherwise the caller continues with io.MultiReader(bytes.NewReader(head), r).
// The buffer grows as content arrives, so small bodies stay cheap; a Body
// with a declared size starts at that size and one byte for the EOF, so a
// 4 KiB put allocates (and zeroes) 4 KiB rather than the 32 KiB start.
func ReadKnee(r io.Reader, max int) (head []byte, fits bool, err error) {
	if max < 0 {
		max = 0
	}
	limit := max + 1
	start := min(limit, 32<<10)
	if b, ok := r.(*Body); ok && b.opts.Size >= 0 && b.opts.Size < int64(limit) {
		start = int(b.opts.Size) + 1
	}
	buf := make([]byte, 0, start)
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), limit))
			copy(grown, buf)
			buf = grown
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if rerr == io.EOF {
			// The last Read may bring the byte past the knee with its EOF.
			return buf, len(buf) <= max, nil
		}
		if rerr != nil {
			return buf, false, rerr
		}
	}
	return buf, false, nil
}
