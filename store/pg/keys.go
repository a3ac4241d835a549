package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// Access keys (store.KeyStore). Each call is one autocommit statement on the
// pool: no transaction to end, nothing cached, so a created key is visible to
// every instance at once and a deleted one is gone at once.

var _ store.KeyStore = (*Engine)(nil)

// CreateKey implements store.KeyStore.
func (e *Engine) CreateKey(ctx context.Context, k store.AccessKey) error {
	k, err := protocol.NewKey(k)
	if err != nil {
		return err
	}
	var created any // NULL lets the column default (database time) apply
	if !k.Created.IsZero() {
		created = k.Created
	}
	_, err = e.pool.Exec(ctx, `INSERT INTO access_keys (id, secret, buckets, read_only, created_at, policy)
		VALUES ($1, $2, $3, $4, coalesce($5::timestamptz, clock_timestamp()), $6)`,
		k.ID, k.Secret, k.Buckets, k.ReadOnly, created, k.Policy)
	if isUniqueViolation(err, "access_keys_pkey") {
		return fmt.Errorf("create access key %q: %w", k.ID, store.ErrAccessKeyExists)
	}
	if err != nil {
		return fmt.Errorf("create access key %q: %w", k.ID, mapErr(err))
	}
	return nil
}

// GetKey implements store.KeyStore.
func (e *Engine) GetKey(ctx context.Context, id string) (store.AccessKey, error) {
	rows, err := e.pool.Query(ctx, `SELECT id, secret, buckets, read_only, created_at, policy
		FROM access_keys WHERE id = $1`, id)
	if err != nil {
		return store.AccessKey{}, fmt.Errorf("get access key: %w", mapErr(err))
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.AccessKey{}, fmt.Errorf("get access key %q: %w", id, store.ErrNoSuchAccessKey)
	}
	if err != nil {
		return store.AccessKey{}, fmt.Errorf("get access key: %w", mapErr(err))
	}
	return k, nil
}

// ListKeys implements store.KeyStore.
func (e *Engine) ListKeys(ctx context.Context) ([]store.AccessKey, error) {
	rows, err := e.pool.Query(ctx, `SELECT id, secret, buckets, read_only, created_at, policy
		FROM access_keys ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list access keys: %w", mapErr(err))
	}
	keys, err := pgx.CollectRows(rows, scanKey)
	if err != nil {
		return nil, fmt.Errorf("list access keys: %w", mapErr(err))
	}
	return keys, nil
}

// DeleteKey implements store.KeyStore.
func (e *Engine) DeleteKey(ctx context.Context, id string) error {
	tag, err := e.pool.Exec(ctx, `DELETE FROM access_keys WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete access key: %w", mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete access key %q: %w", id, store.ErrNoSuchAccessKey)
	}
	return nil
}

func scanKey(row pgx.CollectableRow) (store.AccessKey, error) {
	var (
		k       store.AccessKey
		created time.Time
	)
	if err := row.Scan(&k.ID, &k.Secret, &k.Buckets, &k.ReadOnly, &created, &k.Policy); err != nil {
		return store.AccessKey{}, err
	}
	if len(k.Buckets) == 0 {
		k.Buckets = nil
	}
	k.Created = created.UTC()
	return k, nil
}

// The generated root key (store.RootKeyStore): one row of root_key.

var _ store.RootKeyStore = (*Engine)(nil)

// CreateRootKey implements store.RootKeyStore. The insert and the read are two
// autocommit statements: a concurrent insert waits on the primary key for the
// first one's commit and then does nothing, so the read sees the one row.
func (e *Engine) CreateRootKey(ctx context.Context, k store.AccessKey) (store.AccessKey, bool, error) {
	tag, err := e.pool.Exec(ctx, `INSERT INTO root_key (id, secret) VALUES ($1, $2) ON CONFLICT DO NOTHING`, k.ID, k.Secret)
	if err != nil {
		return store.AccessKey{}, false, fmt.Errorf("create root key: %w", mapErr(err))
	}
	stored, err := e.RootKey(ctx)
	if err != nil {
		return store.AccessKey{}, false, err
	}
	return stored, tag.RowsAffected() == 1, nil
}

// RootKey implements store.RootKeyStore.
func (e *Engine) RootKey(ctx context.Context) (store.AccessKey, error) {
	var (
		k       store.AccessKey
		created time.Time
	)
	err := e.pool.QueryRow(ctx, `SELECT id, secret, created_at FROM root_key`).Scan(&k.ID, &k.Secret, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.AccessKey{}, fmt.Errorf("root key: %w", store.ErrNoSuchAccessKey)
	}
	if err != nil {
		return store.AccessKey{}, fmt.Errorf("root key: %w", mapErr(err))
	}
	k.Created = created.UTC()
	return k, nil
}
