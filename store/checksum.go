package store

import (
	"crypto/sha1" //nolint:gosec // SHA-1 is an S3 checksum algorithm, not used for security here.
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/minio/crc64nvme"
)

// castagnoli is the CRC32C table; crc32 uses the SSE4.2 instruction for it
// where available.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Reversed polynomials, as Go's CRC packages use them; the combine code needs
// them explicitly.
const (
	polyCRC32     = crc32.IEEE
	polyCRC32C    = crc32.Castagnoli
	polyCRC64NVME = crc64nvme.NVME
)

// algSet is a bit set of checksum algorithms, so the hot path tests bits, not
// strings.
type algSet uint8

const (
	bitCRC32 algSet = 1 << iota
	bitCRC32C
	bitCRC64NVME
	bitSHA1
	bitSHA256
	bitAll = bitCRC32 | bitCRC32C | bitCRC64NVME | bitSHA1 | bitSHA256
)

// algBit maps an upper-case algorithm name to its bit.
func algBit(alg string) (algSet, bool) {
	switch alg {
	case AlgCRC32:
		return bitCRC32, true
	case AlgCRC32C:
		return bitCRC32C, true
	case AlgCRC64NVME:
		return bitCRC64NVME, true
	case AlgSHA1:
		return bitSHA1, true
	case AlgSHA256:
		return bitSHA256, true
	}
	return 0, false
}

// checksumSize is the raw digest length of alg.
func checksumSize(alg string) int {
	switch alg {
	case AlgCRC32, AlgCRC32C:
		return 4
	case AlgCRC64NVME:
		return 8
	case AlgSHA1:
		return sha1.Size
	case AlgSHA256:
		return sha256.Size
	}
	return 0
}

// isCRC reports whether alg is one of the CRC algorithms (the ones that
// support FULL_OBJECT multipart checksums).
func isCRC(alg string) bool {
	return alg == AlgCRC32 || alg == AlgCRC32C || alg == AlgCRC64NVME
}

// NormalizeChecksumAlgorithm returns the canonical upper-case name of an
// x-amz-checksum algorithm ("" stays ""); an unknown name is an error wrapping
// ErrInvalidRequest.
func NormalizeChecksumAlgorithm(alg string) (string, error) {
	if alg == "" {
		return "", nil
	}
	up := strings.ToUpper(strings.TrimSpace(alg))
	if _, ok := algBit(up); !ok {
		return "", fmt.Errorf("%w: unsupported checksum algorithm %q", ErrInvalidRequest, alg)
	}
	return up, nil
}

// decodeChecksum decodes a base64 checksum value of alg and checks its length.
func decodeChecksum(alg, value string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(raw) != checksumSize(alg) {
		return nil, fmt.Errorf("%w: value for x-amz-checksum-%s is invalid", ErrInvalidRequest, strings.ToLower(alg))
	}
	return raw, nil
}

// crcBytes encodes a CRC value big-endian, as AWS does, in the width of alg.
func crcBytes(alg string, v uint64) []byte {
	if alg == AlgCRC64NVME {
		return binary.BigEndian.AppendUint64(nil, v)
	}
	return binary.BigEndian.AppendUint32(nil, uint32(v))
}

// checksumOf computes alg over data (used for COMPOSITE multipart checksums,
// whose input is small: the concatenated part checksums).
func checksumOf(alg string, data []byte) []byte {
	switch alg {
	case AlgCRC32:
		return crcBytes(alg, uint64(crc32.ChecksumIEEE(data)))
	case AlgCRC32C:
		return crcBytes(alg, uint64(crc32.Checksum(data, castagnoli)))
	case AlgCRC64NVME:
		return crcBytes(alg, crc64nvme.Checksum(data))
	case AlgSHA1:
		s := sha1.Sum(data) //nolint:gosec // see import
		return s[:]
	case AlgSHA256:
		s := sha256.Sum256(data)
		return s[:]
	}
	return nil
}

// crcCombine returns the CRC of A||B from crcA = CRC(A), crcB = CRC(B) and
// lenB = len(B), without the bytes, as zlib's crc32_combine does. It holds for
// reflected CRCs of the given width whose initial value and final xor are both
// all ones (CRC32, CRC32C, CRC64NVME): the pre- and post-conditioning terms
// cancel, leaving crcA * x^(8*lenB) mod P, xor crcB.
func crcCombine(poly uint64, width uint, crcA, crcB uint64, lenB int64) uint64 {
	if lenB <= 0 {
		return crcA ^ crcB
	}
	return multModP(poly, width, x2nModP(poly, width, uint64(lenB), 3), crcA) ^ crcB
}

// multModP multiplies a and b modulo the polynomial, in the reflected bit
// order (the highest bit is x^0).
func multModP(poly uint64, width uint, a, b uint64) uint64 {
	var p uint64
	for m := uint64(1) << (width - 1); m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// x2nModP returns x^(n * 2^k) modulo the polynomial by repeated squaring.
func x2nModP(poly uint64, width uint, n uint64, k uint) uint64 {
	p := uint64(1) << (width - 1)  // x^0
	sq := uint64(1) << (width - 2) // x^1
	// Advance sq to x^(2^k).
	for range k {
		sq = multModP(poly, width, sq, sq)
	}
	for ; n != 0; n >>= 1 {
		if n&1 != 0 {
			p = multModP(poly, width, sq, p)
		}
		sq = multModP(poly, width, sq, sq)
	}
	return p
}

// crcParams returns the polynomial and width of a CRC algorithm.
func crcParams(alg string) (poly uint64, width uint) {
	switch alg {
	case AlgCRC32:
		return polyCRC32, 32
	case AlgCRC32C:
		return polyCRC32C, 32
	case AlgCRC64NVME:
		return polyCRC64NVME, 64
	}
	return 0, 0
}
