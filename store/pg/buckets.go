package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
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

// DeleteBucket implements store.ObjectStore: a bucket with objects is
// ErrBucketNotEmpty; in-progress multipart uploads go with the bucket, in the
// same transaction, as on S3 (their part rows cascade, GC reclaims the part
// blobs as after an abort). Row locks arbitrate the races: the DELETE of an
// upload row waits for a Complete that holds it FOR UPDATE and for a part
// write whose foreign-key check holds it FOR KEY SHARE; a part written after
// the delete fails its foreign key (NoSuchUpload). An object committed
// meanwhile (a put, or the Complete that was waited for) makes the final
// DELETE fail its foreign key: ErrBucketNotEmpty, and the uploads stay.
func (e *Engine) DeleteBucket(ctx context.Context, name string) error {
	err := e.withTx(ctx, func(tx pgx.Tx) error {
		var exists, hasObjects bool
		if err := tx.QueryRow(ctx, `SELECT
				EXISTS (SELECT 1 FROM buckets WHERE name = $1),
				EXISTS (SELECT 1 FROM objects WHERE bucket = $1)`, name).Scan(&exists, &hasObjects); err != nil {
			return mapErr(err)
		}
		switch {
		case !exists:
			return store.ErrNoSuchBucket
		case hasObjects:
			return store.ErrBucketNotEmpty
		}
		if _, err := tx.Exec(ctx, `DELETE FROM uploads WHERE bucket = $1`, name); err != nil {
			return fmt.Errorf("drop uploads: %w", mapErr(err))
		}
		if _, err := tx.Exec(ctx, `DELETE FROM buckets WHERE name = $1`, name); err != nil {
			if isFKViolation(err, "objects_bucket_fkey") || isFKViolation(err, "uploads_bucket_fkey") {
				return store.ErrBucketNotEmpty
			}
			return mapErr(err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete bucket %q: %w", name, err)
	}
	return nil
}

// bucketExists is checked before a body is read, so that a PUT into a missing
// bucket fails before consuming its content. The FK on the row inserted later
// is what decides under races.
func (e *Engine) bucketExists(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, bucket string) error {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM buckets WHERE name = $1)`, bucket).Scan(&ok); err != nil {
		return fmt.Errorf("bucket %q: %w", bucket, mapErr(err))
	}
	if !ok {
		return fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchBucket)
	}
	return nil
}
