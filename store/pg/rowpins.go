package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg/content"
)

// Row pins (docs/adr/010-row-pins.md): the statements of fleet.RowPins and of
// the pin rows of a joint transaction. Every expiry is in database time, and
// no statement ever extends a row whose expiry has passed.

// pinExpiry is "ttl ($3, in microseconds) from now" in database time.
const pinExpiry = `clock_timestamp() + $3::bigint * interval '1 microsecond'`

// RowPinStore is fleet.RowPinStore on a pool.
type RowPinStore struct{ db *pgxpool.Pool }

var _ fleet.RowPinStore = RowPinStore{}

// NewRowPinStore returns the row pin statements on db.
func NewRowPinStore(db *pgxpool.Pool) RowPinStore { return RowPinStore{db: db} }

// Pin implements fleet.RowPinStore with statements in autocommit: replacing
// an expired row then takes no lock on the blob row while it holds the pin
// row (see pinRows), so it cannot deadlock with GC, which locks the blob row
// first.
func (s RowPinStore) Pin(ctx context.Context, blobID int64, owner string, ttl time.Duration) error {
	return pinRows(ctx, s.db, []int64{blobID}, owner, ttl)
}

// Renew implements fleet.RowPinStore. The rows are locked in id order first,
// so that a renewal and a joint transaction pinning several of the same rows
// (a Complete) take them in one order.
func (s RowPinStore) Renew(ctx context.Context, owner string, ids []int64, ttl time.Duration) ([]int64, error) {
	got, err := collect[int64](s.db.Query(ctx, `WITH t AS (
			SELECT blob_id FROM pins WHERE owner = $1 AND blob_id = ANY($2) AND expires_at > clock_timestamp()
			ORDER BY blob_id FOR UPDATE)
		UPDATE pins p SET expires_at = `+pinExpiry+` FROM t
		WHERE p.owner = $1 AND p.blob_id = t.blob_id AND p.expires_at > clock_timestamp()
		RETURNING p.blob_id`, owner, ids, ttl.Microseconds()))
	if err != nil {
		return nil, fmt.Errorf("renew pins: %w", mapErr(err))
	}
	return got, nil
}

// DropOwner implements fleet.RowPinStore.
func (s RowPinStore) DropOwner(ctx context.Context, owner string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM pins WHERE owner = $1`, owner); err != nil {
		return fmt.Errorf("drop pins of %s: %w", owner, mapErr(err))
	}
	return nil
}

// PinRows implements protocol.Tx: the pin rows of a joint transaction.
func (t *txn) PinRows(ctx context.Context, ids []int64, owner string, ttl time.Duration) error {
	if t.tx == nil {
		return errors.New("pin rows: needs a transaction")
	}
	if err := pinRows(ctx, t.q, ids, owner, ttl); err != nil {
		return err
	}
	if t.afterPinRows != nil {
		return t.afterPinRows(t.tx)
	}
	return nil
}

// pinRows inserts the (blob, owner) rows of ids expiring ttl from now, in id
// order, or renews those that exist and have not expired. A row that exists
// but expired is not renewed (ON CONFLICT's WHERE fails): it is deleted and a
// fresh row inserted in its place. A missing blob row is fleet.ErrBlobGone.
//
// Lock order: the blob row before its pin rows, everywhere. The insert takes
// FOR KEY SHARE on the blob rows (as its FK check would) before it touches a
// pin row; inside a joint transaction they are locked already (the put's
// upsert, or the FK check of the referencing row); GC locks the blob row
// before it deletes expired pin rows. On the pool (q is not a transaction)
// every statement commits on its own, so the deletion of an expired row is
// never held while a blob row is waited for.
func pinRows(ctx context.Context, q content.Querier, ids []int64, owner string, ttl time.Duration) error {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids) // ON CONFLICT cannot touch one row twice
	upsert := func(ids []int64) (map[int64]bool, error) {
		done, err := collect[int64](q.Query(ctx, `INSERT INTO pins (blob_id, owner, expires_at)
			SELECT b.id, $2, `+pinExpiry+` FROM blobs b WHERE b.id = ANY($1::bigint[]) ORDER BY b.id FOR KEY SHARE OF b
			ON CONFLICT (blob_id, owner) DO UPDATE SET expires_at = EXCLUDED.expires_at
			WHERE pins.expires_at > clock_timestamp()
			RETURNING blob_id`, ids, owner, ttl.Microseconds()))
		if err != nil {
			return nil, pinErr(err)
		}
		set := make(map[int64]bool, len(done))
		for _, id := range done {
			set[id] = true
		}
		return set, nil
	}
	done, err := upsert(ids)
	if err != nil || len(done) == len(ids) {
		return err
	}
	expired := slices.DeleteFunc(ids, func(id int64) bool { return done[id] })
	if _, err := q.Exec(ctx, `DELETE FROM pins WHERE owner = $2 AND blob_id = ANY($1) AND expires_at <= clock_timestamp()`,
		expired, owner); err != nil {
		return fmt.Errorf("replace expired pins: %w", mapErr(err))
	}
	// Fresh rows; on the pool another pin of this instance may have inserted
	// one meanwhile, which this renews. A blob that has no row gets none.
	if done, err = upsert(expired); err != nil {
		return err
	}
	if gone := slices.DeleteFunc(expired, func(id int64) bool { return done[id] }); len(gone) > 0 {
		return fmt.Errorf("pin rows of blobs %v: %w", gone, fleet.ErrBlobGone)
	}
	return nil
}

func pinErr(err error) error {
	if isFKViolation(err, "pins_blob_id_fkey") {
		return fmt.Errorf("pin rows: %w", fleet.ErrBlobGone)
	}
	return fmt.Errorf("pin rows: %w", mapErr(err))
}

// PromoteBlob implements protocol.Tx: a blob that has the address already is
// locked and returned, as UpsertBlob's dedup does; else the placeholder takes
// the address. A put that inserted the address meanwhile makes the UPDATE
// fail on the unique index after it committed: then the lookup runs again
// (in a savepoint, so that the transaction survives the failure).
func (t *txn) PromoteBlob(ctx context.Context, id int64, d store.Digests) (int64, bool, error) {
	for attempt := 1; ; attempt++ {
		var got int64
		err := t.q.QueryRow(ctx, lockBlobSQL, d.SHA256[:]).Scan(&got)
		if err == nil {
			return got, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, false, fmt.Errorf("look up blob address: %w", mapErr(err))
		}
		sp, err := t.tx.Begin(ctx)
		if err != nil {
			return 0, false, fmt.Errorf("savepoint: %w", mapErr(err))
		}
		_, err = sp.Exec(ctx, `UPDATE blobs SET sha256 = $2 WHERE id = $1`, id, d.SHA256[:])
		if err == nil {
			if err := sp.Commit(ctx); err != nil {
				return 0, false, fmt.Errorf("release savepoint: %w", mapErr(err))
			}
			return id, true, nil
		}
		if rerr := sp.Rollback(ctx); rerr != nil {
			return 0, false, fmt.Errorf("promote blob %d: %w (rollback to savepoint: %w)", id, mapErr(err), rerr)
		}
		if !isUniqueViolation(err, "blobs_sha256_key") || attempt == 2 {
			return 0, false, fmt.Errorf("promote blob %d: %w", id, mapErr(err))
		}
	}
}

// DropBlob implements protocol.Tx.
func (t *txn) DropBlob(ctx context.Context, id int64, owner string) error {
	if _, err := t.q.Exec(ctx, `DELETE FROM pins WHERE blob_id = $1 AND owner = $2`, id, owner); err != nil {
		return fmt.Errorf("drop pin of blob %d: %w", id, mapErr(err))
	}
	if _, err := t.q.Exec(ctx, `DELETE FROM blobs WHERE id = $1`, id); err != nil {
		return fmt.Errorf("drop placeholder blob %d: %w", id, mapErr(err))
	}
	return nil
}
