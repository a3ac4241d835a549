package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// Keyring is the CredentialStore of a gateway with managed access keys: the
// root key pair from the configuration, which always works, plus the keys
// kept in the metadata store (`s3gate admin key ...`).
//
// Keys is read on every lookup; the server gives it the metadata cache on
// PostgreSQL (store/metacache), whose entries are dropped by the commit
// that changes the key, so a deleted key is refused on every instance of a
// fleet as soon as the instance has heard the commit.
type Keyring struct {
	// RootAccessKey and RootSecretKey are the root key pair. The root key is
	// checked first, so a stored key with the same ID can never shadow it.
	RootAccessKey, RootSecretKey string
	// Keys holds the managed keys; nil means root only.
	Keys store.KeyStore
}

var _ CredentialStore = (*Keyring)(nil)

// Lookup implements CredentialStore. An unknown key is ok=false; a store
// failure is an error (the request fails, it is not treated as unknown).
func (k *Keyring) Lookup(ctx context.Context, accessKey string) (string, bool, error) {
	if accessKey == "" {
		return "", false, nil
	}
	if k.RootAccessKey != "" && accessKey == k.RootAccessKey {
		return k.RootSecretKey, true, nil
	}
	if k.Keys == nil {
		return "", false, nil
	}
	ak, err := k.Keys.GetKey(ctx, accessKey)
	if errors.Is(err, store.ErrNoSuchAccessKey) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("keyring: look up access key: %w", err)
	}
	return ak.Secret, true, nil
}

// Policy returns what accessKey may do: the buckets it is limited to (empty:
// every bucket), whether it may only read, and whether it is the root key
// (which may do everything). An unknown key is an error wrapping
// store.ErrNoSuchAccessKey.
func (k *Keyring) Policy(ctx context.Context, accessKey string) (buckets []string, readOnly, root bool, err error) {
	if k.RootAccessKey != "" && accessKey == k.RootAccessKey {
		return nil, false, true, nil
	}
	if accessKey == "" || k.Keys == nil {
		return nil, false, false, fmt.Errorf("keyring: access key %q: %w", accessKey, store.ErrNoSuchAccessKey)
	}
	ak, err := k.Keys.GetKey(ctx, accessKey)
	if err != nil {
		return nil, false, false, fmt.Errorf("keyring: policy of %q: %w", accessKey, err)
	}
	return ak.Buckets, ak.ReadOnly, false, nil
}
