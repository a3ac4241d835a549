package embedded

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// deleteBatch bounds the keys (and object locks) of one DeleteObjects
// transaction, so that a large request does not hold the writer for long.
const deleteBatch = 100

// DeleteObject implements store.ObjectStore; deleting a missing key succeeds.
// The manifest rows go with the object (ON DELETE CASCADE); blobs stay for GC.
func (e *Engine) DeleteObject(ctx context.Context, bucket, key string) error {
	if err := bucketExists(ctx, e.rdb, bucket); err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	unlock, err := e.locks.lock(ctx, objectLockKey(bucket, key))
	if err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	defer unlock()
	err = e.withWrite(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM objects WHERE bucket = ? AND key = ?`, bucket, key); err != nil {
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
// transactions of up to deleteBatch keys, each under its keys' object locks.
// It returns one result per key, in order.
func (e *Engine) DeleteObjects(ctx context.Context, bucket string, keys []string) ([]store.DeleteResult, error) {
	if err := bucketExists(ctx, e.rdb, bucket); err != nil {
		return nil, fmt.Errorf("delete objects in %s: %w", bucket, err)
	}
	out := make([]store.DeleteResult, len(keys))
	for i := range keys {
		out[i].Key = keys[i]
	}
	for lo := 0; lo < len(keys); lo += deleteBatch {
		batch := keys[lo:min(lo+deleteBatch, len(keys))]
		if err := e.deleteBatch(ctx, bucket, batch); err != nil {
			// Per-key errors: the batch failed as a whole, and the request goes on.
			for i := range batch {
				out[lo+i].Err = fmt.Errorf("delete %s/%s: %w", bucket, batch[i], err)
			}
		}
	}
	return out, nil
}

func (e *Engine) deleteBatch(ctx context.Context, bucket string, batch []string) error {
	locks := make([]uint64, len(batch))
	for i, k := range batch {
		locks[i] = objectLockKey(bucket, k)
	}
	unlock, err := e.locks.lock(ctx, locks...)
	if err != nil {
		return err
	}
	defer unlock()
	return e.withWrite(ctx, func(tx *sql.Tx) error {
		for _, k := range batch {
			if _, err := tx.ExecContext(ctx, `DELETE FROM objects WHERE bucket = ? AND key = ?`, bucket, k); err != nil {
				return mapErr(err)
			}
		}
		return nil
	})
}
