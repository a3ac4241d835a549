package fleet

import (
	"fmt"
	"hash/fnv"
	"strconv"
)

// LockKey derives a 64-bit advisory lock key from a namespaced identity. Each
// part is length-prefixed so that ("a","b/c") and ("a/b","c") differ. Every key of
// s3gate is derived here, so that all of them live in one space.
func LockKey(namespace string, parts ...string) int64 {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "s3gate/%s", namespace) // hash writes never fail
	for _, p := range parts {
		_, _ = fmt.Fprintf(h, "\x00%d:%s", len(p), p)
	}
	return int64(h.Sum64())
}

// BlobLockKey is the advisory lock key of a blob: pins hold it shared on their
// session; GC takes it exclusively (pg_try_advisory_lock) before it checks a
// blob's references and deletes it.
func BlobLockKey(blobID int64) int64 {
	return LockKey("blob", strconv.FormatInt(blobID, 10))
}

// ObjectLockKey is the key that serializes the mutations of one object
// (put, copy destination, delete, complete): an advisory transaction lock on
// PostgreSQL, an in-process lock stripe on the embedded engine.
func ObjectLockKey(bucket, key string) int64 { return LockKey("object", bucket, key) }

// UploadLockKey is the key that serializes the mutations of one multipart
// upload (part writes, complete, abort, expiry).
func UploadLockKey(uploadID string) int64 { return LockKey("upload", uploadID) }

// MigrationLockKey serializes schema migrations of concurrent starts.
func MigrationLockKey() int64 { return LockKey("migrate", "schema") }

// OwnerLockKey is the key of the single-instance writer claim.
func OwnerLockKey() int64 { return LockKey("owner", "writer") }

// MediaMarkerLockKey serializes the shared-media probe of fleet instances
// starting at once: the first writes the marker, the others read it.
func MediaMarkerLockKey() int64 { return LockKey("fleet", "media-marker") }
