// Package content defines the interface between the PostgreSQL metadata engine
// (store/pg) and the content engines that keep large blobs inside PostgreSQL
// (store/pglo, store/pgchunks). It is a package of its own so that the engines
// can implement it without importing store/pg, which constructs them.
package content

import (
	"context"
	"io"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ChunkSize is the size of one read or write call to PostgreSQL: large enough
// to amortize a round trip, small enough to keep memory per stream bounded.
const ChunkSize = 1 << 20

// Querier is what both a transaction (pgx.Tx) and a pool (*pgxpool.Pool)
// offer. Reads use the pool in autocommit, one short statement per chunk, so
// that no transaction stays open across a paced stream.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Engine stores the content of large blobs in PostgreSQL.
type Engine interface {
	// Tier is the blob tier this engine writes (store.TierPGLO, ...).
	Tier() string
	// Write streams r to EOF into new content for blob blobID inside tx, and
	// returns the engine's reference to it (the large-object OID for pglo, 0
	// where the blob id is the reference). It returns the number of bytes
	// written. Errors of r are returned wrapped, so errors.Is still sees them.
	Write(ctx context.Context, tx pgx.Tx, blobID int64, r io.Reader) (ref int64, n int64, err error)
	// Drop removes content that Write created in the same transaction, when
	// the blob turned out to exist already (deduplication).
	Drop(ctx context.Context, tx pgx.Tx, blobID, ref int64) error
	// Open returns a reader of n bytes of the content starting at off. It reads
	// through q lazily, one chunk per statement, and never buffers more than a
	// chunk.
	Open(ctx context.Context, q Querier, blobID, ref, off, n int64) (io.ReadCloser, error)
}
