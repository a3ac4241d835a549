package pg

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
)

// deleteBatch bounds the advisory locks one DeleteObjects transaction takes
// (the lock table is shared by the whole server).
const deleteBatch = 100

// DeleteObject implements store.ObjectStore; deleting a missing key succeeds.
// The manifest rows go with the object (ON DELETE CASCADE); blobs stay for GC.
func (e *Engine) DeleteObject(ctx context.Context, bucket, key string) error {
	if err := e.bucketExists(ctx, e.pool, bucket); err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	err := e.withTx(ctx, func(tx pgx.Tx) error {
		if err := lockXact(ctx, tx, objectLockKey(bucket, key)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM objects WHERE bucket = $1 AND key = $2`, bucket, key); err != nil {
			return mapErr(err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	return nil
}

// DeleteObjects implements store.ObjectStore: keys are deleted in
// transactions of up to deleteBatch keys, each taking its object locks in
// ascending order. It returns one result per key, in order.
func (e *Engine) DeleteObjects(ctx context.Context, bucket string, keys []string) ([]store.DeleteResult, error) {
	if err := e.bucketExists(ctx, e.pool, bucket); err != nil {
		return nil, fmt.Errorf("delete objects in %s: %w", bucket, err)
	}
	out := make([]store.DeleteResult, len(keys))
	for i := range keys {
		out[i].Key = keys[i]
	}
	for lo := 0; lo < len(keys); lo += deleteBatch {
		batch := keys[lo:min(lo+deleteBatch, len(keys))]
		locks := make([]int64, len(batch))
		for i, k := range batch {
			locks[i] = objectLockKey(bucket, k)
		}
		sort.Slice(locks, func(i, j int) bool { return locks[i] < locks[j] })
		err := e.withTx(ctx, func(tx pgx.Tx) error {
			if err := lockXact(ctx, tx, locks...); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM objects WHERE bucket = $1 AND key = ANY($2)`, bucket, batch); err != nil {
				return mapErr(err)
			}
			return nil
		})
		if err != nil {
			// Per-key errors: the batch failed as a whole, and the request goes on.
			for i := range batch {
				out[lo+i].Err = fmt.Errorf("delete %s/%s: %w", bucket, batch[i], err)
			}
		}
	}
	return out, nil
}
