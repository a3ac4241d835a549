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

// Stage implements content.Engine: the first chunk creates the large object
// and its stage row in one statement; the rest are read ahead of their
// writes (content.Pipeline) and written in batches of those already in
// memory, one pipelined round trip each, by lo_put statements that touch the
// stage row and write nothing if the row is gone. The OID is the reference.
func (e *Engine) Stage(ctx context.Context, db content.Stager, blobID int64, r io.Reader) (int64, int64, error) {
	buf := content.GetBuf()
	defer content.PutBuf(buf)
	n, eof, err := content.ReadChunk(r, buf.B[:cap(buf.B)])
	if err != nil {
		return 0, 0, err
	}
	var oid uint32
	if err := db.QueryRow(ctx, `INSERT INTO blob_stages (blob_id, lo_oid)
		SELECT $1, lo_from_bytea(0, $2) FROM `+content.AsyncCommit+` RETURNING lo_oid`, blobID, buf.B[:n]).Scan(&oid); err != nil {
		return 0, 0, fmt.Errorf("pglo: stage blob %d: lo_from_bytea: %w", blobID, err)
	}
	if eof {
		return int64(oid), int64(n), nil
	}
	rest, err := content.Pipeline(ctx, r, 1, int64(n), func(ctx context.Context, chunks []content.Chunk) error {
		return content.SendBatch(ctx, db, "pglo", blobID, chunks, putChunk, func(c content.Chunk) []any {
			return []any{blobID, c.Off, c.Data}
		})
	})
	return int64(oid), int64(n) + rest, err
}

// putChunk writes one chunk at its offset if the stage row still exists, and
// touches that row (the stage reaper spares a put that is writing).
const putChunk = `WITH s AS (
		UPDATE blob_stages SET touched_at = clock_timestamp() WHERE blob_id = $1 RETURNING lo_oid)
	SELECT lo_put(s.lo_oid, $2, $3) FROM s, ` + content.AsyncCommit

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
