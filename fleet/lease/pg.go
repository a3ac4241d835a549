package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaLockKey is the transaction advisory lock that serializes EnsureSchema
// across instances starting at once (CREATE TABLE IF NOT EXISTS alone can fail
// with a unique violation in the catalogs when two sessions race).
const schemaLockKey int64 = 0x73336761_6c656173 // "s3galeas"

// Schema is the lease table. A free row has holder ”.
const Schema = `CREATE TABLE IF NOT EXISTS leases (
    kind       text PRIMARY KEY,
    holder     text NOT NULL DEFAULT '',
    generation bigint NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT '-infinity'
)`

// EnsureSchema creates the lease table if it does not exist, under an
// advisory lock so that several instances may start at once.
func EnsureSchema(ctx context.Context, db *pgxpool.Pool) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("lease: schema: begin: %w", err)
	}
	defer func() {
		if err != nil {
			// The DDL error is the one to report; rollback also runs if the
			// connection broke, and pgx then discards it.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLockKey); err != nil {
		return fmt.Errorf("lease: schema lock: %w", err)
	}
	if _, err := tx.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("lease: create table: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("lease: schema: commit: %w", err)
	}
	return nil
}

// PGStore is the lease table on PostgreSQL. Every call is one autocommit
// statement on a pooled connection: a lease is a row, not a session lock, so
// it needs no dedicated session. Times are database time (clock_timestamp()).
type PGStore struct {
	db *pgxpool.Pool
}

var _ Store = (*PGStore)(nil)

// NewPGStore ensures the schema and returns the store.
func NewPGStore(ctx context.Context, db *pgxpool.Pool) (*PGStore, error) {
	if err := EnsureSchema(ctx, db); err != nil {
		return nil, err
	}
	return &PGStore{db: db}, nil
}

// Acquire implements Store. The generation grows on every acquisition, so a
// previous holder's renewals and releases (fenced on it) can never match.
func (s *PGStore) Acquire(ctx context.Context, kind, holder string, ttl time.Duration) (int64, bool, error) {
	var gen int64
	err := s.db.QueryRow(ctx, `INSERT INTO leases AS l (kind, holder, generation, expires_at)
		VALUES ($1, $2, 1, clock_timestamp() + $3::bigint * interval '1 microsecond')
		ON CONFLICT (kind) DO UPDATE
			SET holder = EXCLUDED.holder, generation = l.generation + 1, expires_at = EXCLUDED.expires_at
			WHERE l.holder = '' OR l.expires_at <= clock_timestamp()
		RETURNING generation`, kind, holder, ttl.Microseconds()).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("acquire lease %s: %w", kind, err)
	}
	return gen, true, nil
}

// Confirm implements Store.
func (s *PGStore) Confirm(ctx context.Context, kind, holder string, gen int64) (bool, error) {
	var ok bool
	err := s.db.QueryRow(ctx, `SELECT holder = $2 AND generation = $3 AND expires_at > clock_timestamp()
		FROM leases WHERE kind = $1`, kind, holder, gen).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("confirm lease %s: %w", kind, err)
	}
	return ok, nil
}

// Renew implements Store. An expired row is never extended, even if it is
// still ours: the grant is over once the expiry passed.
func (s *PGStore) Renew(ctx context.Context, kind, holder string, gen int64, ttl time.Duration) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE leases SET expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond'
		WHERE kind = $1 AND holder = $2 AND generation = $3 AND expires_at > clock_timestamp()`,
		kind, holder, gen, ttl.Microseconds())
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", kind, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Release implements Store. Only an unexpired row of ours is freed (an
// expired one is free for the taking already). The generation stays, so the
// next acquisition still gets a new one.
func (s *PGStore) Release(ctx context.Context, kind, holder string, gen int64) (bool, error) {
	tag, err := s.db.Exec(ctx, `UPDATE leases SET holder = '', expires_at = clock_timestamp()
		WHERE kind = $1 AND holder = $2 AND generation = $3 AND expires_at > clock_timestamp()`,
		kind, holder, gen)
	if err != nil {
		return false, fmt.Errorf("release lease %s: %w", kind, err)
	}
	return tag.RowsAffected() == 1, nil
}
