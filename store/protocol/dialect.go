package protocol

import (
	"context"
	"io"
	"time"

	"github.com/s3gate/s3gate/store"
)

// Dialect is a metadata engine's part of the protocol: its transactions,
// locks and statements. It decides no step; the protocol calls it in order.
type Dialect interface {
	// Write runs fn in one write transaction that holds the locks of keys
	// (fleet's lock keys, taken in ascending order so that transactions taking
	// several cannot deadlock) until it ends, and commits it. The transaction
	// is ended on every path before its connection is given back (amendment
	// A1). A failed COMMIT, whose outcome may be unknown, is a *CommitError.
	Write(ctx context.Context, keys []int64, fn func(tx Tx) error) error
	// Read runs fn in one read snapshot.
	Read(ctx context.Context, fn func(tx Tx) error) error
	// Autocommit runs each statement on its own, outside any transaction; the
	// protocol only reads through it.
	Autocommit() Tx
	// OpenContent opens n bytes at off of a blob whose content is outside its
	// row, with the content engine of its tier (whatever engine new content
	// is written with). It reads lazily, a bounded window of chunks ahead at
	// most (3 MiB for pgchunks), in short statements outside any
	// transaction.
	OpenContent(ctx context.Context, b BlobLoc, off, n int64) (io.ReadCloser, error)
}

// Prefetch names the statements a write's fn runs first, in this order:
// UpsertBlob(*Blob), then CurrentObject(Bucket, Key).
type Prefetch struct {
	Blob        *Blob
	Bucket, Key string
}

// Prefetcher is a Dialect that can send a write's first statements with its
// BEGIN and locks, in one round trip (ADR 002, amendment of issue 16).
// WritePrefetched is Write whose fn calls the statements p names first, in
// their order; the dialect may answer them from statements sent early, and
// may send a later statement whose result it can give in advance (the
// object row of p's key) with COMMIT: that statement's failure is then the
// Write's error, a known rollback, not a *CommitError. It decides no step.
type Prefetcher interface {
	WritePrefetched(ctx context.Context, keys []int64, p Prefetch, fn func(tx Tx) error) error
}

// Tx is the statements the protocol runs, inside a transaction of the
// dialect or in autocommit. Errors name their step; a foreign key that fails
// because the bucket or the upload is gone is store.ErrNoSuchBucket or
// store.ErrNoSuchUpload.
type Tx interface {
	// BucketExists is nil or an error wrapping store.ErrNoSuchBucket.
	BucketExists(ctx context.Context, bucket string) error
	// BucketState reports whether the bucket exists and has objects
	// (current, noncurrent or delete markers).
	BucketState(ctx context.Context, bucket string) (exists, hasObjects bool, err error)
	// DeleteUploads deletes the uploads of a bucket (their part rows go with
	// them).
	DeleteUploads(ctx context.Context, bucket string) error
	// DeleteBucket deletes the bucket row; an object or upload written
	// meanwhile makes it store.ErrBucketNotEmpty.
	DeleteBucket(ctx context.Context, bucket string) error
	// BlobExists reports whether the blob row id exists.
	BlobExists(ctx context.Context, id int64) (bool, error)
	// UpsertBlob inserts the blob row, or finds the row with the same SHA-256
	// (and orders itself against a GC deleting it); inserted is false then.
	UpsertBlob(ctx context.Context, b Blob) (id int64, inserted bool, err error)
	// CurrentObject reads (and locks, where rows can be locked) the object
	// row, and the bucket's versioning state in the same statement (so that a
	// write committed after a versioning change was acknowledged sees it).
	CurrentObject(ctx context.Context, bucket, key string) (Current, error)
	// DropManifest deletes the manifest rows of a multipart object.
	DropManifest(ctx context.Context, bucket, key string) error
	// PutObjectRow inserts or replaces the object row and returns its
	// last-modified time.
	PutObjectRow(ctx context.Context, o ObjectRow) (time.Time, error)
	// Resolve reads the object with its blob or manifest in one snapshot,
	// with the inline content of a single-blob object when withInline. In a
	// write transaction the object row is kept from changing until it ends.
	// A missing object is store.ErrNoSuchKey.
	Resolve(ctx context.Context, bucket, key string, withInline bool) (*Resolved, error)
	// InlineData reads the content of an inline blob from its row; found is
	// false if the row is gone.
	InlineData(ctx context.Context, id int64) (data []byte, found bool, err error)
	// UpdateObjectMeta replaces the metadata and checksum of an object row
	// and returns its new last-modified time.
	UpdateObjectMeta(ctx context.Context, bucket, key string, meta store.ObjectMeta, ck store.Checksum) (time.Time, error)
	// CopyManifest copies the manifest rows of one object to another: of the
	// source's current object when srcSeq is 0, else of its noncurrent
	// version srcSeq.
	CopyManifest(ctx context.Context, srcBucket, srcKey string, srcSeq int64, dstBucket, dstKey string) error
	// DeleteObjects deletes the object rows of keys (a missing one is no
	// error); their manifest rows go with them.
	DeleteObjects(ctx context.Context, bucket string, keys []string) error
	// DeleteUnversioned deletes the object rows of keys, as DeleteObjects,
	// only if the bucket never had versioning, and returns the bucket's
	// versioning state (nothing is deleted when it is not "").
	DeleteUnversioned(ctx context.Context, bucket string, keys []string) (versioning string, err error)

	// The statements of versioning. The caller holds the key's object lock.

	// DemoteCurrent copies the current object row of bucket/key into the
	// noncurrent versions as the newest of its key (a new seq), its manifest
	// into the version's manifest, and drops the object's manifest rows; the
	// object row stays, for the caller to replace or delete. It returns the
	// new version row's seq.
	DemoteCurrent(ctx context.Context, bucket, key string) (seq int64, err error)
	// DropVersion deletes the noncurrent version (or delete marker)
	// versionID of bucket/key with its manifest; found is false if there is
	// none.
	DropVersion(ctx context.Context, bucket, key, versionID string) (found bool, err error)
	// PutMarker inserts the delete marker versionID as the newest version of
	// bucket/key and returns its last-modified time.
	PutMarker(ctx context.Context, bucket, key, versionID string) (time.Time, error)
	// PromoteNewest moves the newest noncurrent version of bucket/key, with
	// its manifest, back into the current object when it is an object (not
	// a delete marker). The caller has made sure there is no object row.
	PromoteNewest(ctx context.Context, bucket, key string) (promoted bool, err error)
	// FindVersion reads (and locks, where rows can be locked) the version
	// versionID of bucket/key, current or not.
	FindVersion(ctx context.Context, bucket, key, versionID string) (Version, error)
	// ResolveVersion is Resolve of the version versionID, current or not,
	// in one snapshot; a missing version is store.ErrNoSuchVersion, a
	// delete marker resolves with Info.DeleteMarker set and no content.
	ResolveVersion(ctx context.Context, bucket, key, versionID string, withInline bool) (*Resolved, error)
	// LatestMarker is what a read that found no object row asks next: a
	// missing bucket is store.ErrNoSuchBucket; else the newest version of
	// the key if it is a delete marker (nil if none is).
	LatestMarker(ctx context.Context, bucket, key string) (*store.ObjectInfo, error)
	// ReplaceMeta replaces the metadata of the current object row (seq 0) or
	// of the noncurrent version seq, keeping its last-modified time.
	ReplaceMeta(ctx context.Context, bucket, key string, seq int64, meta store.ObjectMeta) error
	// CreateUpload inserts the upload row and sets u.Initiated.
	CreateUpload(ctx context.Context, u *store.Upload) error
	// Upload reads an upload row, locking it if forUpdate; found is false if
	// there is none.
	Upload(ctx context.Context, uploadID string, forUpdate bool) (u store.Upload, found bool, err error)
	// PutPart inserts or replaces a part row referencing blobID and sets
	// pi.LastModified.
	PutPart(ctx context.Context, uploadID string, pi *store.PartInfo, blobID int64) error
	// ListParts lists the parts of an upload numbered above after, in order,
	// at most limit of them (all if limit < 0).
	ListParts(ctx context.Context, uploadID string, after, limit int) ([]PartRow, error)
	// WriteManifest writes the manifest rows of bucket/key from the given
	// parts of uploadID (the part rows hold the same values).
	WriteManifest(ctx context.Context, bucket, key, uploadID string, parts []PartRow) error
	// DeleteUpload deletes the upload row of bucket/key (its part rows go
	// with it); deleted is false if there was none.
	DeleteUpload(ctx context.Context, bucket, key, uploadID string) (deleted bool, err error)
	// PinRows inserts, inside a write transaction, the pin rows (blob,
	// owner) of ids expiring ttl from now in database time, or renews those
	// that have not expired; an expired row is replaced by a fresh one, never
	// renewed (ADR 010). Row pins are PostgreSQL's: other dialects refuse.
	PinRows(ctx context.Context, ids []int64, owner string, ttl time.Duration) error
	// PromoteBlob gives the placeholder blob row id the address of d, or,
	// when a blob with that address exists, locks that one and returns it
	// (promoted false) as UpsertBlob does (row pins only).
	PromoteBlob(ctx context.Context, id int64, d store.Digests) (got int64, promoted bool, err error)
	// DropBlob deletes owner's pin rows of blob id and the blob row (a
	// placeholder nothing references; row pins only).
	DropBlob(ctx context.Context, id int64, owner string) error
	// Now is the database's clock, the one Object Lock's retention is
	// judged by: clock_timestamp() on PostgreSQL, the process clock on the
	// embedded engine (which is the database there).
	Now(ctx context.Context) (time.Time, error)
	// VersionLock reads the Object Lock state of the version versionID of
	// bucket/key (current or not; nil if it has none or does not exist) and
	// the database's clock, in one statement. The caller holds the key's
	// object lock.
	VersionLock(ctx context.Context, bucket, key, versionID string) (*store.ObjectLock, time.Time, error)

	// VersionReferencing is the statement of fsck's repair
	// (RemoveVersionWithBlobs): it reads the version id of the version
	// versionID of bucket/key, current or noncurrent ("": the current
	// object row, whatever its version), if that version, or its manifest,
	// references one of blobs ids; found is false otherwise (no such
	// version, a delete marker, or one that references none). The caller
	// holds the key's object lock.
	VersionReferencing(ctx context.Context, bucket, key, versionID string, ids []int64) (gotVersionID string, found bool, err error)
}

// Blob is a blob row to upsert.
type Blob struct {
	// ID is the fresh id the content was staged under; 0 lets the dialect
	// assign one.
	ID      int64
	Digests store.Digests
	Tier    string
	// Inline is the content of an inline blob.
	Inline []byte
	// LargeObject is the large object holding a pglo blob's content.
	LargeObject *uint32
}

// Current is what a write checks of the object it replaces.
type Current struct {
	Exists       bool
	ETag         string
	PartCount    int
	VersionID    string
	LastModified time.Time
	// Versioning is the bucket's versioning state ("" if it never had
	// one), read whether or not the object exists.
	Versioning string
}

// Version is one version of a key as FindVersion reads it.
type Version struct {
	Found        bool
	Current      bool // the current object row, else a noncurrent version
	DeleteMarker bool
	ETag         string
	LastModified time.Time
	// HasCurrent says the key has a current object row.
	HasCurrent bool
}

// ObjectRow is an object row to write.
type ObjectRow struct {
	Bucket, Key string
	VersionID   string
	BlobID      *int64 // nil for a multipart manifest
	Size        int64
	ETag        string
	Meta        store.ObjectMeta
	Checksum    store.Checksum
	PartCount   int
}

// PartRow is a part of an upload, or of a multipart object's manifest.
type PartRow struct {
	store.PartInfo
	BlobID int64
	Start  int64 // in a manifest: the offset of the part in the object
}

// CommitError is a failed COMMIT, whose outcome may be unknown: the
// connection can break after the server committed.
type CommitError struct{ Err error }

func (c *CommitError) Error() string { return c.Err.Error() }
func (c *CommitError) Unwrap() error { return c.Err }
