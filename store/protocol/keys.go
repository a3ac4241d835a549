package protocol

import (
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// NewKey checks an access key to create and returns it with a non-nil bucket
// list (an empty list is stored as such, never as NULL).
func NewKey(k store.AccessKey) (store.AccessKey, error) {
	if k.ID == "" || k.Secret == "" {
		return store.AccessKey{}, fmt.Errorf("create access key: %w: empty id or secret", store.ErrInvalidArgument)
	}
	if k.Buckets == nil {
		k.Buckets = []string{}
	}
	return k, nil
}
