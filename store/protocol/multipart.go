package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// LoadUpload reads an upload and checks that it belongs to bucket/key.
func LoadUpload(ctx context.Context, tx Tx, bucket, key, uploadID string, forUpdate bool) (store.Upload, error) {
	u, found, err := tx.Upload(ctx, uploadID, forUpdate)
	if err != nil {
		return store.Upload{}, fmt.Errorf("upload %q: %w", uploadID, err)
	}
	if !found || u.Bucket != bucket || u.Key != key {
		return store.Upload{}, fmt.Errorf("upload %q of %s/%s: %w", uploadID, bucket, key, store.ErrNoSuchUpload)
	}
	return u, nil
}

// CreateMultipartUpload implements store.ObjectStore.
func (s *Store) CreateMultipartUpload(ctx context.Context, bucket, key string, meta store.ObjectMeta, checksumAlg, checksumType string) (store.Upload, error) {
	u := store.Upload{Bucket: bucket, Key: key, UploadID: store.NewUploadID(), Meta: meta,
		ChecksumAlgorithm: checksumAlg, ChecksumType: checksumType}
	if err := s.dialect.Write(ctx, nil, func(tx Tx) error { return tx.CreateUpload(ctx, &u) }); err != nil {
		return store.Upload{}, fmt.Errorf("create upload %s/%s: %w", bucket, key, err)
	}
	return u, nil
}

// CompleteMultipartUpload implements store.ObjectStore: under the upload's
// and the object's locks, in one transaction, it checks the part list, writes
// the object row and its manifest from the chosen parts, and deletes the
// upload. No bytes are copied. opts carries conditional-write headers and,
// for a full-object checksum, the client's value to verify.
func (s *Store) CompleteMultipartUpload(ctx context.Context, bucket, key, uploadID string, parts []store.CompletePart, opts store.PutOptions) (store.ObjectInfo, error) {
	info := store.ObjectInfo{Bucket: bucket, Key: key}
	keys := []int64{fleet.UploadLockKey(uploadID), fleet.ObjectLockKey(bucket, key)}
	jp := s.jointPins()
	err := s.dialect.Write(ctx, keys, func(tx Tx) error {
		u, err := LoadUpload(ctx, tx, bucket, key, uploadID, true)
		if errors.Is(err, store.ErrNoSuchUpload) {
			// Read under the locks: a Complete that won a race committed
			// before they were granted, and this sees it.
			info, err = RepeatedComplete(uploadID, parts, opts,
				func() (store.ObjectInfo, error) {
					r, err := tx.Resolve(ctx, bucket, key, false)
					if err != nil {
						return store.ObjectInfo{}, err
					}
					return r.Info, nil
				},
				func() error { return tx.BucketExists(ctx, bucket) })
			return err
		}
		if err != nil {
			return err
		}
		stored, err := tx.ListParts(ctx, uploadID, 0, -1)
		if err != nil {
			return err
		}
		have := make(map[int]store.PartInfo, len(stored))
		blobs := make(map[int]int64, len(stored))
		for _, p := range stored {
			have[p.Number], blobs[p.Number] = p.PartInfo, p.BlobID
		}
		chosen, err := store.CheckCompleteParts(parts, have)
		if err != nil {
			return err
		}
		ck, err := CompleteChecksum(u, parts, chosen, opts)
		if err != nil {
			return err
		}
		manifest := make([]PartRow, len(chosen))
		var size int64
		for i, p := range chosen {
			manifest[i] = PartRow{PartInfo: p, BlobID: blobs[p.Number], Start: size}
			size += p.Size
		}
		meta := u.Meta
		meta.CompletedUpload = uploadID // remembered for a repeated Complete
		info.Size, info.ETag, info.Checksum, info.Meta = size, store.MultipartETag(chosen), ck, meta
		w, err := WriteObject(ctx, tx, ObjectRow{Bucket: bucket, Key: key, Size: size, ETag: info.ETag,
			Meta: meta, Checksum: ck, PartCount: len(chosen)}, opts)
		if err != nil {
			return err
		}
		lm := w.LastModified
		info.LastModified, info.VersionID = lm, w.VersionID
		if err := tx.WriteManifest(ctx, bucket, key, uploadID, manifest); err != nil {
			return err
		}
		if _, err := tx.DeleteUpload(ctx, bucket, key, uploadID); err != nil {
			return err
		}
		ids := make([]int64, len(manifest))
		for i, p := range manifest {
			ids[i] = p.BlobID
		}
		if err := jp.pin(ctx, tx, ids...); err != nil {
			return err
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
	jp.adopt()()
	return info, nil
}

// AbortMultipartUpload implements store.ObjectStore, under the upload's
// lock. The parts' blobs stay for GC.
func (s *Store) AbortMultipartUpload(ctx context.Context, bucket, key, uploadID string) error {
	err := s.dialect.Write(ctx, []int64{fleet.UploadLockKey(uploadID)}, func(tx Tx) error {
		deleted, err := tx.DeleteUpload(ctx, bucket, key, uploadID)
		if err == nil && !deleted {
			err = store.ErrNoSuchUpload
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("abort %q of %s/%s: %w", uploadID, bucket, key, err)
	}
	return nil
}

// ListParts implements store.ObjectStore. maxParts 0 means 1000. The upload
// and its parts are read in one snapshot.
func (s *Store) ListParts(ctx context.Context, bucket, key, uploadID string, partMarker, maxParts int) (store.ListPartsResult, error) {
	if maxParts <= 0 || maxParts > store.MaxListKeys {
		maxParts = store.MaxListKeys
	}
	var res store.ListPartsResult
	err := s.dialect.Read(ctx, func(tx Tx) error {
		u, err := LoadUpload(ctx, tx, bucket, key, uploadID, false)
		if err != nil {
			return err
		}
		res.Upload = u
		rows, err := tx.ListParts(ctx, uploadID, partMarker, maxParts+1)
		for _, p := range rows {
			res.Parts = append(res.Parts, p.PartInfo)
		}
		return err
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
