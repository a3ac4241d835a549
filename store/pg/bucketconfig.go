package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// Bucket configuration documents (store.BucketConfigStore): one autocommit
// statement each, so a change is visible to every instance at once.

var _ store.BucketConfigStore = (*Engine)(nil)

// BucketConfigs implements store.BucketConfigStore: one statement reads the
// bucket's existence and its documents.
func (e *Engine) BucketConfigs(ctx context.Context, bucket string) (map[string]string, error) {
	rows, err := e.pool.Query(ctx, `SELECT c.name, c.value FROM buckets b
		LEFT JOIN bucket_configs c ON c.bucket = b.name WHERE b.name = $1`, bucket)
	if err != nil {
		return nil, fmt.Errorf("bucket configs %q: %w", bucket, mapErr(err))
	}
	out := map[string]string{}
	found := false
	var name, value *string
	_, err = pgx.ForEachRow(rows, []any{&name, &value}, func() error {
		found = true
		if name != nil {
			out[*name] = *value
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bucket configs %q: %w", bucket, mapErr(err))
	}
	if !found {
		return nil, fmt.Errorf("bucket configs %q: %w", bucket, store.ErrNoSuchBucket)
	}
	return out, nil
}

// PutBucketConfig implements store.BucketConfigStore.
func (e *Engine) PutBucketConfig(ctx context.Context, bucket, name, value string) error {
	if err := protocol.CheckBucketConfig(name, value); err != nil {
		return err
	}
	_, err := e.pool.Exec(ctx, `INSERT INTO bucket_configs (bucket, name, value) VALUES ($1, $2, $3)
		ON CONFLICT (bucket, name) DO UPDATE SET value = excluded.value, updated_at = clock_timestamp()`, bucket, name, value)
	if isFKViolation(err, "bucket_configs_bucket_fkey") {
		return fmt.Errorf("put bucket config %q of %q: %w", name, bucket, store.ErrNoSuchBucket)
	}
	if err != nil {
		return fmt.Errorf("put bucket config %q of %q: %w", name, bucket, mapErr(err))
	}
	return nil
}

// DeleteBucketConfig implements store.BucketConfigStore.
func (e *Engine) DeleteBucketConfig(ctx context.Context, bucket, name string) (bool, error) {
	var exists, deleted bool
	err := e.pool.QueryRow(ctx, `WITH d AS (DELETE FROM bucket_configs WHERE bucket = $1 AND name = $2 RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM buckets WHERE name = $1), EXISTS (SELECT 1 FROM d)`, bucket, name).Scan(&exists, &deleted)
	if err != nil {
		return false, fmt.Errorf("delete bucket config %q of %q: %w", name, bucket, mapErr(err))
	}
	if !exists {
		return false, fmt.Errorf("delete bucket config %q of %q: %w", name, bucket, store.ErrNoSuchBucket)
	}
	return deleted, nil
}
