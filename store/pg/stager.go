package pg

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store/pg/content"
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
