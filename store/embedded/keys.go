package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// Access keys (store.KeyStore). Nothing is cached: reads go to the database
// every time, so a key that `s3gate admin` creates or deletes from another
// process (WAL mode allows it while the gateway runs) takes effect at once.

var _ store.KeyStore = (*Engine)(nil)

// CreateKey implements store.KeyStore.
func (e *Engine) CreateKey(ctx context.Context, k store.AccessKey) error {
	k, err := protocol.NewKey(k)
	if err != nil {
		return err
	}
	bj, err := json.Marshal(k.Buckets)
	if err != nil {
		return fmt.Errorf("create access key %q: encode buckets: %w", k.ID, err)
	}
	created := k.Created
	if created.IsZero() {
		created = now()
	}
	err = e.withWrite(ctx, func(tx txQuerier) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO access_keys (id, secret, buckets, read_only, created_at, policy)
			VALUES (?, ?, ?, ?, ?, ?)`, k.ID, k.Secret, string(bj), k.ReadOnly, toMicros(created), k.Policy)
		return err
	})
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) {
		return fmt.Errorf("create access key %q: %w", k.ID, store.ErrAccessKeyExists)
	}
	if err != nil {
		return fmt.Errorf("create access key %q: %w", k.ID, mapErr(err))
	}
	return nil
}

// GetKey implements store.KeyStore.
func (e *Engine) GetKey(ctx context.Context, id string) (store.AccessKey, error) {
	row := e.rq.QueryRowContext(ctx, `SELECT id, secret, buckets, read_only, created_at, policy
		FROM access_keys WHERE id = ?`, id)
	k, err := scanKey(row)
	if errors.Is(err, sql.ErrNoRows) {
		return store.AccessKey{}, fmt.Errorf("get access key %q: %w", id, store.ErrNoSuchAccessKey)
	}
	if err != nil {
		return store.AccessKey{}, fmt.Errorf("get access key: %w", mapErr(err))
	}
	return k, nil
}

// ListKeys implements store.KeyStore.
func (e *Engine) ListKeys(ctx context.Context) ([]store.AccessKey, error) {
	rows, err := e.rq.QueryContext(ctx, `SELECT id, secret, buckets, read_only, created_at, policy
		FROM access_keys ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list access keys: %w", mapErr(err))
	}
	defer rows.Close()
	var keys []store.AccessKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list access keys: %w", mapErr(err))
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list access keys: %w", mapErr(err))
	}
	return keys, nil
}

// DeleteKey implements store.KeyStore.
func (e *Engine) DeleteKey(ctx context.Context, id string) error {
	var n int64
	err := e.withWrite(ctx, func(tx txQuerier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM access_keys WHERE id = ?`, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("delete access key: %w", mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("delete access key %q: %w", id, store.ErrNoSuchAccessKey)
	}
	return nil
}

func scanKey(row interface{ Scan(dest ...any) error }) (store.AccessKey, error) {
	var (
		k       store.AccessKey
		buckets string
		created int64
	)
	if err := row.Scan(&k.ID, &k.Secret, &buckets, &k.ReadOnly, &created, &k.Policy); err != nil {
		return store.AccessKey{}, err
	}
	if err := json.Unmarshal([]byte(buckets), &k.Buckets); err != nil {
		return store.AccessKey{}, fmt.Errorf("access key %q: decode buckets: %w", k.ID, err)
	}
	if len(k.Buckets) == 0 {
		k.Buckets = nil
	}
	k.Created = fromMicros(created)
	return k, nil
}
