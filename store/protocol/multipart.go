package protocol

import (
	"context"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// LoadUpload reads an upload and checks that it belongs to bucket/key.
func LoadUpload(ctx context.Context, tx Tx, bucket, key, uploadID string, forUpdate bool) (store.Upload, error) {
	u, found, err := tx.Upload(ctx, uploadID, forUpdate)
	if err != nil {
		return store.Upload{}, fmt.Errorf("upload %q: %w", uploadID, err)
	}
	if !found || u.Bucket != bucket || u.Key != key {
		return store.Upload{}, fmt.Errorf("upload %q of %s/%s: %w", uploadID, bucket, key, store.ErrNoSuchUpload)
	}
	return u, nil
}
