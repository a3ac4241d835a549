package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/protocol"
)

// CreateMultipartUpload implements store.ObjectStore.
func (e *Engine) CreateMultipartUpload(ctx context.Context, bucket, key string, meta store.ObjectMeta, checksumAlg, checksumType string) (store.Upload, error) {
	u := store.Upload{Bucket: bucket, Key: key, UploadID: store.NewUploadID(), Meta: meta,
		ChecksumAlgorithm: checksumAlg, ChecksumType: checksumType}
	err := e.pool.QueryRow(ctx, `INSERT INTO uploads (upload_id, bucket, key, meta, checksum_alg, checksum_type)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING initiated`,
		u.UploadID, bucket, key, meta, checksumAlg, checksumType).Scan(&u.Initiated)
	if isFKViolation(err, "uploads_bucket_fkey") {
		err = store.ErrNoSuchBucket
	}
	if err != nil {
		return store.Upload{}, fmt.Errorf("create upload %s/%s: %w", bucket, key, mapErr(err))
	}
	return u, nil
}

// loadUpload is protocol.LoadUpload on q (the pool or a transaction).
func loadUpload(ctx context.Context, q content.Querier, bucket, key, uploadID string, forUpdate bool) (store.Upload, error) {
	return protocol.LoadUpload(ctx, &txn{q: q}, bucket, key, uploadID, forUpdate)
}

// UploadPart implements store.ObjectStore (protocol.Store.UploadPart).
func (e *Engine) UploadPart(ctx context.Context, bucket, key, uploadID string, partNumber int, body io.Reader, opts store.PutOptions) (store.PartInfo, error) {
	return e.proto.UploadPart(ctx, bucket, key, uploadID, partNumber, body, opts)
}

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
	u, err := loadUpload(ctx, e.pool, bucket, key, uploadID, false)
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

// uploadPart is a stored part with its blob.
type uploadPart struct {
	store.PartInfo
	blobID int64
}

// CompleteMultipartUpload implements store.ObjectStore: under the upload's and
// the object's locks, in one transaction, it checks the part list, writes the
// object row and its manifest from the chosen parts, and deletes the upload.
// No bytes are copied. opts carries conditional-write headers and, for a
// full-object checksum, the client's value to verify.
func (e *Engine) CompleteMultipartUpload(ctx context.Context, bucket, key, uploadID string, parts []store.CompletePart, opts store.PutOptions) (store.ObjectInfo, error) {
	info := store.ObjectInfo{Bucket: bucket, Key: key}
	err := e.withTx(ctx, func(tx pgx.Tx) error {
		if err := lockXact(ctx, tx, uploadLockKey(uploadID), objectLockKey(bucket, key)); err != nil {
			return err
		}
		u, err := loadUpload(ctx, tx, bucket, key, uploadID, true)
		if errors.Is(err, store.ErrNoSuchUpload) {
			// Read after the locks: a Complete that won a race committed
			// before they were granted, and this statement sees it.
			info, err = e.repeatedComplete(ctx, tx, bucket, key, uploadID, parts, opts)
			return err
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT part_number, size, etag, checksum, last_modified, blob_id
			FROM upload_parts WHERE upload_id = $1`, uploadID)
		if err != nil {
			return fmt.Errorf("read parts: %w", mapErr(err))
		}
		have := map[int]store.PartInfo{}
		blobs := map[int]int64{}
		for rows.Next() {
			var p uploadPart
			var ck *store.Checksum
			if err := rows.Scan(&p.Number, &p.Size, &p.ETag, &ck, &p.LastModified, &p.blobID); err != nil {
				rows.Close()
				return fmt.Errorf("read parts: %w", err)
			}
			if ck != nil {
				p.Checksum = *ck
			}
			have[p.Number] = p.PartInfo
			blobs[p.Number] = p.blobID
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read parts: %w", mapErr(err))
		}
		chosen, err := store.CheckCompleteParts(parts, have)
		if err != nil {
			return err
		}
		ck, err := protocol.CompleteChecksum(u, parts, chosen, opts)
		if err != nil {
			return err
		}
		nums := make([]int32, len(chosen))
		starts := make([]int64, len(chosen))
		var size int64
		for i, p := range chosen {
			nums[i], starts[i] = int32(p.Number), size
			size += p.Size
		}
		meta := u.Meta
		meta.CompletedUpload = uploadID // remembered for a repeated Complete
		info.Size, info.ETag, info.Checksum, info.Meta = size, store.MultipartETag(chosen), ck, meta
		lm, err := writeObject(ctx, tx, objectRow{bucket: bucket, key: key, size: size, etag: info.ETag,
			meta: meta, checksum: ck, partCount: len(chosen)}, opts)
		if err != nil {
			return err
		}
		info.LastModified = lm
		if _, err := tx.Exec(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
			SELECT $1, $2, p.part_number, p.blob_id, p.size, x.start, p.etag, p.checksum
			FROM upload_parts p JOIN unnest($4::int[], $5::bigint[]) AS x (n, start) ON x.n = p.part_number
			WHERE p.upload_id = $3`, bucket, key, uploadID, nums, starts); err != nil {
			return fmt.Errorf("write manifest: %w", mapErr(err))
		}
		if _, err := tx.Exec(ctx, `DELETE FROM uploads WHERE upload_id = $1`, uploadID); err != nil {
			return fmt.Errorf("delete upload: %w", mapErr(err))
		}
		info.Parts = make([]store.PartInfo, len(chosen))
		for i, p := range chosen {
			info.Parts[i] = store.PartInfo{Number: p.Number, Size: p.Size, ETag: p.ETag, Checksum: p.Checksum, LastModified: lm}
		}
		return nil
	})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("complete %q of %s/%s: %w", uploadID, bucket, key, err)
	}
	return info, nil
}

// repeatedComplete is protocol.RepeatedComplete in this engine's dialect.
func (e *Engine) repeatedComplete(ctx context.Context, tx pgx.Tx, bucket, key, uploadID string, parts []store.CompletePart, opts store.PutOptions) (store.ObjectInfo, error) {
	return protocol.RepeatedComplete(uploadID, parts, opts,
		func() (store.ObjectInfo, error) {
			r, err := resolveObject(ctx, tx, bucket, key, false, false)
			if err != nil {
				return store.ObjectInfo{}, err
			}
			return r.info, nil
		},
		func() error { return e.bucketExists(ctx, tx, bucket) })
}

// AbortMultipartUpload implements store.ObjectStore. The parts' blobs stay for
// GC.
func (e *Engine) AbortMultipartUpload(ctx context.Context, bucket, key, uploadID string) error {
	err := e.withTx(ctx, func(tx pgx.Tx) error {
		if err := lockXact(ctx, tx, uploadLockKey(uploadID)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM uploads WHERE upload_id = $1 AND bucket = $2 AND key = $3`, uploadID, bucket, key)
		if err != nil {
			return mapErr(err)
		}
		if tag.RowsAffected() == 0 {
			return store.ErrNoSuchUpload
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("abort %q of %s/%s: %w", uploadID, bucket, key, err)
	}
	return nil
}

// ListParts implements store.ObjectStore. maxParts 0 means 1000.
func (e *Engine) ListParts(ctx context.Context, bucket, key, uploadID string, partMarker, maxParts int) (store.ListPartsResult, error) {
	if maxParts <= 0 || maxParts > store.MaxListKeys {
		maxParts = store.MaxListKeys
	}
	var res store.ListPartsResult
	// One read-only transaction: the upload and its parts from one snapshot.
	err := e.withTx(ctx, func(tx pgx.Tx) error {
		u, err := loadUpload(ctx, tx, bucket, key, uploadID, false)
		if err != nil {
			return err
		}
		res.Upload = u
		rows, err := tx.Query(ctx, `SELECT part_number, size, etag, checksum, last_modified FROM upload_parts
			WHERE upload_id = $1 AND part_number > $2 ORDER BY part_number LIMIT $3`, uploadID, partMarker, maxParts+1)
		if err != nil {
			return fmt.Errorf("list parts: %w", mapErr(err))
		}
		res.Parts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.PartInfo, error) {
			var p store.PartInfo
			var ck *store.Checksum
			var lm time.Time
			err := r.Scan(&p.Number, &p.Size, &p.ETag, &ck, &lm)
			p.LastModified = lm
			if ck != nil {
				p.Checksum = *ck
			}
			return p, err
		})
		if err != nil {
			return fmt.Errorf("list parts: %w", mapErr(err))
		}
		return nil
	})
	if err != nil {
		return store.ListPartsResult{}, fmt.Errorf("list parts of %q: %w", uploadID, err)
	}
	if len(res.Parts) > maxParts {
		res.Parts = res.Parts[:maxParts]
		res.Truncated = true
		res.NextPartNumberMarker = res.Parts[maxParts-1].Number
	}
	return res, nil
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
