package embedded

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// UploadPartCopy implements store.ObjectStore. When the copied span is the
// whole of a single-blob source (and its checksum fits the upload), the part
// references the source blob: no bytes move. Otherwise the span is read and
// staged as a new blob through the ordinary put path.
func (e *Engine) UploadPartCopy(ctx context.Context, src store.CopySource, bucket, key, uploadID string, partNumber int) (store.PartInfo, error) {
	wrap := func(err error) error {
		return fmt.Errorf("upload part copy %d of %q from %s/%s: %w", partNumber, uploadID, src.Bucket, src.Key, err)
	}
	u, err := protocol.LoadUpload(ctx, dialect{e}.Autocommit(), bucket, key, uploadID, false)
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
