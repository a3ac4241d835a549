package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/s3gate/s3gate/store"
)

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// ListBuckets implements store.ObjectStore.
func (e *Engine) ListBuckets(ctx context.Context) ([]store.Bucket, error) {
	rows, err := e.rq.QueryContext(ctx, `SELECT name, region, created_at FROM buckets ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list buckets: %w", mapErr(err))
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var out []store.Bucket
	for rows.Next() {
		var b store.Bucket
		var created int64
		if err := rows.Scan(&b.Name, &b.Region, &created); err != nil {
			return nil, fmt.Errorf("list buckets: %w", err)
		}
		b.CreatedAt = fromMicros(created)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list buckets: %w", mapErr(err))
	}
	return out, nil
}

// CreateBucket implements store.ObjectStore. region "" means the engine's
// default region.
func (e *Engine) CreateBucket(ctx context.Context, name, region string) error {
	if region == "" {
		region = e.region
	}
	var created bool
	err := e.withWrite(ctx, func(tx txQuerier) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO buckets (name, region, created_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO NOTHING`, name, region, toMicros(now()))
		if err != nil {
			return mapErr(err)
		}
		n, err := res.RowsAffected()
		created = n > 0
		return err
	})
	if err != nil {
		return fmt.Errorf("create bucket %q: %w", name, err)
	}
	if !created {
		return fmt.Errorf("create bucket %q: %w", name, store.ErrBucketExists)
	}
	return nil
}

// HeadBucket implements store.ObjectStore.
func (e *Engine) HeadBucket(ctx context.Context, name string) (store.Bucket, error) {
	b := store.Bucket{Name: name}
	var created int64
	err := e.rq.QueryRowContext(ctx, `SELECT region, created_at FROM buckets WHERE name = ?`, name).Scan(&b.Region, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Bucket{}, fmt.Errorf("bucket %q: %w", name, store.ErrNoSuchBucket)
	}
	if err != nil {
		return store.Bucket{}, fmt.Errorf("head bucket %q: %w", name, mapErr(err))
	}
	b.CreatedAt = fromMicros(created)
	return b, nil
}

// BucketState implements protocol.Tx.
func (t txn) BucketState(ctx context.Context, name string) (exists, hasObjects bool, err error) {
	if err := t.q.QueryRowContext(ctx, `SELECT
			EXISTS (SELECT 1 FROM buckets WHERE name = ?1),
			EXISTS (SELECT 1 FROM objects WHERE bucket = ?1) OR EXISTS (SELECT 1 FROM object_versions WHERE bucket = ?1)`, name).Scan(&exists, &hasObjects); err != nil {
		return false, false, mapErr(err)
	}
	return exists, hasObjects, nil
}

// DeleteUploads implements protocol.Tx. The single writer serializes
// DeleteBucket with every Complete and part write: a part written afterwards
// fails its foreign key (NoSuchUpload), an object committed before makes the
// bucket non-empty.
func (t txn) DeleteUploads(ctx context.Context, bucket string) error {
	if _, err := t.q.ExecContext(ctx, `DELETE FROM uploads WHERE bucket = ?`, bucket); err != nil {
		return fmt.Errorf("drop uploads: %w", mapErr(err))
	}
	return nil
}

// DeleteBucket implements protocol.Tx.
func (t txn) DeleteBucket(ctx context.Context, name string) error {
	if _, err := t.q.ExecContext(ctx, `DELETE FROM buckets WHERE name = ?`, name); err != nil {
		if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
			return store.ErrBucketNotEmpty
		}
		return mapErr(err)
	}
	return nil
}

// bucketExists is checked before a body is read, so that a PUT into a missing
// bucket fails before consuming its content; the foreign key on the row
// written later decides under races.
func bucketExists(ctx context.Context, q querier, bucket string) error {
	var ok bool
	if err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM buckets WHERE name = ?)`, bucket).Scan(&ok); err != nil {
		return fmt.Errorf("bucket %q: %w", bucket, mapErr(err))
	}
	if !ok {
		return fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchBucket)
	}
	return nil
}
