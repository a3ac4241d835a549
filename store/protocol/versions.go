package protocol

import (
	"context"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// errVersioning marks the versioning calls that are not built yet.
var errVersioning = fmt.Errorf("%w: versioning is not built yet", store.ErrNotImplemented)

// SetBucketVersioning implements store.VersionStore.
func (s *Store) SetBucketVersioning(ctx context.Context, bucket, status string) error {
	return errVersioning
}

// BucketVersioning implements store.VersionStore.
func (s *Store) BucketVersioning(ctx context.Context, bucket string) (string, error) {
	return "", nil
}

// DeleteObjectVersion implements store.VersionStore.
func (s *Store) DeleteObjectVersion(ctx context.Context, bucket, key string, opts store.DeleteOptions) (store.DeleteVersionResult, error) {
	return store.DeleteVersionResult{}, errVersioning
}

// DeleteObjectVersions implements store.VersionStore.
func (s *Store) DeleteObjectVersions(ctx context.Context, bucket string, ids []store.ObjectID) ([]store.DeleteVersionResult, error) {
	return nil, errVersioning
}

// ListObjectVersions implements store.VersionStore.
func (s *Store) ListObjectVersions(ctx context.Context, bucket string, p store.ListVersionsParams) (store.ListVersionsResult, error) {
	return store.ListVersionsResult{}, errVersioning
}

// ReplaceObjectMeta implements store.VersionStore.
func (s *Store) ReplaceObjectMeta(ctx context.Context, bucket, key, versionID, etag string, meta store.ObjectMeta) (store.ObjectInfo, error) {
	return store.ObjectInfo{}, errVersioning
}
