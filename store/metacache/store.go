package metacache

import (
	"context"

	"github.com/s3gate/s3gate/store"
)

// Engine is what Wrap decorates: a metadata engine with bucket
// configurations, access keys and Object Lock (the PostgreSQL engine).
type Engine interface {
	store.ObjectStore
	store.BucketConfigStore
	store.KeyStore
	store.LockStore
}

// Store is an Engine whose BucketConfigs and GetKey answers come from the
// cache when they can. Everything else is the engine's; the writes that
// change a cached row also drop the entry here when they return, so that
// this instance reads its own writes without waiting for the notification.
type Store struct {
	Engine
	c *Cache
}

// Wrap returns e with its reads cached in c.
func Wrap(e Engine, c *Cache) *Store { return &Store{Engine: e, c: c} }

var (
	_ store.BucketConfigStore = (*Store)(nil)
	_ store.KeyStore          = (*Store)(nil)
	_ store.LockStore         = (*Store)(nil)
)

// BucketConfigs implements store.BucketConfigStore. A missing bucket is not
// cached: its answer is as cheap to get as the bucket is to create, and
// not caching it keeps the cache bounded by the buckets that exist.
func (s *Store) BucketConfigs(ctx context.Context, bucket string) (map[string]string, error) {
	v, hit, epoch, on := lookup(s.c, s.c.buckets, bucket)
	if hit {
		return copyConfigs(v), nil
	}
	v, err := s.Engine.BucketConfigs(ctx, bucket)
	if err == nil && on {
		fill(s.c, s.c.buckets, bucket, copyConfigs(v), epoch)
	}
	return v, err
}

// GetKey implements store.KeyStore. An unknown key is not cached (a caller
// could fill the cache with made-up ids).
func (s *Store) GetKey(ctx context.Context, id string) (store.AccessKey, error) {
	v, hit, epoch, on := lookup(s.c, s.c.keys, id)
	if hit {
		return copyKey(v), nil
	}
	v, err := s.Engine.GetKey(ctx, id)
	if err == nil && on {
		fill(s.c, s.c.keys, id, copyKey(v), epoch)
	}
	return v, err
}

// The writes below change a cached row: each drops its entry after the
// engine returns, committed or not (a failed write may have committed).

// PutBucketConfig implements store.BucketConfigStore.
func (s *Store) PutBucketConfig(ctx context.Context, bucket, name, value string) error {
	defer s.c.Invalidate("b:" + bucket)
	return s.Engine.PutBucketConfig(ctx, bucket, name, value)
}

// DeleteBucketConfig implements store.BucketConfigStore.
func (s *Store) DeleteBucketConfig(ctx context.Context, bucket, name string) (bool, error) {
	defer s.c.Invalidate("b:" + bucket)
	return s.Engine.DeleteBucketConfig(ctx, bucket, name)
}

// DeleteBucket implements store.ObjectStore.
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	defer s.c.Invalidate("b:" + name)
	return s.Engine.DeleteBucket(ctx, name)
}

// PutBucketCors implements store.ObjectStore.
func (s *Store) PutBucketCors(ctx context.Context, bucket string, rules []store.CORSRule) error {
	defer s.c.Invalidate("b:" + bucket)
	return s.Engine.PutBucketCors(ctx, bucket, rules)
}

// DeleteBucketCors implements store.ObjectStore.
func (s *Store) DeleteBucketCors(ctx context.Context, bucket string) error {
	defer s.c.Invalidate("b:" + bucket)
	return s.Engine.DeleteBucketCors(ctx, bucket)
}

// SetBucketVersioning implements store.ObjectStore.
func (s *Store) SetBucketVersioning(ctx context.Context, bucket, status string) error {
	defer s.c.Invalidate("b:" + bucket)
	return s.Engine.SetBucketVersioning(ctx, bucket, status)
}

// DeleteKey implements store.KeyStore.
func (s *Store) DeleteKey(ctx context.Context, id string) error {
	defer s.c.Invalidate("k:" + id)
	return s.Engine.DeleteKey(ctx, id)
}
