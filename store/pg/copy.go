package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// CopyObject implements store.ObjectStore as a metadata operation: the new row
// references the source's blob (or a copy of its manifest). Source and
// destination are read and written in one transaction under both object locks.
// The destination keeps the source's checksum unless the store computed a new
// one from the source's bytes (opts.Checksum, for opts.SourceETag).
func (e *Engine) CopyObject(ctx context.Context, src store.CopySource, dstBucket, dstKey string, opts store.CopyOptions) (store.ObjectInfo, error) {
	var out store.ObjectInfo
	same := src.Bucket == dstBucket && src.Key == dstKey
	err := e.withTx(ctx, func(tx pgx.Tx) error {
		// Both locks, in key order: copies A->B and B->A cannot deadlock, and a
		// concurrent write to the source waits for the copy to commit.
		if err := lockXact(ctx, tx, objectLockKey(src.Bucket, src.Key), objectLockKey(dstBucket, dstKey)); err != nil {
			return err
		}
		r, err := resolveObject(ctx, tx, src.Bucket, src.Key, false, true)
		if errors.Is(err, store.ErrNoSuchKey) {
			if berr := e.bucketExists(ctx, tx, src.Bucket); berr != nil {
				return fmt.Errorf("copy source: %w", berr)
			}
			return fmt.Errorf("copy source: %w", store.ErrNoSuchKey)
		}
		if err != nil {
			return err
		}
		if err := protocol.CopySourceConditions(src.Cond, r.info); err != nil {
			return err
		}
		if opts.SourceETag != "" && r.info.ETag != opts.SourceETag {
			return store.ErrCopySourceChanged
		}
		if same && !opts.ReplaceMeta && opts.Checksum == nil {
			return protocol.ErrCopyToItself
		}
		out = r.info
		out.Bucket, out.Key = dstBucket, dstKey
		if opts.ReplaceMeta {
			out.Meta = opts.Meta
		}
		if opts.Checksum != nil {
			out.Checksum = *opts.Checksum
		}
		if same {
			var lm time.Time
			if err := tx.QueryRow(ctx, `UPDATE objects SET meta = $3, checksum = $4, last_modified = clock_timestamp()
				WHERE bucket = $1 AND key = $2 RETURNING last_modified`, dstBucket, dstKey, out.Meta, checksumArg(out.Checksum)).Scan(&lm); err != nil {
				return fmt.Errorf("update metadata: %w", mapErr(err))
			}
			out.LastModified = lm
			return nil
		}
		row := objectRow{bucket: dstBucket, key: dstKey, size: r.info.Size, etag: r.info.ETag,
			meta: out.Meta, checksum: out.Checksum, partCount: len(r.parts)}
		if r.blob != nil {
			row.blobID = &r.blob.ID
		}
		lm, err := writeObject(ctx, tx, row, store.PutOptions{})
		if err != nil {
			return err
		}
		out.LastModified = lm
		if r.parts != nil {
			if _, err := tx.Exec(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
				SELECT $3, $4, part_number, blob_id, size, start_offset, etag, checksum
				FROM object_parts WHERE bucket = $1 AND key = $2`, src.Bucket, src.Key, dstBucket, dstKey); err != nil {
				return fmt.Errorf("copy manifest: %w", mapErr(err))
			}
		}
		return nil
	})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("copy %s/%s to %s/%s: %w", src.Bucket, src.Key, dstBucket, dstKey, err)
	}
	for i := range out.Parts {
		out.Parts[i].LastModified = out.LastModified
	}
	return out, nil
}
