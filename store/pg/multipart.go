package pg

import (
	"context"
	"fmt"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// ListMultipartUploads implements store.ObjectStore. Uploads are ordered by
// key, then initiation time (then id); uploads and common prefixes count
// together towards MaxUploads.
func (e *Engine) ListMultipartUploads(ctx context.Context, bucket string, p store.ListUploadsParams) (store.ListUploadsResult, error) {
	if err := e.bucketExists(ctx, e.pool, bucket); err != nil {
		return store.ListUploadsResult{}, fmt.Errorf("list uploads in %s: %w", bucket, err)
	}
	res, err := protocol.ListUploads(p, e.fetchUploads(ctx, bucket))
	if err != nil {
		return res, fmt.Errorf("list uploads in %s: %w", bucket, err)
	}
	return res, nil
}
