package embedded

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
	var res store.ListUploadsResult
	err := e.withRead(ctx, func(tx txQuerier) error {
		if err := bucketExists(ctx, tx, bucket); err != nil {
			return err
		}
		var err error
		res, err = protocol.ListUploads(p, fetchUploads(ctx, tx, bucket))
		return err
	})
	if err != nil {
		return store.ListUploadsResult{}, fmt.Errorf("list uploads in %s: %w", bucket, err)
	}
	return res, nil
}
