// Package store is the object store core: buckets, objects, multipart uploads,
// staged puts and content-addressed blobs. It defines the engine interfaces that
// the metadata engines (store/pg, store/embedded) and content engines
// (store/pglo, store/pgchunks, store/localfs) implement, and it never sees HTTP.
package store

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel errors. s3api maps them to S3 error codes in one place; engines wrap
// them with context (fmt.Errorf("...: %w", ErrX)).
var (
	ErrNoSuchBucket        = errors.New("no such bucket")
	ErrBucketExists        = errors.New("bucket already exists") // owned by us: BucketAlreadyOwnedByYou
	ErrBucketNotEmpty      = errors.New("bucket not empty")
	ErrInvalidBucketName   = errors.New("invalid bucket name")
	ErrNoSuchKey           = errors.New("no such key")
	ErrInvalidKey          = errors.New("invalid object key") // KeyTooLongError when too long, see ErrKeyTooLong
	ErrKeyTooLong          = errors.New("object key too long")
	ErrNoSuchUpload        = errors.New("no such upload")
	ErrInvalidPart         = errors.New("invalid part")
	ErrInvalidPartOrder    = errors.New("invalid part order")
	ErrEntityTooSmall      = errors.New("entity too small")
	ErrEntityTooLarge      = errors.New("entity too large")
	ErrBadDigest           = errors.New("bad digest")      // Content-MD5 or x-amz-checksum mismatch
	ErrIncompleteBody      = errors.New("incomplete body") // fewer bytes than declared
	ErrPreconditionFailed  = errors.New("precondition failed")
	ErrNotModified         = errors.New("not modified")
	ErrInvalidRange        = errors.New("invalid range")
	ErrInvalidArgument     = errors.New("invalid argument")
	ErrInvalidRequest      = errors.New("invalid request")
	ErrSlowDown            = errors.New("slow down")                    // a protective cap was hit (503)
	ErrUnavailable         = errors.New("service unavailable")          // lost session/pin, database down (503)
	ErrConditionalConflict = errors.New("conditional request conflict") // 409 ConditionalRequestConflict
	// ErrPayloadSHA256Mismatch: the body's SHA-256 is not the signed
	// x-amz-content-sha256 (PutOptions.PayloadSHA256).
	ErrPayloadSHA256Mismatch = errors.New("payload SHA-256 mismatch")
)

// Content tiers of a blob.
const (
	TierInline   = "inline"   // bytea in the blob row
	TierPGLO     = "pglo"     // PostgreSQL large object
	TierPGChunks = "pgchunks" // 1 MiB bytea rows
	TierLocal    = "local"    // file on (local or shared) filesystem media
)

// Checksum algorithms that S3 clients send as x-amz-checksum-* (upper case as in
// x-amz-checksum-algorithm).
const (
	AlgCRC32     = "CRC32"
	AlgCRC32C    = "CRC32C"
	AlgCRC64NVME = "CRC64NVME"
	AlgSHA1      = "SHA1"
	AlgSHA256    = "SHA256"
	AlgMD5       = "MD5"
	AlgSHA512    = "SHA512"
	AlgXXHASH64  = "XXHASH64"
	AlgXXHASH3   = "XXHASH3"
	AlgXXHASH128 = "XXHASH128"
)

// Checksum type of a multipart object's checksum.
const (
	ChecksumComposite  = "COMPOSITE"
	ChecksumFullObject = "FULL_OBJECT"
)

// Checksum is one stored x-amz-checksum value: algorithm, base64 value as the
// client sees it, and for multipart objects its type ("" for single puts, which
// AWS reports as FULL_OBJECT).
type Checksum struct {
	Algorithm string `json:"alg,omitempty"`
	Value     string `json:"val,omitempty"`
	Type      string `json:"type,omitempty"`
}

// ObjectMeta is the client-supplied metadata kept with an object and returned on
// GET/HEAD.
type ObjectMeta struct {
	ContentType        string            `json:"ct,omitempty"`
	ContentEncoding    string            `json:"ce,omitempty"`
	ContentDisposition string            `json:"cd,omitempty"`
	ContentLanguage    string            `json:"cl,omitempty"`
	CacheControl       string            `json:"cc,omitempty"`
	Expires            string            `json:"ex,omitempty"`
	User               map[string]string `json:"um,omitempty"` // x-amz-meta-* with the prefix removed, keys lower case
	// StorageClass is x-amz-storage-class as stored: "" for STANDARD (S3
	// omits the header for it), else REDUCED_REDUNDANCY. Every class is
	// kept on the same media; the name is what the client asked for.
	StorageClass string `json:"sc,omitempty"`
	// CompletedUpload is the id of the multipart upload whose Complete
	// wrote this object ("" otherwise). It is never sent to clients: it lets
	// a repeated CompleteMultipartUpload (an SDK retry after a lost reply)
	// answer the same result while the object it wrote is still in place.
	CompletedUpload string `json:"mpu,omitempty"`
	// ACL is the object's access control list; nil for none given, which
	// is private to its writer.
	ACL *ACL `json:"acl,omitempty"`
	// Tags are the object's tags in the order given (at most 10, keys
	// unique; s3api checks S3's limits).
	Tags []Tag `json:"tags,omitempty"`
	// Lock is the version's Object Lock state (retention, legal hold); nil
	// for none.
	Lock *ObjectLock `json:"lock,omitempty"`
}

// Tag is one key/value tag of an object or a bucket.
type Tag struct {
	Key   string `json:"k"`
	Value string `json:"v"`
}

// ACL is an access control list as S3 has it: an owner's canonical id and
// grants. The store keeps it as given; s3api parses and evaluates it.
type ACL struct {
	Owner  string     `json:"owner"`
	Grants []ACLGrant `json:"grants,omitempty"`
}

// ACLGrant grants Permission (FULL_CONTROL, READ, WRITE, READ_ACP,
// WRITE_ACP) to a canonical id (ID) or to a group (URI).
type ACLGrant struct {
	ID         string `json:"id,omitempty"`
	URI        string `json:"uri,omitempty"`
	Permission string `json:"perm"`
}

// Bucket is one bucket.
type Bucket struct {
	Name      string
	Region    string
	CreatedAt time.Time
}

// PartInfo describes one part of a multipart object or upload.
type PartInfo struct {
	Number       int
	Size         int64
	ETag         string // quoted-free hex MD5 of the part
	LastModified time.Time
	Checksum     Checksum
	// CopySourceVersionID is the version of the source UploadPartCopy read
	// (NullVersion where the source has none); empty for other parts.
	CopySourceVersionID string
}

// ObjectInfo is what GET/HEAD/List report about an object.
type ObjectInfo struct {
	Bucket       string
	Key          string
	Size         int64
	ETag         string // without quotes; "hex" or "hex-N" for multipart
	LastModified time.Time
	Meta         ObjectMeta
	Checksum     Checksum
	// Parts lists the parts of a multipart object in order (nil for single puts);
	// GET/HEAD with partNumber and GetObjectAttributes use it.
	Parts []PartInfo
	// VersionID is the version's id: NullVersion for an object written
	// while its bucket had no versioning or had it suspended.
	VersionID string
	// DeleteMarker is true for a delete marker (in ListObjectVersions, and
	// with ErrNoSuchKey / ErrDeleteMarker from GetObject).
	DeleteMarker bool
	// IsLatest is true for the latest version of its key
	// (ListObjectVersions only).
	IsLatest bool
	// CopySourceVersionID is the version of the source that CopyObject
	// copied (CopyObject only).
	CopySourceVersionID string
}

// PutOptions are the inputs of PutObject and UploadPart besides the body.
type PutOptions struct {
	Meta ObjectMeta
	// Size is the declared content length (decoded length for aws-chunked), -1 if
	// unknown. A body that ends early is ErrIncompleteBody; one that runs past it
	// is ErrInvalidRequest.
	Size int64
	// ContentMD5 is the raw 16-byte Content-MD5 if the client sent one.
	ContentMD5 []byte
	// Checksums the client declared in headers (algorithm -> base64). A trailer
	// checksum arrives through TrailerChecksum after the body is read.
	Checksums map[string]string
	// ChecksumAlgorithm from x-amz-checksum-algorithm / x-amz-sdk-checksum-algorithm:
	// compute and store this checksum even if no value was declared.
	ChecksumAlgorithm string
	// TrailerChecksum, if set, is called after the body hits EOF and returns the
	// trailing checksum (algorithm, base64 value) the client sent, already
	// verified by auth against its signature where one exists.
	TrailerChecksum func() (alg, value string, err error)
	// PayloadSHA256, if set, is the SHA-256 the request signed
	// (x-amz-content-sha256), whose check the caller handed to the store:
	// the body's content SHA-256 is computed anyway, so it is compared there,
	// once, at the body's end (ErrPayloadSHA256Mismatch), before anything is
	// verified or published.
	PayloadSHA256 *[32]byte
	// IfMatch / IfNoneMatch are conditional-write headers ("" when absent).
	IfMatch     string
	IfNoneMatch string
	// ChecksumType is x-amz-checksum-type on CompleteMultipartUpload ("" when
	// absent); it must match the upload's.
	ChecksumType string
	// MPObjectSize is x-amz-mp-object-size on CompleteMultipartUpload (nil
	// when absent); it must equal the sum of the chosen parts' sizes.
	MPObjectSize *int64
}

// GetOptions select what GetObject returns.
type GetOptions struct {
	// Range, if non-nil, selects bytes [Start, End] (inclusive), already resolved
	// against the size by ResolveRange.
	Range      *ByteRange
	RangeSpec  string // raw Range header, resolved once the size is known
	PartNumber int    // >0: return only this part
	Cond       Conditions
	// VersionID, if set, reads that version instead of the latest.
	VersionID string
}

// Conditions are the GET/HEAD preconditions.
type Conditions struct {
	IfMatch           string
	IfNoneMatch       string
	IfModifiedSince   *time.Time
	IfUnmodifiedSince *time.Time
}

// ByteRange is an inclusive byte range.
type ByteRange struct{ Start, End int64 }

// Reader is an open object stream. Close releases whatever protects the
// content (pins) and must always be called.
type Reader interface {
	io.ReadCloser
}

// ListParams are the inputs of ListObjects (V1 and V2).
type ListParams struct {
	Prefix    string
	Delimiter string
	// After is the exclusive lower bound: marker (V1), start-after or the decoded
	// continuation token (V2), whichever is greater.
	After   string
	MaxKeys int
}

// ListResult is one page of a listing. Objects and CommonPrefixes are each sorted;
// NextAfter is the last key or prefix returned when Truncated.
type ListResult struct {
	Objects        []ObjectInfo
	CommonPrefixes []string
	Truncated      bool
	NextAfter      string
}

// Upload is an in-progress multipart upload.
type Upload struct {
	Bucket    string
	Key       string
	UploadID  string
	Initiated time.Time
	Meta      ObjectMeta
	// ChecksumAlgorithm/ChecksumType chosen at CreateMultipartUpload ("" if none).
	ChecksumAlgorithm string
	ChecksumType      string
}

// ListUploadsParams are the inputs of ListMultipartUploads.
type ListUploadsParams struct {
	Prefix         string
	Delimiter      string
	KeyMarker      string
	UploadIDMarker string
	MaxUploads     int
}

// ListUploadsResult is one page of ListMultipartUploads.
type ListUploadsResult struct {
	Uploads            []Upload
	CommonPrefixes     []string
	Truncated          bool
	NextKeyMarker      string
	NextUploadIDMarker string
}

// ListPartsResult is one page of ListParts.
type ListPartsResult struct {
	Upload               Upload
	Parts                []PartInfo
	Truncated            bool
	NextPartNumberMarker int
}

// CompletePart is one entry of a CompleteMultipartUpload request.
type CompletePart struct {
	Number    int
	ETag      string            // quotes removed
	Checksums map[string]string // algorithm -> base64, as the client listed them
}

// CopySource names the source of CopyObject / UploadPartCopy.
type CopySource struct {
	Bucket string
	Key    string
	Range  *ByteRange // UploadPartCopy only
	Cond   Conditions // x-amz-copy-source-if-*
	// VersionID, if set, copies that version instead of the latest.
	VersionID string
}

// CopyOptions are the inputs of CopyObject besides source and destination.
type CopyOptions struct {
	ReplaceMeta       bool       // x-amz-metadata-directive: REPLACE
	Meta              ObjectMeta // used when ReplaceMeta
	ChecksumAlgorithm string
	// Checksum, when set, is the checksum of the source's bytes that the
	// store computed for the destination (the engine stores it instead of
	// the source's); SourceETag is the source ETag it was computed from.
	Checksum   *Checksum
	SourceETag string
	// StorageClass is the destination's, from the copy request whatever the
	// metadata directive ("" for STANDARD), as in S3.
	StorageClass string
	// Lock is the destination's Object Lock state, from the copy request or
	// the bucket's default retention (s3api): the source's never travels,
	// as in S3.
	Lock *ObjectLock
	// IfMatch / IfNoneMatch are conditional-write headers on the
	// destination ("" when absent), as PutOptions'.
	IfMatch     string
	IfNoneMatch string
}

// DeleteResult is the outcome for one key of DeleteObjects.
type DeleteResult struct {
	Key string
	Err error // nil on success (deleting a missing key is a success)
}

// ObjectStore is the API that s3api uses. store.Store implements it on top of a
// metadata engine.
type ObjectStore interface {
	ListBuckets(ctx context.Context) ([]Bucket, error)
	CreateBucket(ctx context.Context, name, region string) error
	HeadBucket(ctx context.Context, name string) (Bucket, error)
	DeleteBucket(ctx context.Context, name string) error

	PutObject(ctx context.Context, bucket, key string, body io.Reader, opts PutOptions) (ObjectInfo, error)
	// GetObject resolves metadata, evaluates conditions (ErrNotModified /
	// ErrPreconditionFailed are returned together with the ObjectInfo) and the
	// range (ErrInvalidRange with the ObjectInfo), and opens the content. For HEAD,
	// pass head=true: no content is opened, but protection is still checked.
	GetObject(ctx context.Context, bucket, key string, opts GetOptions, head bool) (ObjectInfo, *ByteRange, Reader, error)
	DeleteObject(ctx context.Context, bucket, key string) error
	DeleteObjects(ctx context.Context, bucket string, keys []string) ([]DeleteResult, error)
	ListObjects(ctx context.Context, bucket string, p ListParams) (ListResult, error)
	CopyObject(ctx context.Context, src CopySource, dstBucket, dstKey string, opts CopyOptions) (ObjectInfo, error)

	CreateMultipartUpload(ctx context.Context, bucket, key string, meta ObjectMeta, checksumAlg, checksumType string) (Upload, error)
	UploadPart(ctx context.Context, bucket, key, uploadID string, partNumber int, body io.Reader, opts PutOptions) (PartInfo, error)
	UploadPartCopy(ctx context.Context, src CopySource, bucket, key, uploadID string, partNumber int) (PartInfo, error)
	CompleteMultipartUpload(ctx context.Context, bucket, key, uploadID string, parts []CompletePart, opts PutOptions) (ObjectInfo, error)
	AbortMultipartUpload(ctx context.Context, bucket, key, uploadID string) error
	ListParts(ctx context.Context, bucket, key, uploadID string, partMarker, maxParts int) (ListPartsResult, error)
	ListMultipartUploads(ctx context.Context, bucket string, p ListUploadsParams) (ListUploadsResult, error)
	VersionStore

	// PutBucketCors replaces the bucket's CORS rules (validated by the
	// caller, at least one). GetBucketCors returns them, or
	// ErrNoSuchCORSConfiguration; DeleteBucketCors removes them (none is no
	// error). A missing bucket is ErrNoSuchBucket.
	PutBucketCors(ctx context.Context, bucket string, rules []CORSRule) error
	GetBucketCors(ctx context.Context, bucket string) ([]CORSRule, error)
	DeleteBucketCors(ctx context.Context, bucket string) error
}

// ErrNoSuchCORSConfiguration is GetBucketCors on a bucket without CORS rules.
var ErrNoSuchCORSConfiguration = errors.New("no such CORS configuration")

// CORSRule is one rule of a bucket's CORS configuration, as S3 has it. The
// store keeps the rules as given, in order; s3api validates and matches them.
type CORSRule struct {
	ID             string   `json:"id,omitempty"`
	AllowedOrigins []string `json:"allowed_origins"`
	AllowedMethods []string `json:"allowed_methods"`
	AllowedHeaders []string `json:"allowed_headers,omitempty"`
	ExposeHeaders  []string `json:"expose_headers,omitempty"`
	// MaxAgeSeconds is nil when the rule sets none.
	MaxAgeSeconds *int `json:"max_age_seconds,omitempty"`
}

// Access-key errors (KeyStore).
var (
	ErrNoSuchAccessKey = errors.New("no such access key")
	ErrAccessKeyExists = errors.New("access key already exists")
)

// AccessKey is an access key kept in the metadata store, beside the root key
// from the environment. The secret is stored as given (not hashed): SigV4
// verification derives its signing key from the secret itself, so the gateway
// must be able to read it. The table is only readable by the gateway's own
// database role (or, on the embedded engine, the owner of the data directory).
type AccessKey struct {
	ID     string
	Secret string
	// Buckets limits the key to these buckets; empty means every bucket.
	Buckets []string
	// ReadOnly allows only read operations (Get*, Head*, List*).
	ReadOnly bool
	Created  time.Time
	// Policy is the key's own access policy (a JSON policy document without
	// Principal), "" for none; Buckets and ReadOnly bound it.
	Policy string
}

// KeyStore keeps access keys. Metadata engines implement it; auth resolves
// keys through it on every request, so a created key works at once and a
// deleted key is refused at once.
type KeyStore interface {
	// CreateKey stores k; an existing ID is ErrAccessKeyExists. A zero Created
	// is set to the current time.
	CreateKey(ctx context.Context, k AccessKey) error
	// GetKey returns the key with this ID, or ErrNoSuchAccessKey.
	GetKey(ctx context.Context, id string) (AccessKey, error)
	// ListKeys returns every key ordered by ID.
	ListKeys(ctx context.Context) ([]AccessKey, error)
	// DeleteKey removes the key, or returns ErrNoSuchAccessKey.
	DeleteKey(ctx context.Context, id string) error
}

// RootKeyStore keeps the generated root key pair in the metadata store, so
// that every instance on one database accepts the same root key. The
// PostgreSQL engine implements it; the embedded default keeps its generated
// pair in a file of its data directory instead (one process per directory).
type RootKeyStore interface {
	// CreateRootKey stores k (ID and Secret) as the root key unless one is
	// stored already, and returns the stored one; created reports whether it
	// is k. Concurrent callers all get the same key, and exactly one of them
	// created = true.
	CreateRootKey(ctx context.Context, k AccessKey) (stored AccessKey, created bool, err error)
	// RootKey returns the stored root key, or ErrNoSuchAccessKey if none is.
	RootKey(ctx context.Context) (AccessKey, error)
}

// TierStats counts the blobs of one content tier and their bytes.
type TierStats struct {
	Blobs int64
	Bytes int64
}

// BlobStats summarizes stored content for metrics. Metadata engines implement
// BlobStats(ctx) (BlobStats, error).
type BlobStats struct {
	// Tiers maps a tier (TierInline, TierPGLO, ...) to its blobs, every blob
	// row counted (garbage not yet collected and upload parts included). The
	// tiers the engine can use are present even when empty.
	Tiers map[string]TierStats
	// LogicalBytes is the sum of the sizes of all objects, noncurrent versions
	// included: what clients stored.
	LogicalBytes int64
	// ReferencedBytes is the size of the distinct blobs that objects reference
	// (directly or as parts): what storing LogicalBytes took after dedup.
	ReferencedBytes int64
	// Buckets is the usage of every bucket, in name order, from the same
	// snapshot.
	Buckets []BucketUsage
}

// DedupSavedBytes is the number of bytes deduplication saved: logical bytes
// minus the bytes of the distinct blobs they reference.
func (s BlobStats) DedupSavedBytes() int64 { return s.LogicalBytes - s.ReferencedBytes }

// Names of the per-bucket configuration documents (BucketConfigStore).
const (
	// BucketConfigPolicy is the bucket policy (JSON, as the client sent it).
	BucketConfigPolicy = "policy"
	// BucketConfigPublicAccessBlock is the bucket's Block Public Access
	// setting; "" records that it was deleted (see s3api).
	BucketConfigPublicAccessBlock = "public-access-block"
	// BucketConfigCORS is the bucket's CORS rules (JSON array of CORSRule).
	BucketConfigCORS = "cors"
	// BucketConfigACL is the bucket's access control list (JSON of ACL).
	BucketConfigACL = "acl"
	// BucketConfigOwnership is the bucket's object ownership setting
	// (BucketOwnerEnforced, BucketOwnerPreferred, ObjectWriter).
	BucketConfigOwnership = "ownership"
	// BucketConfigTagging is the bucket's tag set (JSON array of Tag).
	BucketConfigTagging = "tagging"
)

// BucketConfigStore keeps per-bucket configuration documents, opaque to the
// store, by name (BucketConfigPolicy, ...). Metadata engines implement it; a
// document goes with its bucket. Each call is one statement: a change is
// visible to every instance at once.
type BucketConfigStore interface {
	// BucketConfigs returns the bucket's documents by name (empty if none),
	// or ErrNoSuchBucket.
	BucketConfigs(ctx context.Context, bucket string) (map[string]string, error)
	// PutBucketConfig stores or replaces one document; a missing bucket is
	// ErrNoSuchBucket.
	PutBucketConfig(ctx context.Context, bucket, name, value string) error
	// DeleteBucketConfig removes one document and reports whether there was
	// one; a missing bucket is ErrNoSuchBucket.
	DeleteBucketConfig(ctx context.Context, bucket, name string) (deleted bool, err error)
}
