// Package pglo stores large blobs as PostgreSQL large objects.
//
// Writes are staged in short autocommit statements under a stage row before
// the joint transaction of the put publishes them (ADR 007); reads use lo_get(oid, off,
// len) in autocommit, one short statement per chunk, two of them in flight
// ahead of the client (content.NewReader), so that no transaction is held
// open across a (possibly paced) stream. Large objects do not travel
// through logical replication; physical replication and pg_dump carry them.
package pglo

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg/content"
)

// Engine is the large-object content engine. It writes with lo_from_bytea
// and lo_put, one plain statement per 1 MiB chunk: BenchmarkPGLOWrite
// measured that on par with the descriptor API (lo_open/lowrite), and unlike
// a descriptor, which lives only inside its transaction, it needs no
// transaction across chunks (ADR 007).
type Engine struct{}

var _ content.Engine = (*Engine)(nil)

// New returns the engine.
func New() *Engine { return &Engine{} }

// Tier implements content.Engine.
func (e *Engine) Tier() string { return store.TierPGLO }

// Stage implements content.Engine (content.Staging): the first chunk
// creates the large object (lo_from_bytea) and its stage row in one
// statement; each later chunk is one lo_put at its offset. The OID is the
// reference.
func (e *Engine) Stage(ctx context.Context, db content.Stager, blobID int64, r io.Reader) (int64, int64, error) {
	return staging.Stage(ctx, db, blobID, r)
}

var staging = content.Staging{
	Name: "pglo",
	First: func(ctx context.Context, db content.Stager, blobID int64, data []byte) (int64, error) {
		var oid uint32
		if err := db.QueryRow(ctx, `INSERT INTO blob_stages (blob_id, lo_oid)
		SELECT $1, lo_from_bytea(0, $2) FROM `+content.AsyncCommit+` RETURNING lo_oid`, blobID, data).Scan(&oid); err != nil {
			return 0, fmt.Errorf("lo_from_bytea: %w", err)
		}
		return int64(oid), nil
	},
	Chunk: content.ChunkWrite("lo_oid", `SELECT lo_put(s.lo_oid, $2, $3)`),
	Args: func(blobID int64, c content.Chunk) []any {
		return []any{blobID, c.Off, c.Data}
	},
}

// Drop implements content.Engine.
func (e *Engine) Drop(ctx context.Context, tx pgx.Tx, _ int64, ref int64) error {
	if _, err := tx.Exec(ctx, `SELECT lo_unlink($1)`, uint32(ref)); err != nil {
		return fmt.Errorf("pglo: lo_unlink %d: %w", ref, err)
	}
	return nil
}

// Open implements content.Engine: each piece is one lo_get statement on q,
// read ahead by content.NewReader into pooled buffers; a piece is all of its
// 1 MiB chunk but at the edges of a range, where lo_get reads from the
// range's own offset.
func (e *Engine) Open(ctx context.Context, q content.Querier, _ int64, ref, off, n int64) (io.ReadCloser, error) {
	oid := uint32(ref)
	return content.NewReader("pglo", off, n, func(seq, from, to int64, buf *content.Buf) ([]byte, error) {
		if err := q.QueryRow(ctx, `SELECT lo_get($1, $2, $3)`, oid, seq*content.ChunkSize+from, int32(to-from)).Scan(buf); err != nil {
			return nil, fmt.Errorf("lo_get %d: %w", oid, err)
		}
		return buf.B, nil
	})
}
