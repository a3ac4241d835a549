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
