// Package content defines the interface between the PostgreSQL metadata engine
// (store/pg) and the content engines that keep large blobs inside PostgreSQL
// (store/pglo, store/pgchunks). It is a package of its own so that the engines
// can implement it without importing store/pg, which constructs them; store/pg
// adapts them to protocol.Content, the content interface of the store
// protocol, which must not see pgx.
//
// Content is staged outside any transaction (ADR 007): a stage row in
// blob_stages owns it until the joint transaction of the put deletes that row
// (Claim) in the same step that inserts the blob row. Every staging write is
// one short autocommit statement that touches the stage row and writes only
// if the row still exists, so content never outlives both owners.
package content

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ChunkSize is the size of one read or write call to PostgreSQL: large enough
// to amortize a round trip, small enough to keep memory per stream bounded.
const ChunkSize = 1 << 20

// Querier is what both a transaction (pgx.Tx) and a pool (*pgxpool.Pool)
// offer. Reads use the pool in autocommit, short statements of a few chunks
// at most, so that no transaction stays open across a paced stream.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// AsyncCommit, a one-row FROM item, turns synchronous_commit off for the
// implicit transaction of the stage statement it is part of (set_config's
// is_local: it ends with that transaction, and a Stager is never a
// transaction). A stage write acknowledges nothing, yet it waited for a WAL
// flush of its own on every statement or batch (16 per 16 MiB part on pglo,
// against one per object for a raw writer), which made staging latency-bound
// on WAL fsyncs, the first thing that a checkpoint's or an autovacuum's
// writes slow down. The joint transaction that publishes the blob commits
// synchronously, and its flush covers every WAL record written before its
// commit record, the stage's included; a crash before it leaves at worst a
// partial stage, which the stage reaper removes (ADR 024).
const AsyncCommit = `(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit`

// Stager runs the autocommit statements of staging: a pool (or a pool behind
// a write-slot limit), never a transaction. Each call borrows a connection
// only for statements whose data is already in memory: one statement, or
// one batch (pipelined, in one implicit transaction) until its results are
// closed.
type Stager interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ErrStageLost reports that the stage row of content being written or
// published is gone: GC reaped it as abandoned (untouched for its stage
// grace). The put cannot publish; its client may retry.
var ErrStageLost = errors.New("staged content was reaped before it was published")

// Engine stores the content of large blobs in PostgreSQL.
type Engine interface {
	// Tier is the blob tier this engine writes (store.TierPGLO, ...).
	Tier() string
	// Stage registers a stage row for blobID and streams r to EOF into new
	// content owned by it, reading each chunk from r before it borrows a
	// connection of db for one autocommit statement. It returns the engine's
	// reference (the large-object OID for pglo, 0 where the blob id is the
	// reference) and the number of bytes written. Errors of r are returned
	// wrapped, so errors.Is still sees them; a stage row reaped meanwhile is
	// ErrStageLost. On error, content written so far stays with its stage
	// row: the caller calls Unstage.
	Stage(ctx context.Context, db Stager, blobID int64, r io.Reader) (ref int64, n int64, err error)
	// Drop removes content whose stage row was claimed in tx, when the blob
	// turned out to exist already (deduplication).
	Drop(ctx context.Context, tx pgx.Tx, blobID, ref int64) error
	// Open returns a reader of n bytes of the content starting at off. It reads
	// through q lazily in short statements, each of at most as many chunks as
	// it has free buffers for, never waits on its reader while holding a
	// connection, and buffers a bounded number of chunks (the engine states
	// how many). Close may wait for statements in flight.
	Open(ctx context.Context, q Querier, blobID, ref, off, n int64) (io.ReadCloser, error)
}

// Claim deletes the stage row of blobID inside the publishing transaction tx
// and returns the large object it owned (nil for none). From then on the
// blob row that tx inserts owns the content, or tx rolls back and the stage
// row is back. A missing row is ErrStageLost.
func Claim(ctx context.Context, tx pgx.Tx, blobID int64) (*uint32, error) {
	var oid *uint32
	err := tx.QueryRow(ctx, `DELETE FROM blob_stages WHERE blob_id = $1 RETURNING lo_oid`, blobID).Scan(&oid)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("claim staged blob %d: %w", blobID, ErrStageLost)
	}
	if err != nil {
		return nil, fmt.Errorf("claim staged blob %d: %w", blobID, err)
	}
	return oid, nil
}

// Unstage deletes the stage row of blobID, if it was untouched for at least
// idle (a negative idle: whatever its age), together with the content it
// owns, inside tx. It reports whether a row was deleted. A stage row already
// claimed by a committed publish is not there, so nothing published is ever
// dropped; one claimed by a publish in flight makes this wait for it (bound
// the wait with lock_timeout). A staging write in flight touches the row, so
// the age re-check after such a wait spares it.
func Unstage(ctx context.Context, tx pgx.Tx, blobID int64, idle time.Duration) (bool, error) {
	var oid *uint32
	err := tx.QueryRow(ctx, `DELETE FROM blob_stages WHERE blob_id = $1
		AND touched_at <= clock_timestamp() - $2::bigint * interval '1 microsecond'
		RETURNING lo_oid`, blobID, idle.Microseconds()).Scan(&oid)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("unstage blob %d: %w", blobID, err)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM blob_chunks WHERE blob_id = $1`, blobID); err != nil {
		return false, fmt.Errorf("unstage blob %d: drop chunks: %w", blobID, err)
	}
	if oid != nil {
		if _, err := tx.Exec(ctx, `SELECT lo_unlink(oid) FROM pg_largeobject_metadata WHERE oid = $1`, *oid); err != nil {
			return false, fmt.Errorf("unstage blob %d: lo_unlink %d: %w", blobID, *oid, err)
		}
	}
	return true, nil
}

// ReadChunk fills buf from r. It returns the bytes read and whether r is
// exhausted (io.EOF). Any other error, a reader's own io.ErrUnexpectedEOF
// included (a truncated body must not look complete), is returned wrapped.
func ReadChunk(r io.Reader, buf []byte) (int, bool, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err == io.EOF {
			return n, true, nil
		}
		if err != nil {
			return n, false, fmt.Errorf("read content: %w", err)
		}
	}
	return n, false, nil
}
