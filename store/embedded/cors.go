package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// BucketCors implements protocol.Tx.
func (t txn) BucketCors(ctx context.Context, bucket string) ([]byte, error) {
	var doc sql.NullString
	err := t.q.QueryRowContext(ctx, `SELECT c.rules FROM buckets b
		LEFT JOIN bucket_cors c ON c.bucket = b.name WHERE b.name = ?`, bucket).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("read bucket cors: %w", mapErr(err))
	}
	if !doc.Valid {
		return nil, nil
	}
	return []byte(doc.String), nil
}

// SetBucketCors implements protocol.Tx.
func (t txn) SetBucketCors(ctx context.Context, bucket string, doc []byte) error {
	var err error
	if doc == nil {
		_, err = t.q.ExecContext(ctx, `DELETE FROM bucket_cors WHERE bucket = ?`, bucket)
	} else {
		_, err = t.q.ExecContext(ctx, `INSERT INTO bucket_cors (bucket, rules) VALUES (?1, ?2)
			ON CONFLICT (bucket) DO UPDATE SET rules = excluded.rules`, bucket, string(doc))
	}
	if err != nil {
		return fmt.Errorf("write bucket cors: %w", mapErr(err))
	}
	return nil
}
