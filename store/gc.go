package store

import (
	"context"
	"errors"
)

// The vocabulary of garbage collection between package gc, which owns its
// protocol (the order of steps, grace, batching, stats), and the metadata
// engines, which implement its steps with their SQL, transactions and pins
// (store/pg and store/embedded, in their gc*.go files).

// GCVerdict is what one arbitrated GC step decided.
type GCVerdict int

const (
	GCDone       GCVerdict = iota // deleted (or, for a probe, proved absent)
	GCGone                        // nothing to do: deleted by someone else, or no longer due
	GCPinned                      // a stream (or a put in flight) holds the blob's pin
	GCReferenced                  // a reference exists or committed meanwhile
	GCBusy                        // a lock was held past the lock timeout
)

// GCBlob is a blob row that a GC transaction deleted.
type GCBlob struct {
	Tier string
	Size int64
}

// GCDecision is what a batch deletion decided about one blob: Blob is set
// for GCDone.
type GCDecision struct {
	ID      int64
	Verdict GCVerdict
	Blob    GCBlob
}

// ErrGCUndecided says that a batch deletion could not be decided as one (an
// arbitration conflict aborted its transaction): its blobs are decided one by
// one instead.
var ErrGCUndecided = errors.New("gc: batch undecided")

// GCUpload is a multipart upload past its expiry.
type GCUpload struct{ ID, Bucket, Key string }

// GCPlan counts what a sweep would delete now: unreferenced blob rows older
// than the grace, and the expired uploads with the blobs only they reference.
type GCPlan struct {
	Blobs, BlobBytes                             int64
	ExpiredUploads, UploadBlobs, UploadBlobBytes int64
}

// GCTx is one short GC transaction of a metadata engine.
type GCTx interface {
	// TryPin takes blob id's pin exclusively, without waiting, until the
	// transaction ends; false if a stream (or a staging put) holds it.
	TryPin(ctx context.Context, id int64) (bool, error)
	// DeleteBlob deletes blob id's row, and content kept in the database
	// with it, unless anything references it (GCReferenced) or it is gone.
	DeleteBlob(ctx context.Context, id int64) (GCBlob, GCVerdict, error)
	// TryPins is TryPin for a batch: it returns the ids whose pins it took,
	// in the order of ids.
	TryPins(ctx context.Context, ids []int64) ([]int64, error)
	// DeleteBlobs is DeleteBlob for a batch of pinned ids, with the same
	// arbitration, without waiting for any lock: it returns a decision for
	// each id it decided and leaves out those it could not decide without a
	// wait, for DeleteBlob. An error that wraps ErrGCUndecided means nothing
	// was decided; the transaction is then to be rolled back.
	DeleteBlobs(ctx context.Context, ids []int64) ([]GCDecision, error)
	// ProveRowless proves that blob id has no row and none can commit while
	// the transaction lasts (GCDone), or finds one (GCReferenced).
	ProveRowless(ctx context.Context, id int64) (GCVerdict, error)
}

// StoredBlob is a blob row as fsck reads it.
type StoredBlob struct {
	ID          int64
	SHA256      []byte
	Size        int64
	Tier        string
	LargeObject *uint32 // the large object of a pglo blob
}

// Finding is a damaged reference that a metadata engine found: Where names
// the reference (object bucket/key, part, upload), Detail what is wrong.
type Finding struct{ Where, Detail string }

// BlobRef is an object, a version or an upload part that references a blob
// (what fsck's repairs list and remove after a restore).
type BlobRef struct {
	BlobID      int64
	Bucket, Key string // an object (whole or one of its parts)
	UploadID    string // an upload part instead ("" for objects)
	Part        int    // the part number, 0 for a whole object
	VersionID   string // a noncurrent version of the object ("" for the current one)
}
