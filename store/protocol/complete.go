package protocol

import (
	"errors"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// RepeatedComplete answers a Complete of an upload that is no longer in
// progress: the same result as the completion that wrote the current object,
// if that is what the request repeats (store.RepeatedComplete), else
// ErrNoSuchUpload (or NoSuchBucket when the bucket is gone). The engine
// supplies its dialect: current resolves the object as it stands
// (store.ErrNoSuchKey when there is none), bucketExists checks the bucket.
// The caller holds the upload's and the object's locks.
func RepeatedComplete(uploadID string, parts []store.CompletePart, opts store.PutOptions,
	current func() (store.ObjectInfo, error), bucketExists func() error) (store.ObjectInfo, error) {
	cur, err := current()
	if errors.Is(err, store.ErrNoSuchKey) {
		if berr := bucketExists(); berr != nil {
			return store.ObjectInfo{}, berr
		}
		return store.ObjectInfo{}, fmt.Errorf("upload %q: %w", uploadID, store.ErrNoSuchUpload)
	}
	if err != nil {
		return store.ObjectInfo{}, err
	}
	info, err := store.RepeatedComplete(uploadID, parts, cur)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if err := VerifyCompleteChecksum(opts, info.Checksum); err != nil {
		return store.ObjectInfo{}, err
	}
	return info, nil
}
