package pg

import (
	"context"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// A bucket's CORS rules are one of its configuration documents.

// PutBucketCors implements store.ObjectStore.
func (e *Engine) PutBucketCors(ctx context.Context, bucket string, rules []store.CORSRule) error {
	return protocol.PutBucketCors(ctx, e, bucket, rules)
}

// GetBucketCors implements store.ObjectStore.
func (e *Engine) GetBucketCors(ctx context.Context, bucket string) ([]store.CORSRule, error) {
	return protocol.GetBucketCors(ctx, e, bucket)
}

// DeleteBucketCors implements store.ObjectStore.
func (e *Engine) DeleteBucketCors(ctx context.Context, bucket string) error {
	return protocol.DeleteBucketCors(ctx, e, bucket)
}
