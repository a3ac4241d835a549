package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// resolveSource resolves a copy source inside a transaction, telling a
// missing bucket from a missing key.
func resolveSource(ctx context.Context, tx *sql.Tx, src store.CopySource) (*resolved, error) {
	r, err := resolveObject(ctx, tx, src.Bucket, src.Key)
	if errors.Is(err, store.ErrNoSuchKey) {
		return nil, fmt.Errorf("copy source: %w", missErr(ctx, tx, src.Bucket))
	}
	if err != nil {
		return nil, err
	}
	if err := protocol.CopySourceConditions(src.Cond, r.info); err != nil {
		return nil, err
	}
	return r, nil
}

// CopyObject implements store.ObjectStore as a metadata operation: the new row
// references the source's blob (or a copy of its manifest); no blob row and no
// byte is added. Source and destination are read and written in one write
// transaction under both object locks. The destination keeps the source's
// checksum unless the store computed a new one from the source's bytes
// (opts.Checksum, for opts.SourceETag).
func (e *Engine) CopyObject(ctx context.Context, src store.CopySource, dstBucket, dstKey string, opts store.CopyOptions) (store.ObjectInfo, error) {
	var out store.ObjectInfo
	same := src.Bucket == dstBucket && src.Key == dstKey
	unlock, err := e.locks.lock(ctx, objectLockKey(src.Bucket, src.Key), objectLockKey(dstBucket, dstKey))
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("copy %s/%s to %s/%s: %w", src.Bucket, src.Key, dstBucket, dstKey, err)
	}
	defer unlock()
	err = e.withWrite(ctx, func(tx *sql.Tx) error {
		r, err := resolveSource(ctx, tx, src)
		if err != nil {
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
			meta, err := json.Marshal(out.Meta)
			if err != nil {
				return fmt.Errorf("encode metadata: %w", err)
			}
			ck, err := checksumArg(out.Checksum)
			if err != nil {
				return err
			}
			lm := now()
			if _, err := tx.ExecContext(ctx, `UPDATE objects SET meta = ?, checksum = ?, last_modified = ? WHERE bucket = ? AND key = ?`,
				string(meta), ck, toMicros(lm), dstBucket, dstKey); err != nil {
				return fmt.Errorf("update metadata: %w", mapErr(err))
			}
			out.LastModified = lm
			return nil
		}
		row := objectRow{bucket: dstBucket, key: dstKey, size: r.info.Size, etag: r.info.ETag,
			meta: out.Meta, checksum: out.Checksum, partCount: len(r.parts)}
		if r.single != nil {
			row.blobID = &r.single.blobID
		}
		lm, err := writeObject(ctx, tx, row, store.PutOptions{})
		if err != nil {
			return err
		}
		out.LastModified = lm
		if r.parts != nil {
			if _, err := tx.ExecContext(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
				SELECT ?, ?, part_number, blob_id, size, start_offset, etag, checksum
				FROM object_parts WHERE bucket = ? AND key = ?`, dstBucket, dstKey, src.Bucket, src.Key); err != nil {
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
