package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// UploadPartCopy implements store.ObjectStore. When the copied span is the
// whole of a single-blob source (and its checksum fits the upload), the part
// references the source blob: no bytes move. Otherwise the span is read and
// staged as a new blob through the ordinary put path; that read follows the
// GET order (pin, re-check, guarded stream), because the source may be
// overwritten and collected once the resolving transaction ends.
func (e *Engine) UploadPartCopy(ctx context.Context, src store.CopySource, bucket, key, uploadID string, partNumber int) (store.PartInfo, error) {
	wrap := func(err error) error {
		return fmt.Errorf("upload part copy %d of %q from %s/%s: %w", partNumber, uploadID, src.Bucket, src.Key, err)
	}
	u, err := protocol.LoadUpload(ctx, dialect{e}.Autocommit(), bucket, key, uploadID, false)
	if err != nil {
		return store.PartInfo{}, wrap(err)
	}
	for attempt := 1; ; attempt++ {
		pi, r, err := e.referencePart(ctx, src, u, partNumber)
		if err != nil {
			return store.PartInfo{}, wrap(err)
		}
		if r == nil {
			return pi, nil // referenced
		}
		start, n := int64(0), r.info.Size
		if src.Range != nil {
			start, n = src.Range.Start, src.Range.End-src.Range.Start+1
		}
		// A server-side copy is not a client stream: no bandwidth governor.
		rd, vanished, err := e.openStream(ctx, r, start, n, nil)
		if err != nil {
			return store.PartInfo{}, wrap(err)
		}
		if vanished {
			if attempt == pinAttempts {
				return store.PartInfo{}, wrap(fmt.Errorf("%w: the source was reclaimed %d times while it was opened", store.ErrUnavailable, attempt))
			}
			continue
		}
		pi, err = e.UploadPart(ctx, bucket, key, uploadID, partNumber, rd, store.PutOptions{Size: n, ChecksumAlgorithm: u.ChecksumAlgorithm})
		if cerr := rd.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close source: %w", cerr)
		}
		if err != nil {
			return store.PartInfo{}, wrap(err)
		}
		return pi, nil
	}
}

// referencePart resolves the copy source under its object lock and, when the
// whole single-blob source can serve, writes the part row referencing its
// blob (r == nil) under the upload's lock. Otherwise it returns the resolved source to copy bytes
// from, outside the transaction.
func (e *Engine) referencePart(ctx context.Context, src store.CopySource, u store.Upload, partNumber int) (store.PartInfo, *resolved, error) {
	pi := store.PartInfo{Number: partNumber}
	var r *resolved
	referenced := false
	err := e.withTx(ctx, func(tx pgx.Tx) error {
		if err := lockXact(ctx, tx, objectLockKey(src.Bucket, src.Key), uploadLockKey(u.UploadID)); err != nil {
			return err
		}
		var err error
		r, err = resolveObject(ctx, tx, src.Bucket, src.Key, false, true)
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
		if rg := src.Range; rg != nil && (rg.Start >= r.info.Size || rg.End >= r.info.Size) {
			return fmt.Errorf("%w: range bytes=%d-%d is not valid for source object of size %d", store.ErrInvalidArgument, rg.Start, rg.End, r.info.Size)
		}
		whole := src.Range == nil || (src.Range.Start == 0 && src.Range.End == r.info.Size-1)
		ckFits := u.ChecksumAlgorithm == "" || strings.EqualFold(u.ChecksumAlgorithm, r.info.Checksum.Algorithm)
		if r.blob == nil || !whole || !ckFits {
			return nil // copy bytes, outside this transaction
		}
		pi.Size, pi.ETag = r.info.Size, r.info.ETag
		if u.ChecksumAlgorithm != "" || r.info.Checksum.Algorithm == store.AlgCRC64NVME { // the default a no-algorithm upload combines
			pi.Checksum = store.Checksum{Algorithm: r.info.Checksum.Algorithm, Value: r.info.Checksum.Value}
		}
		referenced = true
		return (&txn{q: tx, tx: tx}).PutPart(ctx, u.UploadID, &pi, r.blob.ID)
	})
	if err != nil {
		return store.PartInfo{}, nil, err
	}
	if referenced {
		return pi, nil, nil
	}
	return pi, r, nil
}

// ListMultipartUploads implements store.ObjectStore. Uploads are ordered by
// key, then initiation time (then id); uploads and common prefixes count
// together towards MaxUploads.
func (e *Engine) ListMultipartUploads(ctx context.Context, bucket string, p store.ListUploadsParams) (store.ListUploadsResult, error) {
	if err := e.bucketExists(ctx, e.pool, bucket); err != nil {
		return store.ListUploadsResult{}, fmt.Errorf("list uploads in %s: %w", bucket, err)
	}
	res, err := protocol.ListUploads(p, func(c *protocol.ListCursor, tail *protocol.UploadMarker, limit int) ([]store.Upload, error) {
		cond, args := where(c, "key", 2)
		if tail != nil {
			cond = fmt.Sprintf(`((%s) OR (key = $%d AND (initiated, upload_id) >
				((SELECT initiated FROM uploads WHERE upload_id = $%d), $%d)))`, cond, len(args)+2, len(args)+3, len(args)+3)
			args = append(args, tail.Key, tail.UploadID)
		}
		rows, err := e.pool.Query(ctx, `SELECT upload_id, key, meta, checksum_alg, checksum_type, initiated FROM uploads
			WHERE bucket = $1 AND `+cond+` ORDER BY key, initiated, upload_id LIMIT `+fmt.Sprint(limit),
			append([]any{bucket}, args...)...)
		if err != nil {
			return nil, mapErr(err)
		}
		batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Upload, error) {
			u := store.Upload{Bucket: bucket}
			err := r.Scan(&u.UploadID, &u.Key, &u.Meta, &u.ChecksumAlgorithm, &u.ChecksumType, &u.Initiated)
			return u, err
		})
		if err != nil {
			return nil, mapErr(err)
		}
		return batch, nil
	})
	if err != nil {
		return res, fmt.Errorf("list uploads in %s: %w", bucket, err)
	}
	return res, nil
}
