package protocol

import (
	"context"
	"fmt"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// deleteBatch bounds the keys, and so the object locks, of one DeleteObjects
// transaction: PostgreSQL's lock table is shared by the whole server, and the
// embedded engine's writer serves everyone.
const deleteBatch = 100

// DeleteObject implements store.ObjectStore; deleting a missing key
// succeeds. The manifest rows go with the object; blobs stay for GC.
func (s *Store) DeleteObject(ctx context.Context, bucket, key string) error {
	if err := s.dialect.Autocommit().BucketExists(ctx, bucket); err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	if err := s.deleteBatch(ctx, bucket, []string{key}); err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	return nil
}

// DeleteObjects implements store.ObjectStore: keys are deleted in
// transactions of up to deleteBatch keys, each under its keys' object locks.
// It returns one result per key, in order.
func (s *Store) DeleteObjects(ctx context.Context, bucket string, keys []string) ([]store.DeleteResult, error) {
	if err := s.dialect.Autocommit().BucketExists(ctx, bucket); err != nil {
		return nil, fmt.Errorf("delete objects in %s: %w", bucket, err)
	}
	out := make([]store.DeleteResult, len(keys))
	for i := range keys {
		out[i].Key = keys[i]
	}
	for lo := 0; lo < len(keys); lo += deleteBatch {
		batch := keys[lo:min(lo+deleteBatch, len(keys))]
		if err := s.deleteBatch(ctx, bucket, batch); err != nil {
			// Per-key errors: the batch failed as a whole, and the request goes on.
			for i := range batch {
				out[lo+i].Err = fmt.Errorf("delete %s/%s: %w", bucket, batch[i], err)
			}
		}
	}
	return out, nil
}

func (s *Store) deleteBatch(ctx context.Context, bucket string, keys []string) error {
	locks := make([]int64, len(keys))
	for i, k := range keys {
		locks[i] = fleet.ObjectLockKey(bucket, k)
	}
	return s.dialect.Write(ctx, locks, func(tx Tx) error { return tx.DeleteObjects(ctx, bucket, keys) })
}
