package store

import "context"

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
