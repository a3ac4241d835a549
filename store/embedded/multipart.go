package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// CreateMultipartUpload implements store.ObjectStore.
func (e *Engine) CreateMultipartUpload(ctx context.Context, bucket, key string, meta store.ObjectMeta, checksumAlg, checksumType string) (store.Upload, error) {
	u := store.Upload{Bucket: bucket, Key: key, UploadID: store.NewUploadID(), Meta: meta,
		ChecksumAlgorithm: checksumAlg, ChecksumType: checksumType, Initiated: now()}
	mj, err := json.Marshal(meta)
	if err != nil {
		return store.Upload{}, fmt.Errorf("create upload %s/%s: encode metadata: %w", bucket, key, err)
	}
	err = e.withWrite(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO uploads (upload_id, bucket, key, meta, checksum_alg, checksum_type, initiated)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, u.UploadID, bucket, key, string(mj), checksumAlg, checksumType, toMicros(u.Initiated))
		if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
			return store.ErrNoSuchBucket
		}
		return mapErr(err)
	})
	if err != nil {
		return store.Upload{}, fmt.Errorf("create upload %s/%s: %w", bucket, key, err)
	}
	return u, nil
}

// loadUpload is protocol.LoadUpload on q (the reader pool or a transaction).
func loadUpload(ctx context.Context, q querier, bucket, key, uploadID string) (store.Upload, error) {
	return protocol.LoadUpload(ctx, txn{q: q}, bucket, key, uploadID, false)
}

// UploadPart implements store.ObjectStore (protocol.Store.UploadPart).
func (e *Engine) UploadPart(ctx context.Context, bucket, key, uploadID string, partNumber int, body io.Reader, opts store.PutOptions) (store.PartInfo, error) {
	return e.proto.UploadPart(ctx, bucket, key, uploadID, partNumber, body, opts)
}

// UploadPartCopy implements store.ObjectStore. When the copied span is the
// whole of a single-blob source (and its checksum fits the upload), the part
// references the source blob: no bytes move. Otherwise the span is read and
// staged as a new blob through the ordinary put path.
func (e *Engine) UploadPartCopy(ctx context.Context, src store.CopySource, bucket, key, uploadID string, partNumber int) (store.PartInfo, error) {
	wrap := func(err error) error {
		return fmt.Errorf("upload part copy %d of %q from %s/%s: %w", partNumber, uploadID, src.Bucket, src.Key, err)
	}
	u, err := loadUpload(ctx, e.rdb, bucket, key, uploadID)
	if err != nil {
		return store.PartInfo{}, wrap(err)
	}
	for attempt := 1; ; attempt++ {
		pi, segs, n, err := e.referencePart(ctx, src, u, partNumber)
		if err != nil {
			return store.PartInfo{}, wrap(err)
		}
		if segs == nil {
			return pi, nil // referenced
		}
		rd, ok, err := e.openSegments(ctx, segs)
		if err != nil {
			return store.PartInfo{}, wrap(err)
		}
		if !ok {
			if attempt == pinRetries {
				return store.PartInfo{}, wrap(fmt.Errorf("%w: the source kept changing while it was opened", store.ErrUnavailable))
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

// referencePart resolves the copy source under the source's and the upload's
// locks and, when the whole single-blob source can serve, writes the part row
// referencing its blob. Otherwise it returns the source segments to copy
// (with inline content loaded in the same snapshot) and their length.
func (e *Engine) referencePart(ctx context.Context, src store.CopySource, u store.Upload, partNumber int) (store.PartInfo, []segment, int64, error) {
	unlock, err := e.locks.lock(ctx, objectLockKey(src.Bucket, src.Key), uploadLockKey(u.UploadID))
	if err != nil {
		return store.PartInfo{}, nil, 0, err
	}
	defer unlock()
	pi := store.PartInfo{Number: partNumber}
	var segs []segment
	var n int64
	err = e.withWrite(ctx, func(tx *sql.Tx) error {
		r, err := resolveSource(ctx, tx, src)
		if err != nil {
			return err
		}
		if rg := src.Range; rg != nil && (rg.Start >= r.info.Size || rg.End >= r.info.Size) {
			return fmt.Errorf("%w: range bytes=%d-%d is not valid for source object of size %d", store.ErrInvalidArgument, rg.Start, rg.End, r.info.Size)
		}
		whole := src.Range == nil || (src.Range.Start == 0 && src.Range.End == r.info.Size-1)
		ckFits := u.ChecksumAlgorithm == "" || strings.EqualFold(u.ChecksumAlgorithm, r.info.Checksum.Algorithm)
		if r.single != nil && whole && ckFits {
			pi.Size, pi.ETag = r.info.Size, r.info.ETag
			if u.ChecksumAlgorithm != "" || r.info.Checksum.Algorithm == store.AlgCRC64NVME { // the default a no-algorithm upload combines
				pi.Checksum = store.Checksum{Algorithm: r.info.Checksum.Algorithm, Value: r.info.Checksum.Value}
			}
			return txn{q: tx}.PutPart(ctx, u.UploadID, &pi, r.single.blobID)
		}
		start, size := int64(0), r.info.Size
		if src.Range != nil {
			start, size = src.Range.Start, src.Range.End-src.Range.Start+1
		}
		n = size
		segs = r.segments(start, size)
		if segs == nil {
			segs = []segment{} // an empty span still goes through the put path
		}
		return loadInline(ctx, tx, segs)
	})
	if err != nil {
		return store.PartInfo{}, nil, 0, err
	}
	return pi, segs, n, nil
}

// CompleteMultipartUpload implements store.ObjectStore: under the upload's and
// the object's locks, in one write transaction, it checks the part list, writes
// the object row and its manifest from the chosen parts, and deletes the
// upload. No bytes are copied. opts carries conditional-write headers and, for
// a full-object checksum, the client's value to verify.
func (e *Engine) CompleteMultipartUpload(ctx context.Context, bucket, key, uploadID string, parts []store.CompletePart, opts store.PutOptions) (store.ObjectInfo, error) {
	wrap := func(err error) error { return fmt.Errorf("complete %q of %s/%s: %w", uploadID, bucket, key, err) }
	unlock, err := e.locks.lock(ctx, uploadLockKey(uploadID), objectLockKey(bucket, key))
	if err != nil {
		return store.ObjectInfo{}, wrap(err)
	}
	defer unlock()
	info := store.ObjectInfo{Bucket: bucket, Key: key}
	err = e.withWrite(ctx, func(tx *sql.Tx) error {
		u, err := loadUpload(ctx, tx, bucket, key, uploadID)
		if errors.Is(err, store.ErrNoSuchUpload) {
			info, err = repeatedComplete(ctx, tx, bucket, key, uploadID, parts, opts)
			return err
		}
		if err != nil {
			return err
		}
		have, blobs, err := readUploadParts(ctx, tx, uploadID)
		if err != nil {
			return err
		}
		chosen, err := store.CheckCompleteParts(parts, have)
		if err != nil {
			return err
		}
		ck, err := protocol.CompleteChecksum(u, parts, chosen, opts)
		if err != nil {
			return err
		}
		var size int64
		for _, p := range chosen {
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
		info.Parts = make([]store.PartInfo, len(chosen))
		var start int64
		for i, p := range chosen {
			pck, err := checksumArg(p.Checksum)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, bucket, key, p.Number, blobs[p.Number], p.Size, start, p.ETag, pck); err != nil {
				return fmt.Errorf("write manifest: %w", mapErr(err))
			}
			start += p.Size
			info.Parts[i] = store.PartInfo{Number: p.Number, Size: p.Size, ETag: p.ETag, Checksum: p.Checksum, LastModified: lm}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM uploads WHERE upload_id = ?`, uploadID); err != nil {
			return fmt.Errorf("delete upload: %w", mapErr(err))
		}
		return nil
	})
	if err != nil {
		return store.ObjectInfo{}, wrap(err)
	}
	return info, nil
}

// repeatedComplete is protocol.RepeatedComplete in this engine's dialect.
func repeatedComplete(ctx context.Context, tx *sql.Tx, bucket, key, uploadID string, parts []store.CompletePart, opts store.PutOptions) (store.ObjectInfo, error) {
	return protocol.RepeatedComplete(uploadID, parts, opts,
		func() (store.ObjectInfo, error) {
			r, err := resolveObject(ctx, tx, bucket, key)
			if err != nil {
				return store.ObjectInfo{}, err
			}
			return r.info, nil
		},
		func() error { return bucketExists(ctx, tx, bucket) })
}

// readUploadParts reads every stored part of an upload, by number, with the
// blob each references.
func readUploadParts(ctx context.Context, tx *sql.Tx, uploadID string) (map[int]store.PartInfo, map[int]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT part_number, size, etag, checksum, last_modified, blob_id
		FROM upload_parts WHERE upload_id = ?`, uploadID)
	if err != nil {
		return nil, nil, fmt.Errorf("read parts: %w", mapErr(err))
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	have := map[int]store.PartInfo{}
	blobs := map[int]int64{}
	for rows.Next() {
		var p store.PartInfo
		var ck sql.NullString
		var lm, blobID int64
		if err := rows.Scan(&p.Number, &p.Size, &p.ETag, &ck, &lm, &blobID); err != nil {
			return nil, nil, fmt.Errorf("read parts: %w", err)
		}
		p.LastModified = fromMicros(lm)
		if p.Checksum, err = parseChecksum(ck); err != nil {
			return nil, nil, fmt.Errorf("read parts: %w", err)
		}
		have[p.Number] = p
		blobs[p.Number] = blobID
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read parts: %w", mapErr(err))
	}
	return have, blobs, nil
}

// AbortMultipartUpload implements store.ObjectStore. The parts' blobs stay for
// GC.
func (e *Engine) AbortMultipartUpload(ctx context.Context, bucket, key, uploadID string) error {
	unlock, err := e.locks.lock(ctx, uploadLockKey(uploadID))
	if err != nil {
		return fmt.Errorf("abort %q of %s/%s: %w", uploadID, bucket, key, err)
	}
	defer unlock()
	err = e.withWrite(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM uploads WHERE upload_id = ? AND bucket = ? AND key = ?`, uploadID, bucket, key)
		if err != nil {
			return mapErr(err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
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
	// One read snapshot: the upload and its parts agree.
	err := e.withRead(ctx, func(tx *sql.Tx) error {
		u, err := loadUpload(ctx, tx, bucket, key, uploadID)
		if err != nil {
			return err
		}
		res.Upload = u
		rows, err := tx.QueryContext(ctx, `SELECT part_number, size, etag, checksum, last_modified FROM upload_parts
			WHERE upload_id = ? AND part_number > ? ORDER BY part_number LIMIT ?`, uploadID, partMarker, maxParts+1)
		if err != nil {
			return fmt.Errorf("list parts: %w", mapErr(err))
		}
		defer func() { _ = rows.Close() }() // rows.Err reports what matters
		for rows.Next() {
			var p store.PartInfo
			var ck sql.NullString
			var lm int64
			if err := rows.Scan(&p.Number, &p.Size, &p.ETag, &ck, &lm); err != nil {
				return fmt.Errorf("list parts: %w", err)
			}
			p.LastModified = fromMicros(lm)
			if p.Checksum, err = parseChecksum(ck); err != nil {
				return fmt.Errorf("list parts: %w", err)
			}
			res.Parts = append(res.Parts, p)
		}
		if err := rows.Err(); err != nil {
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
	var res store.ListUploadsResult
	err := e.withRead(ctx, func(tx *sql.Tx) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		var err error
		res, err = protocol.ListUploads(p, func(c *protocol.ListCursor, tail *protocol.UploadMarker, limit int) ([]store.Upload, error) {
			cond, args := where(c, "key")
			if tail != nil {
				cond = `((` + cond + `) OR (key = ? AND (initiated, upload_id) >
					((SELECT initiated FROM uploads WHERE upload_id = ?), ?)))`
				args = append(args, tail.Key, tail.UploadID, tail.UploadID)
			}
			return scanUploads(ctx, tx, bucket, `SELECT upload_id, key, meta, checksum_alg, checksum_type, initiated FROM uploads
				WHERE bucket = ? AND `+cond+` ORDER BY key, initiated, upload_id LIMIT `+fmt.Sprint(limit),
				append([]any{bucket}, args...))
		})
		return err
	})
	if err != nil {
		return store.ListUploadsResult{}, fmt.Errorf("list uploads in %s: %w", bucket, err)
	}
	return res, nil
}

// scanUploads runs an upload listing query and reads its rows.
func scanUploads(ctx context.Context, q querier, bucket, query string, args []any) ([]store.Upload, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var out []store.Upload
	for rows.Next() {
		u := store.Upload{Bucket: bucket}
		var meta string
		var initiated int64
		if err := rows.Scan(&u.UploadID, &u.Key, &meta, &u.ChecksumAlgorithm, &u.ChecksumType, &initiated); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		u.Initiated = fromMicros(initiated)
		if u.Meta, err = parseMeta(meta); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
