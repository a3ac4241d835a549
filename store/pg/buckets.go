package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg/content"
)

// ListBuckets implements store.ObjectStore.
func (e *Engine) ListBuckets(ctx context.Context) ([]store.Bucket, error) {
	rows, err := e.pool.Query(ctx, `SELECT name, region, created_at FROM buckets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list buckets: %w", mapErr(err))
	}
	bs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Bucket, error) {
		var b store.Bucket
		err := r.Scan(&b.Name, &b.Region, &b.CreatedAt)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("list buckets: %w", mapErr(err))
	}
	return bs, nil
}

// CreateBucket implements store.ObjectStore. region "" means the engine's
// default region.
func (e *Engine) CreateBucket(ctx context.Context, name, region string) error {
	if region == "" {
		region = e.region
	}
	tag, err := e.pool.Exec(ctx, `INSERT INTO buckets (name, region) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, region)
	if err != nil {
		return fmt.Errorf("create bucket %q: %w", name, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create bucket %q: %w", name, store.ErrBucketExists)
	}
	return nil
}

// HeadBucket implements store.ObjectStore.
func (e *Engine) HeadBucket(ctx context.Context, name string) (store.Bucket, error) {
	b := store.Bucket{Name: name}
	err := e.pool.QueryRow(ctx, `SELECT region, created_at FROM buckets WHERE name = $1`, name).Scan(&b.Region, &b.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Bucket{}, fmt.Errorf("bucket %q: %w", name, store.ErrNoSuchBucket)
	}
	if err != nil {
		return store.Bucket{}, fmt.Errorf("head bucket %q: %w", name, mapErr(err))
	}
	return b, nil
}

// BucketState implements protocol.Tx.
func (t *txn) BucketState(ctx context.Context, name string) (exists, hasObjects bool, err error) {
	if err := t.q.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM buckets WHERE name = $1),
			EXISTS (SELECT 1 FROM objects WHERE bucket = $1) OR EXISTS (SELECT 1 FROM object_versions WHERE bucket = $1)`, name).Scan(&exists, &hasObjects); err != nil {
		return false, false, mapErr(err)
	}
	return exists, hasObjects, nil
}

// DeleteUploads implements protocol.Tx. Row locks arbitrate the races of
// DeleteBucket: the DELETE of an upload row waits for a Complete that holds
// it FOR UPDATE and for a part write whose foreign-key check holds it FOR KEY
// SHARE; a part written after the delete fails its foreign key
// (NoSuchUpload).
func (t *txn) DeleteUploads(ctx context.Context, bucket string) error {
	if _, err := t.q.Exec(ctx, `DELETE FROM uploads WHERE bucket = $1`, bucket); err != nil {
		return fmt.Errorf("drop uploads: %w", mapErr(err))
	}
	return nil
}

// DeleteBucket implements protocol.Tx: an object committed meanwhile (a put,
// or a Complete that DeleteUploads waited for) fails the foreign key, and the
// uploads stay with the rolled-back transaction.
func (t *txn) DeleteBucket(ctx context.Context, name string) error {
	if _, err := t.q.Exec(ctx, `DELETE FROM buckets WHERE name = $1`, name); err != nil {
		if isFKViolation(err, "objects_bucket_fkey") || isFKViolation(err, "uploads_bucket_fkey") ||
			isFKViolation(err, "object_versions_bucket_fkey") {
			return store.ErrBucketNotEmpty
		}
		return mapErr(err)
	}
	return nil
}

// bucketExists is checked before a body is read, so that a PUT into a missing
// bucket fails before consuming its content. The FK on the row inserted later
// is what decides under races.
func (e *Engine) bucketExists(ctx context.Context, q content.Querier, bucket string) error {
	return (&txn{q: q}).BucketExists(ctx, bucket)
}
