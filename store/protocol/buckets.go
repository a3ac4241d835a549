package protocol

import (
	"context"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// DeleteBucket implements store.ObjectStore: a bucket with objects is
// ErrBucketNotEmpty; in-progress multipart uploads go with the bucket, in the
// same transaction, as on S3 (their part rows go with them, GC reclaims the
// part blobs as after an abort).
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	err := s.dialect.Write(ctx, nil, func(tx Tx) error {
		exists, hasObjects, err := tx.BucketState(ctx, name)
		switch {
		case err != nil:
			return err
		case !exists:
			return store.ErrNoSuchBucket
		case hasObjects:
			return store.ErrBucketNotEmpty
		}
		if err := tx.DeleteUploads(ctx, name); err != nil {
			return err
		}
		return tx.DeleteBucket(ctx, name)
	})
	if err != nil {
		return fmt.Errorf("delete bucket %q: %w", name, err)
	}
	return nil
}

// CheckBucketConfig is the rule the engines apply before storing a bucket
// configuration document: a known name, and a value within the largest
// document any configuration may have (1 MiB; s3api applies each
// configuration's own, smaller limit).
func CheckBucketConfig(name, value string) error {
	switch name {
	case store.BucketConfigPolicy, store.BucketConfigPublicAccessBlock:
	default:
		return fmt.Errorf("%w: unknown bucket configuration %q", store.ErrInvalidArgument, name)
	}
	if len(value) > 1<<20 {
		return fmt.Errorf("%w: bucket configuration %q of %d bytes", store.ErrInvalidArgument, name, len(value))
	}
	return nil
}
