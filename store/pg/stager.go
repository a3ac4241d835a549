package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/protocol"
)

// stageSlots is how many staging writes may hold a pool connection at once:
// half the pool, so that however many uploads are in flight, reads and small
// puts always find connections (ADR 007).
func stageSlots(maxConns int32) int { return max(1, int(maxConns)/2) }

// slotStager runs the autocommit statements of content staging on the pool,
// at most cap(slots) at a time. A slot is taken only once the chunk is in
// memory, and given back when the statement ends.
type slotStager struct {
	pool  *pgxpool.Pool
	slots chan struct{}
}

var _ content.Stager = (*slotStager)(nil)

func newSlotStager(pool *pgxpool.Pool, n int) *slotStager {
	return &slotStager{pool: pool, slots: make(chan struct{}, n)}
}

func (s *slotStager) acquire(ctx context.Context) (func(), error) {
	select {
	case s.slots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-s.slots }) }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for a staging slot: %w", ctx.Err())
	}
}

// Exec implements content.Stager.
func (s *slotStager) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer release()
	return s.pool.Exec(ctx, sql, args...)
}

// QueryRow implements content.Stager; the slot is held until Scan.
func (s *slotStager) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	release, err := s.acquire(ctx)
	if err != nil {
		return errRow{err}
	}
	return &slotRow{row: s.pool.QueryRow(ctx, sql, args...), release: release}
}

type slotRow struct {
	row     pgx.Row
	release func()
}

func (r *slotRow) Scan(dest ...any) error {
	defer r.release()
	return r.row.Scan(dest...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// SendBatch implements content.Stager; the slot is held until the results
// are closed.
func (s *slotStager) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	release, err := s.acquire(ctx)
	if err != nil {
		return errBatch{err}
	}
	return &slotBatch{BatchResults: s.pool.SendBatch(ctx, b), release: release}
}

type slotBatch struct {
	pgx.BatchResults
	release func()
}

func (r *slotBatch) Close() error {
	defer r.release()
	return r.BatchResults.Close()
}

// errBatch is the results of a batch that was never sent.
type errBatch struct{ err error }

func (r errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, r.err }
func (r errBatch) Query() (pgx.Rows, error)         { return nil, r.err }
func (r errBatch) QueryRow() pgx.Row                { return errRow(r) }
func (r errBatch) Close() error                     { return r.err }
func (r errBatch) Tx() pgx.Tx                       { return nil }

// pgContent is a content engine inside PostgreSQL (pglo, pgchunks) as the
// store protocol drives it (protocol.Content): staged on the pool, a staging
// slot per statement, under a fresh id of blob_ids (ADR 007); claimed, and on
// dedup dropped, inside the joint transaction.
type pgContent struct{ e *Engine }

func (c pgContent) Tier() string { return c.e.content.Tier() }

func (c pgContent) FreshID(ctx context.Context) (int64, bool, error) {
	var id int64
	if err := c.e.pool.QueryRow(ctx, `SELECT nextval('blob_ids')`).Scan(&id); err != nil {
		return 0, false, fmt.Errorf("blob id: %w", mapErr(err))
	}
	return id, true, nil
}

func (c pgContent) Stage(ctx context.Context, id int64, r io.Reader) (protocol.Staged, error) {
	ref, _, err := c.e.content.Stage(ctx, c.e.stager, id, r)
	st := &pgStaged{e: c.e, id: id, ref: ref}
	if err != nil {
		return st, stageErr(err)
	}
	return st, nil
}

// Slot implements protocol.Content: the joint transaction also takes a
// staging slot, so that uploads that finish together cannot take every pool
// connection either.
func (c pgContent) Slot(ctx context.Context) (func(), error) { return c.e.stager.acquire(ctx) }

// pgStaged is content staged under blob id: its stage row owns it until the
// joint transaction claims it.
type pgStaged struct {
	e       *Engine
	id, ref int64
}

func (s *pgStaged) Claim(ctx context.Context, t protocol.Tx) (*uint32, error) {
	tx, err := pgxTx(t)
	if err != nil {
		return nil, err
	}
	oid, err := content.Claim(ctx, tx, s.id)
	if err != nil {
		return nil, stageErr(err)
	}
	return oid, nil
}

// Place drops the claimed content on dedup, in the same transaction (the
// existing blob, locked by the upsert, serves); a new row owns it as it is.
func (s *pgStaged) Place(ctx context.Context, t protocol.Tx, _ int64, inserted bool) error {
	if inserted {
		return nil
	}
	tx, err := pgxTx(t)
	if err != nil {
		return err
	}
	return s.e.content.Drop(ctx, tx, s.id, s.ref)
}

func (s *pgStaged) Placed() int64 { return 0 }

// Unstage drops the stage row and its content in a short transaction. A
// commit that failed but took effect deleted the stage row, so this finds
// nothing: published content is never dropped. If it fails, the stage row
// stays for GC's stage reaper.
func (s *pgStaged) Unstage(ctx context.Context) error {
	err := s.e.withTx(ctx, func(tx pgx.Tx) error {
		found, err := content.Unstage(ctx, tx, s.id, -1)
		if err != nil || found {
			return err
		}
		// GC's reaper took the stage row while a chunk write of this put was
		// in flight: that chunk landed after the reaper's delete. The id is
		// this put's own (a fresh one); without a blob row nothing published
		// uses it. A publish in flight would have made Unstage wait for its
		// claim, so this statement's snapshot sees a committed blob row.
		_, err = tx.Exec(ctx, `DELETE FROM blob_chunks WHERE blob_id = $1
			AND NOT EXISTS (SELECT 1 FROM blobs WHERE id = $1)`, s.id)
		return err
	})
	if err != nil {
		return fmt.Errorf("drop staged content of blob %d (left for GC): %w", s.id, err)
	}
	return nil
}

func (s *pgStaged) Unplace(context.Context, int64) error { return nil }

// stageErr maps a reaped stage to 503: the put can be retried.
func stageErr(err error) error {
	if errors.Is(err, content.ErrStageLost) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return mapErr(err)
}
