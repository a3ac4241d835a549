package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
)

// BucketCors implements protocol.Tx.
func (t *txn) BucketCors(ctx context.Context, bucket string) ([]byte, error) {
	var doc []byte
	err := t.q.QueryRow(ctx, `SELECT c.rules::text FROM buckets b
		LEFT JOIN bucket_cors c ON c.bucket = b.name WHERE b.name = $1`, bucket).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("read bucket cors: %w", mapErr(err))
	}
	return doc, nil
}

// SetBucketCors implements protocol.Tx.
func (t *txn) SetBucketCors(ctx context.Context, bucket string, doc []byte) error {
	var err error
	if doc == nil {
		_, err = t.q.Exec(ctx, `DELETE FROM bucket_cors WHERE bucket = $1`, bucket)
	} else {
		_, err = t.q.Exec(ctx, `INSERT INTO bucket_cors (bucket, rules) VALUES ($1, $2::jsonb)
			ON CONFLICT (bucket) DO UPDATE SET rules = EXCLUDED.rules, updated_at = clock_timestamp()`, bucket, string(doc))
	}
	if isFKViolation(err, "bucket_cors_bucket_fkey") {
		// The bucket was deleted after BucketExists saw it.
		return fmt.Errorf("write bucket cors: %w", store.ErrNoSuchBucket)
	}
	if err != nil {
		return fmt.Errorf("write bucket cors: %w", mapErr(err))
	}
	return nil
}
