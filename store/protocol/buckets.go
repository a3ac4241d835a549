package protocol

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// DeleteBucket implements store.ObjectStore: a bucket with objects, noncurrent
// versions or delete markers is ErrBucketNotEmpty; in-progress multipart uploads go with the bucket, in the
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

// PutBucketCors is store.ObjectStore's PutBucketCors over the engine's
// bucket configurations: the rules are one JSON document
// (store.BucketConfigCORS), which goes with the bucket.
func PutBucketCors(ctx context.Context, c store.BucketConfigStore, bucket string, rules []store.CORSRule) error {
	doc, err := json.Marshal(rules)
	if err != nil {
		return fmt.Errorf("put bucket cors %q: %w", bucket, err)
	}
	return c.PutBucketConfig(ctx, bucket, store.BucketConfigCORS, string(doc))
}

// DeleteBucketCors is store.ObjectStore's DeleteBucketCors over the
// engine's bucket configurations (none is no error).
func DeleteBucketCors(ctx context.Context, c store.BucketConfigStore, bucket string) error {
	_, err := c.DeleteBucketConfig(ctx, bucket, store.BucketConfigCORS)
	return err
}

// GetBucketCors is store.ObjectStore's GetBucketCors over the engine's
// bucket configurations. It runs on every request that carries an Origin
// header, so it is the one statement of BucketConfigs.
func GetBucketCors(ctx context.Context, c store.BucketConfigStore, bucket string) ([]store.CORSRule, error) {
	cfgs, err := c.BucketConfigs(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("get bucket cors: %w", err)
	}
	doc, ok := cfgs[store.BucketConfigCORS]
	if !ok {
		return nil, fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchCORSConfiguration)
	}
	var rules []store.CORSRule
	if err := json.Unmarshal([]byte(doc), &rules); err != nil {
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
	case store.BucketConfigPolicy, store.BucketConfigPublicAccessBlock, store.BucketConfigCORS,
		store.BucketConfigACL, store.BucketConfigOwnership, store.BucketConfigTagging,
		store.BucketConfigObjectLock, store.BucketConfigLifecycle:
	case store.BucketConfigVersioning:
		if value != store.VersioningEnabled && value != store.VersioningSuspended {
			return fmt.Errorf("%w: versioning status %q", store.ErrInvalidArgument, value)
		}
	default:
		return fmt.Errorf("%w: unknown bucket configuration %q", store.ErrInvalidArgument, name)
	}
	if len(value) > 1<<20 {
		return fmt.Errorf("%w: bucket configuration %q of %d bytes", store.ErrInvalidArgument, name, len(value))
	}
	return nil
}
