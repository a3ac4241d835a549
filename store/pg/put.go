package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// objectRow is a row of objects to write, for CopyObject (the protocol's
// puts write protocol.ObjectRow).
type objectRow struct {
	bucket, key string
	blobID      *int64 // nil for a multipart manifest
	size        int64
	etag        string
	meta        store.ObjectMeta
	checksum    store.Checksum
	partCount   int
}

// writeObject is protocol.WriteObject on tx; the caller holds the object's
// lock.
func writeObject(ctx context.Context, tx pgx.Tx, o objectRow, opts store.PutOptions) (time.Time, error) {
	return protocol.WriteObject(ctx, &txn{q: tx, tx: tx}, protocol.ObjectRow{Bucket: o.bucket, Key: o.key,
		BlobID: o.blobID, Size: o.size, ETag: o.etag, Meta: o.meta, Checksum: o.checksum, PartCount: o.partCount}, opts)
}

// checksumArg stores an empty checksum as NULL.
func checksumArg(c store.Checksum) any {
	if c.Algorithm == "" {
		return nil
	}
	return c
}
