package store

// This file fixes the signatures of the helpers that every metadata engine uses,
// so that engines and the s3 layer agree. Bodies live in body.go, validate.go,
// rangecond.go and multipart.go.

// Knee-related defaults.
const (
	// DefaultInlineMax is the default inline knee: content up to this size is
	// kept in the blob row as bytea.
	DefaultInlineMax = 512 << 10
	// MinPartSize is the smallest allowed size of every part but the last.
	MinPartSize = 5 << 20
	// MaxPartNumber is the largest allowed part number.
	MaxPartNumber = 10000
	// MaxKeyLength is the largest allowed key, in bytes of UTF-8.
	MaxKeyLength = 1024
	// MaxObjectSize is the largest single PUT (5 GiB as on AWS).
	MaxObjectSize = 5 << 30
)

// Digests are what a staged body computed once it was read to EOF.
type Digests struct {
	Size   int64
	SHA256 [32]byte // content address
	MD5    [16]byte // ETag of a single put / part
	// Checksum is the x-amz-checksum the object stores (declared, trailer or
	// requested algorithm), empty if none.
	Checksum Checksum
	// CRC state needed to combine full-object CRCs of multipart uploads without
	// re-reading the bytes (raw CRC value of this body for CRC algorithms).
	RawCRC uint64
}
