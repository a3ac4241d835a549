package embedded

import (
	"context"
	"database/sql"
	"fmt"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// Bucket configuration documents (store.BucketConfigStore), read uncached
// like access keys.

var _ store.BucketConfigStore = (*Engine)(nil)

// BucketConfigs implements store.BucketConfigStore: one statement reads the
// bucket's existence and its documents.
func (e *Engine) BucketConfigs(ctx context.Context, bucket string) (map[string]string, error) {
	rows, err := e.rq.QueryContext(ctx, `SELECT c.name, c.value FROM buckets b
		LEFT JOIN bucket_configs c ON c.bucket = b.name WHERE b.name = ?`, bucket)
	if err != nil {
		return nil, fmt.Errorf("bucket configs %q: %w", bucket, mapErr(err))
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	out := map[string]string{}
	found := false
	for rows.Next() {
		var name, value sql.NullString
		if err := rows.Scan(&name, &value); err != nil {
			return nil, fmt.Errorf("bucket configs %q: %w", bucket, err)
		}
		found = true
		if name.Valid {
			out[name.String] = value.String
		}
	}
	if err := rows.Err(); err != nil {
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
	err := e.withWrite(ctx, func(tx txQuerier) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO bucket_configs (bucket, name, value, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (bucket, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
			bucket, name, value, toMicros(now()))
		return err
	})
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
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
	err := e.withWrite(ctx, func(tx txQuerier) error {
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM buckets WHERE name = ?)`, bucket).Scan(&exists); err != nil || !exists {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM bucket_configs WHERE bucket = ? AND name = ?`, bucket, name)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		deleted = n > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("delete bucket config %q of %q: %w", name, bucket, mapErr(err))
	}
	if !exists {
		return false, fmt.Errorf("delete bucket config %q of %q: %w", name, bucket, store.ErrNoSuchBucket)
	}
	return deleted, nil
}
