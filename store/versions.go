package store

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/s3gate/s3gate/internal/randid"
)

// Versioning states of a bucket (S3's BucketVersioningStatus). A bucket that
// never had versioning reports "".
const (
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// NullVersion is the version id of an object written while its bucket had no
// versioning or had it suspended.
const NullVersion = "null"

// BucketConfigVersioning is the bucket configuration document that holds the
// bucket's versioning state (VersioningEnabled or VersioningSuspended); a
// bucket without it never had versioning.
const BucketConfigVersioning = "versioning"

// versionIDBytes is the randomness of a version id: 24 bytes are 32
// base64url characters.
const versionIDBytes = 24

// NewVersionID returns a fresh version id: 32 random base64url characters
// (never NullVersion), never starting with '-', which a command line (the aws
// cli's `--version-id ID`, for one) takes for an option. Nothing orders
// versions by their ids.
func NewVersionID() string {
	var b [versionIDBytes]byte
	return randid.Base64URL(b[:])
}

// ValidVersionID reports whether id can name a version: NullVersion or the
// form NewVersionID gives.
func ValidVersionID(id string) bool {
	if id == NullVersion {
		return true
	}
	b, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil && len(b) == versionIDBytes
}

// CheckVersionID is nil for "" (the latest) and a valid id, else S3's
// InvalidArgument.
func CheckVersionID(id string) error {
	if id != "" && !ValidVersionID(id) {
		return fmt.Errorf("%w: Invalid version id specified", ErrInvalidArgument)
	}
	return nil
}

// Versioning errors. s3api maps them to S3's codes.
var (
	// ErrNoSuchVersion is a version id that names no version of the key (404
	// NoSuchVersion); a malformed one is ErrInvalidArgument.
	ErrNoSuchVersion = errors.New("no such version")
	// ErrDeleteMarker is GET or HEAD of a delete marker named by its version
	// id (405 MethodNotAllowed, with x-amz-delete-marker: true). A GET
	// without a version id whose latest version is a delete marker is
	// ErrNoSuchKey, its ObjectInfo naming the marker (DeleteMarker true,
	// VersionID set).
	ErrDeleteMarker = errors.New("the version is a delete marker")
	// ErrInvalidBucketState is a versioning change the bucket refuses (409
	// InvalidBucketState): suspending a bucket with Object Lock.
	ErrInvalidBucketState = errors.New("invalid bucket state")
	// ErrNotImplemented is a call this engine does not build (501
	// NotImplemented).
	ErrNotImplemented = errors.New("not implemented")
)

// ObjectID names one version of a key: VersionID "" is the latest.
type ObjectID struct {
	Key       string
	VersionID string
	// BypassGovernance is DeleteOptions.BypassGovernance for this entry.
	BypassGovernance bool
	// IfMatch is DeleteOptions.IfMatch for this entry (DeleteObjects'
	// ETag element).
	IfMatch string
}

// DeleteOptions are the inputs of DeleteObjectVersion besides the key.
type DeleteOptions struct {
	// VersionID, if set, deletes that version for good; "" deletes the
	// latest the way the bucket's versioning state says (a delete marker on
	// a versioned bucket).
	VersionID string
	// IfMatch, if set, deletes only while the version's ETag is this one
	// (quotes removed; "*" any existing version): else
	// ErrPreconditionFailed and nothing changes; without a VersionID, a key
	// with no current object (none, or a delete marker) is ErrNoSuchKey, as
	// S3 answers a conditional delete. Lifecycle uses it, with
	// IfMatchLastModified, so that an object rewritten after it was judged
	// expired is never removed; s3api for If-Match on DeleteObject and the
	// ETag element of DeleteObjects.
	IfMatch string
	// IfMatchLastModified, if set, deletes only while the version's
	// last-modified time is this one.
	IfMatchLastModified *time.Time
	// BypassGovernance lets a removal for good pass a GOVERNANCE retention
	// (x-amz-bypass-governance-retention with s3:BypassGovernanceRetention,
	// which s3api checks). Nothing passes a COMPLIANCE retention or a legal
	// hold.
	BypassGovernance bool
}

// DeleteVersionResult is the outcome of deleting one key or version.
type DeleteVersionResult struct {
	Key string
	// VersionID is the version deleted for good (a version id was given),
	// or the id of the delete marker created; "" when the bucket never had
	// versioning and no version id was given.
	VersionID string
	// DeleteMarker is true when a delete marker was created, or when the
	// version deleted for good was a delete marker.
	DeleteMarker bool
	Err          error // nil on success (deleting a missing key or version is a success)
}

// ListVersionsParams are the inputs of ListObjectVersions.
type ListVersionsParams struct {
	Prefix    string
	Delimiter string
	// KeyMarker alone resumes after every version of that key; with
	// VersionIDMarker it resumes after that version of that key.
	KeyMarker       string
	VersionIDMarker string
	MaxKeys         int
}

// ListVersionsResult is one page of ListObjectVersions. Versions are in key
// order and, within a key, newest first; each has VersionID, IsLatest and
// DeleteMarker set (a delete marker has no size, ETag or checksum).
type ListVersionsResult struct {
	Versions            []ObjectInfo
	CommonPrefixes      []string
	Truncated           bool
	NextKeyMarker       string
	NextVersionIDMarker string // "" when the page ended on a common prefix
}

// VersionStore is the versioning part of ObjectStore (PutBucketVersioning,
// version-aware deletes, ListObjectVersions). GET, HEAD and copy sources name
// a version through GetOptions.VersionID and CopySource.VersionID; PutObject,
// CopyObject and CompleteMultipartUpload report the version they wrote in
// ObjectInfo.VersionID.
type VersionStore interface {
	// SetBucketVersioning sets the bucket's versioning state (Enabled or
	// Suspended; a bucket can never go back to "").
	SetBucketVersioning(ctx context.Context, bucket, status string) error
	// BucketVersioning returns the bucket's versioning state, "" if it never
	// had one.
	BucketVersioning(ctx context.Context, bucket string) (string, error)
	// DeleteObjectVersion deletes one key or one version of it.
	DeleteObjectVersion(ctx context.Context, bucket, key string, opts DeleteOptions) (DeleteVersionResult, error)
	// DeleteObjectVersions deletes keys or versions (at most
	// MaxDeleteObjects), one result per entry in order; a failure of one
	// entry is its result's Err.
	DeleteObjectVersions(ctx context.Context, bucket string, ids []ObjectID) ([]DeleteVersionResult, error)
	// ListObjectVersions lists every version and delete marker.
	ListObjectVersions(ctx context.Context, bucket string, p ListVersionsParams) (ListVersionsResult, error)
	// ReplaceObjectMeta replaces the metadata of one version (the latest
	// when versionID is "") while its ETag is still etag (else
	// ErrPreconditionFailed), keeping its content, version id and
	// last-modified time: tagging and ACL changes make no new version.
	ReplaceObjectMeta(ctx context.Context, bucket, key, versionID, etag string, meta ObjectMeta) (ObjectInfo, error)
}

// SetBucketVersioning implements VersionStore; status is Enabled or
// Suspended.
func (s *Store) SetBucketVersioning(ctx context.Context, bucket, status string) error {
	if status != VersioningEnabled && status != VersioningSuspended {
		return fmt.Errorf("%w: versioning status %q", ErrInvalidArgument, status)
	}
	return s.e.SetBucketVersioning(ctx, bucket, status)
}

// BucketVersioning implements VersionStore.
func (s *Store) BucketVersioning(ctx context.Context, bucket string) (string, error) {
	return s.e.BucketVersioning(ctx, bucket)
}

// DeleteObjectVersion implements VersionStore; an invalid key is reported
// as such.
func (s *Store) DeleteObjectVersion(ctx context.Context, bucket, key string, opts DeleteOptions) (DeleteVersionResult, error) {
	if err := ValidKey(key); err != nil {
		return DeleteVersionResult{}, err
	}
	return s.e.DeleteObjectVersion(ctx, bucket, key, opts)
}

// DeleteObjectVersions implements VersionStore: at most MaxDeleteObjects
// entries.
func (s *Store) DeleteObjectVersions(ctx context.Context, bucket string, ids []ObjectID) ([]DeleteVersionResult, error) {
	if len(ids) > MaxDeleteObjects {
		return nil, fmt.Errorf("%w: %d keys, at most %d per request", ErrInvalidRequest, len(ids), MaxDeleteObjects)
	}
	return s.e.DeleteObjectVersions(ctx, bucket, ids)
}

// ListObjectVersions implements VersionStore; MaxKeys is clamped as in
// ListObjects.
func (s *Store) ListObjectVersions(ctx context.Context, bucket string, p ListVersionsParams) (ListVersionsResult, error) {
	switch {
	case p.MaxKeys < 0:
		return ListVersionsResult{}, fmt.Errorf("%w: max-keys %d must not be negative", ErrInvalidArgument, p.MaxKeys)
	case p.VersionIDMarker != "" && p.KeyMarker == "":
		return ListVersionsResult{}, fmt.Errorf("%w: A version-id marker cannot be specified without a key marker", ErrInvalidArgument)
	case CheckVersionID(p.VersionIDMarker) != nil:
		return ListVersionsResult{}, CheckVersionID(p.VersionIDMarker)
	case p.MaxKeys > MaxListKeys:
		p.MaxKeys = MaxListKeys
	}
	return s.e.ListObjectVersions(ctx, bucket, p)
}

// ReplaceObjectMeta implements VersionStore; an invalid key is reported as
// such.
func (s *Store) ReplaceObjectMeta(ctx context.Context, bucket, key, versionID, etag string, meta ObjectMeta) (ObjectInfo, error) {
	if err := ValidKey(key); err != nil {
		return ObjectInfo{}, err
	}
	return s.e.ReplaceObjectMeta(ctx, bucket, key, versionID, etag, meta)
}
