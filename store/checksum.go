package store

import (
	"crypto/md5"  //nolint:gosec // MD5 is an S3 checksum algorithm, not used for security here.
	"crypto/sha1" //nolint:gosec // SHA-1 is an S3 checksum algorithm, not used for security here.
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/minio/crc64nvme"
	"github.com/zeebo/xxh3"
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
type algSet uint16

const (
	bitCRC32 algSet = 1 << iota
	bitCRC32C
	bitCRC64NVME
	bitSHA1
	bitSHA256
	bitMD5
	bitSHA512
	bitXXHASH64
	bitXXHASH3
	bitXXHASH128
	bitAll = bitCRC32 | bitCRC32C | bitCRC64NVME | bitSHA1 | bitSHA256 | bitMD5 | bitSHA512 | bitXXHASH64 | bitXXHASH3 | bitXXHASH128
)

// algorithms lists every x-amz-checksum algorithm with its bit and raw digest
// size (the big-endian digest is what travels in base64).
var algorithms = []struct {
	name string
	bit  algSet
	size int
}{
	{AlgCRC32, bitCRC32, 4},
	{AlgCRC32C, bitCRC32C, 4},
	{AlgCRC64NVME, bitCRC64NVME, 8},
	{AlgSHA1, bitSHA1, sha1.Size},
	{AlgSHA256, bitSHA256, sha256.Size},
	{AlgMD5, bitMD5, md5.Size},
	{AlgSHA512, bitSHA512, sha512.Size},
	{AlgXXHASH64, bitXXHASH64, 8},
	{AlgXXHASH3, bitXXHASH3, 8},
	{AlgXXHASH128, bitXXHASH128, 16},
}

// ChecksumAlgorithms returns the names of every supported algorithm, in the
// order S3 documents them.
func ChecksumAlgorithms() []string {
	out := make([]string, len(algorithms))
	for i, a := range algorithms {
		out[i] = a.name
	}
	return out
}

// algBit maps an upper-case algorithm name to its bit.
func algBit(alg string) (algSet, bool) {
	for _, a := range algorithms {
		if a.name == alg {
			return a.bit, true
		}
	}
	return 0, false
}

// checksumSize is the raw digest length of alg (0 for an unknown name).
func checksumSize(alg string) int {
	for _, a := range algorithms {
		if a.name == alg {
			return a.size
		}
	}
	return 0
}

// ChecksumSize is the raw digest length of an upper-case algorithm name, 0
// if the name is unknown.
func ChecksumSize(alg string) int { return checksumSize(alg) }

// isCRC reports whether alg is one of the CRC algorithms (the ones that
// support FULL_OBJECT multipart checksums).
func isCRC(alg string) bool {
	return alg == AlgCRC32 || alg == AlgCRC32C || alg == AlgCRC64NVME
}

// SplitComposite splits a COMPOSITE multipart checksum value "<base64>-N"
// into its base64 part and N; ok is false when value has no valid suffix.
func SplitComposite(value string) (b64 string, n int, ok bool) {
	i := strings.LastIndexByte(value, '-')
	if i < 0 {
		return value, 0, false
	}
	n, err := strconv.Atoi(value[i+1:])
	if err != nil || n < 1 || n > MaxPartNumber || value[i+1] == '+' {
		return value, 0, false
	}
	return value[:i], n, true
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
		return "", ClientError(ErrInvalidRequest, "Checksum algorithm provided is unsupported. Please try again with any of the valid types: ["+strings.Join(ChecksumAlgorithms(), ", ")+"]")
	}
	return up, nil
}

// decodeChecksum decodes a base64 checksum value of alg and checks its length.
func decodeChecksum(alg, value string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(raw) != checksumSize(alg) {
		return nil, ClientError(ErrInvalidRequest, "Value for x-amz-checksum-"+strings.ToLower(alg)+" header is invalid.")
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
	case AlgMD5:
		s := md5.Sum(data) //nolint:gosec // see import
		return s[:]
	case AlgSHA512:
		s := sha512.Sum512(data)
		return s[:]
	case AlgXXHASH64:
		return binary.BigEndian.AppendUint64(nil, xxhash.Sum64(data))
	case AlgXXHASH3:
		return binary.BigEndian.AppendUint64(nil, xxh3.Hash(data))
	case AlgXXHASH128:
		s := xxh3.Hash128(data).Bytes()
		return s[:]
	}
	return nil
}

// ChecksumOf returns the base64 x-amz-checksum of data for an upper-case
// algorithm name ("" for an unknown one). For small bodies only (XML
// requests); content is hashed by Body as it streams.
func ChecksumOf(alg string, data []byte) string {
	raw := checksumOf(alg, data)
	if raw == nil {
		return ""
	}
	return base64.StdEncoding.EncodeToString(raw)
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
