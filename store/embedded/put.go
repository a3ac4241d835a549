package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

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
func writeObject(ctx context.Context, tx *sql.Tx, o objectRow, opts store.PutOptions) (time.Time, error) {
	return protocol.WriteObject(ctx, txn{q: tx}, protocol.ObjectRow{Bucket: o.bucket, Key: o.key,
		BlobID: o.blobID, Size: o.size, ETag: o.etag, Meta: o.meta, Checksum: o.checksum, PartCount: o.partCount}, opts)
}

// checksumArg stores an empty checksum as NULL, others as JSON.
func checksumArg(c store.Checksum) (any, error) {
	if c.Algorithm == "" {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode checksum: %w", err)
	}
	return string(b), nil
}

// parseChecksum decodes a checksum column.
func parseChecksum(s sql.NullString) (store.Checksum, error) {
	var c store.Checksum
	if !s.Valid || s.String == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(s.String), &c); err != nil {
		return c, fmt.Errorf("decode checksum: %w", err)
	}
	return c, nil
}

// parseMeta decodes a meta column.
func parseMeta(s string) (store.ObjectMeta, error) {
	var m store.ObjectMeta
	if s == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return m, fmt.Errorf("decode metadata: %w", err)
	}
	return m, nil
}
