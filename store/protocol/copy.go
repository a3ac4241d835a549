package protocol

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// resolveSource resolves a copy source inside tx and checks its conditions.
func resolveSource(ctx context.Context, tx Tx, src store.CopySource, withInline bool) (*Resolved, error) {
	r, err := resolve(ctx, tx, src.Bucket, src.Key, src.VersionID, withInline)
	if errors.Is(err, store.ErrDeleteMarker) {
		return nil, fmt.Errorf("copy source: %w: the source of a copy request may not specifically refer to a delete marker by version id", store.ErrInvalidRequest)
	}
	if err != nil {
		return nil, fmt.Errorf("copy source: %w", err)
	}
	if err := CopySourceConditions(src.Cond, r.Info); err != nil {
		return nil, err
	}
	return r, nil
}

// CopyObject implements store.ObjectStore as a metadata operation: the new row
// references the source's blob (or a copy of its manifest); no blob row and no
// byte is added. Source and destination are read and written in one write
// transaction under both object locks (in key order: copies A->B and B->A
// cannot deadlock, and a write to the source waits for the copy to commit).
// The destination keeps the source's checksum unless the store computed a new
// one from the source's bytes (opts.Checksum, for opts.SourceETag).
func (s *Store) CopyObject(ctx context.Context, src store.CopySource, dstBucket, dstKey string, opts store.CopyOptions) (store.ObjectInfo, error) {
	var out store.ObjectInfo
	same := src.Bucket == dstBucket && src.Key == dstKey
	keys := []int64{fleet.ObjectLockKey(src.Bucket, src.Key), fleet.ObjectLockKey(dstBucket, dstKey)}
	jp := s.jointPins()
	err := s.dialect.Write(ctx, keys, func(tx Tx) error {
		r, err := resolveSource(ctx, tx, src, false)
		if err != nil {
			return err
		}
		if opts.SourceETag != "" && r.Info.ETag != opts.SourceETag {
			return store.ErrCopySourceChanged
		}
		if same && r.Seq == 0 && !opts.ReplaceMeta && opts.Checksum == nil && opts.StorageClass == r.Info.Meta.StorageClass {
			return ErrCopyToItself
		}
		out = r.Info
		out.Bucket, out.Key, out.CopySourceVersionID = dstBucket, dstKey, r.Info.VersionID
		if opts.ReplaceMeta {
			out.Meta = opts.Meta
		}
		out.Meta.Lock = opts.Lock // a copy's lock is its own (ADR 016)
		out.Meta.StorageClass = opts.StorageClass
		if opts.Checksum != nil {
			out.Checksum = *opts.Checksum
		}
		cur, err := tx.CurrentObject(ctx, dstBucket, dstKey)
		if err != nil {
			return err
		}
		if err := CheckWriteConditions(store.PutOptions{IfMatch: opts.IfMatch, IfNoneMatch: opts.IfNoneMatch}, cur.Exists, cur.ETag); err != nil {
			return err
		}
		if same && r.Seq == 0 && !cur.demotes() {
			// The object replaces itself: its manifest is the source's.
			out.VersionID = cur.VersionID
			out.LastModified, err = tx.UpdateObjectMeta(ctx, dstBucket, dstKey, out.Meta, out.Checksum)
			return err
		}
		row := ObjectRow{Bucket: dstBucket, Key: dstKey, Size: r.Info.Size, ETag: r.Info.ETag,
			Meta: out.Meta, Checksum: out.Checksum, PartCount: len(r.Parts)}
		if r.Blob != nil {
			row.BlobID = &r.Blob.ID
		}
		w, err := writeOver(ctx, tx, cur, row, store.PutOptions{})
		if err != nil {
			return err
		}
		out.LastModified, out.VersionID = w.LastModified, w.VersionID
		if r.Parts != nil {
			srcSeq := r.Seq
			if same && srcSeq == 0 {
				srcSeq = w.demoted // the source's manifest moved with it
			}
			if err := tx.CopyManifest(ctx, src.Bucket, src.Key, srcSeq, dstBucket, dstKey); err != nil {
				return err
			}
		}
		return jp.pin(ctx, tx, r.BlobIDs()...)
	})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("copy %s/%s to %s/%s: %w", src.Bucket, src.Key, dstBucket, dstKey, err)
	}
	jp.adopt()()
	for i := range out.Parts {
		out.Parts[i].LastModified = out.LastModified
	}
	return out, nil
}

// UploadPartCopy implements store.ObjectStore. When the copied span is the
// whole of a single-blob source (and its checksum fits the upload), the part
// references the source blob: no bytes move. Otherwise the span is read and
// staged as a new blob through the ordinary put path; that read follows the
// GET order (pin, re-check, guarded stream), because the source may be
// overwritten and collected once the resolving transaction ends.
func (s *Store) UploadPartCopy(ctx context.Context, src store.CopySource, bucket, key, uploadID string, partNumber int) (store.PartInfo, error) {
	wrap := func(err error) error {
		return fmt.Errorf("upload part copy %d of %q from %s/%s: %w", partNumber, uploadID, src.Bucket, src.Key, err)
	}
	u, err := LoadUpload(ctx, s.dialect.Autocommit(), bucket, key, uploadID, false)
	if err != nil {
		return store.PartInfo{}, wrap(err)
	}
	for attempt := 1; ; attempt++ {
		pi, r, err := s.referencePart(ctx, src, u, partNumber)
		if err != nil {
			return store.PartInfo{}, wrap(err)
		}
		if r == nil {
			return pi, nil // referenced
		}
		start, n := int64(0), r.Info.Size
		if src.Range != nil {
			start, n = src.Range.Start, src.Range.End-src.Range.Start+1
		}
		// A server-side copy is not a client stream: no bandwidth governor.
		rd, vanished, err := s.Open(ctx, r, start, n, nil)
		if err != nil {
			return store.PartInfo{}, wrap(err)
		}
		if vanished {
			if attempt == ResolveAttempts {
				return store.PartInfo{}, wrap(fmt.Errorf("%w: the source was reclaimed %d times while it was opened", store.ErrUnavailable, attempt))
			}
			continue
		}
		pi, err = s.UploadPart(ctx, bucket, key, uploadID, partNumber, rd, store.PutOptions{Size: n, ChecksumAlgorithm: u.ChecksumAlgorithm})
		if cerr := rd.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close source: %w", cerr)
		}
		if err != nil {
			return store.PartInfo{}, wrap(err)
		}
		pi.CopySourceVersionID = r.Info.VersionID
		return pi, nil
	}
}

// referencePart resolves the copy source under its object lock and the
// upload's and, when the whole single-blob source can serve, writes the part
// row referencing its blob (r == nil). Otherwise it returns the resolved
// source (inline bytes included) to copy bytes from, outside the
// transaction.
func (s *Store) referencePart(ctx context.Context, src store.CopySource, u store.Upload, partNumber int) (store.PartInfo, *Resolved, error) {
	pi := store.PartInfo{Number: partNumber}
	var r *Resolved
	referenced := false
	keys := []int64{fleet.ObjectLockKey(src.Bucket, src.Key), fleet.UploadLockKey(u.UploadID)}
	jp := s.jointPins()
	err := s.dialect.Write(ctx, keys, func(tx Tx) error {
		var err error
		if r, err = resolveSource(ctx, tx, src, true); err != nil {
			return err
		}
		if rg := src.Range; rg != nil && (rg.Start >= r.Info.Size || rg.End >= r.Info.Size) {
			return fmt.Errorf("%w: range bytes=%d-%d is not valid for source object of size %d", store.ErrInvalidArgument, rg.Start, rg.End, r.Info.Size)
		}
		whole := src.Range == nil || (src.Range.Start == 0 && src.Range.End == r.Info.Size-1)
		ckFits := u.ChecksumAlgorithm == "" || strings.EqualFold(u.ChecksumAlgorithm, r.Info.Checksum.Algorithm)
		if r.Blob == nil || !whole || !ckFits {
			return nil // copy bytes, outside this transaction
		}
		pi.Size, pi.ETag, pi.CopySourceVersionID = r.Info.Size, r.Info.ETag, r.Info.VersionID
		if u.ChecksumAlgorithm != "" || r.Info.Checksum.Algorithm == store.AlgCRC64NVME { // the default a no-algorithm upload combines
			pi.Checksum = store.Checksum{Algorithm: r.Info.Checksum.Algorithm, Value: r.Info.Checksum.Value}
		}
		referenced = true
		if err := tx.PutPart(ctx, u.UploadID, &pi, r.Blob.ID); err != nil {
			return err
		}
		return jp.pin(ctx, tx, r.Blob.ID)
	})
	if err != nil {
		return store.PartInfo{}, nil, err
	}
	jp.adopt()()
	if referenced {
		return pi, nil, nil
	}
	return pi, r, nil
}
