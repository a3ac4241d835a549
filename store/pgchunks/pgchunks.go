// Package pgchunks stores large blobs as 1 MiB bytea rows in the table
// blob_chunks (created by store/pg's migrations, STORAGE EXTERNAL so that
// PostgreSQL does not try to compress content and can read slices of a row
// without detoasting all of it).
//
// Rows are staged in short autocommit statements before the joint
// transaction of the put publishes them (ADR 007); reads are short
// autocommit statements of a few whole rows each, read ahead within a bounded
// window (content.NewRowsReader). Unlike large objects, the rows travel
// through logical replication.
package pgchunks

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg/content"
)

// Engine is the chunked-bytea content engine. Rows are keyed by
// (blob id, seq); every chunk but the last holds exactly content.ChunkSize
// bytes, which is what lets a read find the row of an offset.
type Engine struct{}

var _ content.Engine = (*Engine)(nil)

// New returns the engine.
func New() *Engine { return &Engine{} }

// Tier implements content.Engine.
func (e *Engine) Tier() string { return store.TierPGChunks }

// Stage implements content.Engine (content.Staging); the reference is 0
// (the blob id keys the rows). The first chunk is inserted by the statement
// that inserts the stage row, unless the body is empty; each later chunk is
// one row (blob id, seq).
func (e *Engine) Stage(ctx context.Context, db content.Stager, blobID int64, r io.Reader) (int64, int64, error) {
	return staging.Stage(ctx, db, blobID, r)
}

var staging = content.Staging{
	Name: "pgchunks",
	First: func(ctx context.Context, db content.Stager, blobID int64, data []byte) (int64, error) {
		_, err := db.Exec(ctx, `WITH s AS (INSERT INTO blob_stages (blob_id) VALUES ($1) RETURNING blob_id)
		INSERT INTO blob_chunks (blob_id, seq, data) SELECT blob_id, 0, $2 FROM s, `+content.AsyncCommit+` WHERE $3`,
			blobID, data, len(data) > 0)
		return 0, err
	},
	Chunk: content.ChunkWrite("blob_id", `INSERT INTO blob_chunks (blob_id, seq, data) SELECT blob_id, $2, $3`),
	Args: func(blobID int64, c content.Chunk) []any {
		return []any{blobID, c.Seq, c.Data}
	},
}

// Drop implements content.Engine.
func (e *Engine) Drop(ctx context.Context, tx pgx.Tx, blobID, _ int64) error {
	if _, err := tx.Exec(ctx, `DELETE FROM blob_chunks WHERE blob_id = $1`, blobID); err != nil {
		return fmt.Errorf("pgchunks: drop blob %d: %w", blobID, err)
	}
	return nil
}

// Open implements content.Engine. Pieces are fetched by content.NewRowsReader:
// whole rows, a few per short autocommit statement (SELECT data costs
// PostgreSQL much less than substring()), sliced at the edges of the span,
// except a small piece at the edge of a range, read alone with substring()
// (STORAGE EXTERNAL reads only that slice). A missing row is
// io.ErrUnexpectedEOF: a blob deleted under the read-ahead ends the stream,
// never with other bytes.
func (e *Engine) Open(ctx context.Context, q content.Querier, blobID, _ int64, off, n int64) (io.ReadCloser, error) {
	piece := func(seq, from, to int64, buf *content.Buf) ([]byte, error) {
		// substring is 1-based.
		err := q.QueryRow(ctx, `SELECT substring(data FROM $3 FOR $4) FROM blob_chunks WHERE blob_id = $1 AND seq = $2`,
			blobID, int32(seq), int32(from+1), int32(to-from)).Scan(buf)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil, fmt.Errorf("blob %d chunk %d missing: %w", blobID, seq, io.ErrUnexpectedEOF)
		case err != nil:
			return nil, fmt.Errorf("blob %d chunk %d: %w", blobID, seq, err)
		}
		return buf.B, nil
	}
	rows := func(seq int64, bufs []*content.Buf, got func(int)) error {
		return readRows(ctx, q, blobID, seq, bufs, got)
	}
	return content.NewRowsReader("pgchunks", off, n, piece, rows, substringMax)
}

// readRows reads the rows seq .. seq+len(bufs)-1 of a blob in one statement
// (content.RowsFunc). A gap, a missing row at the end included, is
// io.ErrUnexpectedEOF.
func readRows(ctx context.Context, q content.Querier, blobID, seq int64, bufs []*content.Buf, got func(int)) error {
	rows, err := q.Query(ctx, `SELECT seq, data FROM blob_chunks WHERE blob_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq`,
		blobID, int32(seq), int32(seq+int64(len(bufs))))
	if err != nil {
		return fmt.Errorf("blob %d chunks %d+%d: %w", blobID, seq, len(bufs), err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var s int32
		if i == len(bufs) {
			return fmt.Errorf("blob %d chunks %d+%d: more rows than asked", blobID, seq, len(bufs))
		}
		if err := rows.Scan(&s, bufs[i]); err != nil {
			return fmt.Errorf("blob %d chunk %d: %w", blobID, seq+int64(i), err)
		}
		if int64(s) != seq+int64(i) {
			break
		}
		got(i)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("blob %d chunks %d+%d: %w", blobID, seq, len(bufs), err)
	}
	if i < len(bufs) {
		return fmt.Errorf("blob %d chunk %d missing: %w", blobID, seq+int64(i), io.ErrUnexpectedEOF)
	}
	return nil
}

// substringMax is the largest piece read with substring() rather than as a
// whole row: a range of a few bytes should not cost a 1 MiB transfer.
const substringMax = content.ChunkSize / 4
