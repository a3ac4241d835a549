package protocol

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// DeleteBucket implements store.ObjectStore: a bucket with objects is
// ErrBucketNotEmpty; in-progress multipart uploads go with the bucket, in the
// same transaction, as on S3 (their part rows go with them, GC reclaims the
// part blobs as after an abort).
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	err := s.dialect.Write(ctx, nil, func(tx Tx) error {
		exists, hasObjects, err := tx.BucketState(ctx, name)
		switch {
		case err != nil:
			return err
		case !exists:
			return store.ErrNoSuchBucket
		case hasObjects:
			return store.ErrBucketNotEmpty
		}
		if err := tx.DeleteUploads(ctx, name); err != nil {
			return err
		}
		return tx.DeleteBucket(ctx, name)
	})
	if err != nil {
		return fmt.Errorf("delete bucket %q: %w", name, err)
	}
	return nil
}

// PutBucketCors implements store.ObjectStore: the rules are kept as one
// JSON document per bucket, which goes with the bucket.
func (s *Store) PutBucketCors(ctx context.Context, bucket string, rules []store.CORSRule) error {
	doc, err := json.Marshal(rules)
	if err != nil {
		return fmt.Errorf("put bucket cors %q: %w", bucket, err)
	}
	return s.setBucketCors(ctx, bucket, doc)
}

// DeleteBucketCors implements store.ObjectStore.
func (s *Store) DeleteBucketCors(ctx context.Context, bucket string) error {
	return s.setBucketCors(ctx, bucket, nil)
}

func (s *Store) setBucketCors(ctx context.Context, bucket string, doc []byte) error {
	err := s.dialect.Write(ctx, nil, func(tx Tx) error {
		if err := tx.BucketExists(ctx, bucket); err != nil {
			return err
		}
		return tx.SetBucketCors(ctx, bucket, doc)
	})
	if err != nil {
		return fmt.Errorf("bucket cors %q: %w", bucket, err)
	}
	return nil
}

// GetBucketCors implements store.ObjectStore. It runs on every request that
// carries an Origin header, so it is one autocommit statement.
func (s *Store) GetBucketCors(ctx context.Context, bucket string) ([]store.CORSRule, error) {
	doc, err := s.dialect.Autocommit().BucketCors(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("get bucket cors %q: %w", bucket, err)
	}
	if doc == nil {
		return nil, fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchCORSConfiguration)
	}
	var rules []store.CORSRule
	if err := json.Unmarshal(doc, &rules); err != nil {
		return nil, fmt.Errorf("get bucket cors %q: stored document: %w", bucket, err)
	}
	return rules, nil
}

// CheckBucketConfig is the rule the engines apply before storing a bucket
// configuration document: a known name, and a value within the largest
// document any configuration may have (1 MiB; s3api applies each
// configuration's own, smaller limit).
func CheckBucketConfig(name, value string) error {
	switch name {
	case store.BucketConfigPolicy, store.BucketConfigPublicAccessBlock:
	default:
		return fmt.Errorf("%w: unknown bucket configuration %q", store.ErrInvalidArgument, name)
	}
	if len(value) > 1<<20 {
		return fmt.Errorf("%w: bucket configuration %q of %d bytes", store.ErrInvalidArgument, name, len(value))
	}
	return nil
}
