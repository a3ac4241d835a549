package content

import (
	"context"
	"fmt"
	"io"
)

// Staging is how a chunked engine stages content (Engine.Stage), the staging
// rule of the package doc in one place: the first chunk is written with the
// stage row, in one statement, before anything more is read, so what a client
// sent before it stalls is in PostgreSQL; the rest are read ahead of their
// writes (Pipeline) and written in batches of those already in memory, one
// pipelined round trip each (SendBatch), by statements of ChunkWrite, which
// touch the stage row and write nothing if it is gone. Every statement
// commits without waiting for a WAL flush (AsyncCommit).
type Staging struct {
	// Name labels errors ("pglo").
	Name string
	// First inserts the stage row of blobID together with the first chunk,
	// data (empty for an empty body), in one autocommit statement on db
	// that has AsyncCommit among its FROM items, and returns the engine's
	// reference (Engine.Stage).
	First func(ctx context.Context, db Stager, blobID int64, data []byte) (ref int64, err error)
	// Chunk writes each later chunk: a statement of ChunkWrite.
	Chunk string
	// Args are the arguments of Chunk for chunk c of blobID, blobID first.
	Args func(blobID int64, c Chunk) []any
}

// ChunkWrite is the statement of a staging write after the first. It
// touches the stage row of blob $1 (the stage reaper spares a put that is
// writing) and returns the row's columns returning as s; write, a SELECT or
// INSERT ... SELECT without its FROM, writes the chunk from s. If the row is
// gone, s is empty: the statement writes nothing and affects no row, which
// SendBatch reports as ErrStageLost. Its batch commits without waiting for a
// WAL flush (AsyncCommit).
func ChunkWrite(returning, write string) string {
	return `WITH s AS (
		UPDATE blob_stages SET touched_at = clock_timestamp() WHERE blob_id = $1 RETURNING ` + returning + `)
	` + write + ` FROM s, ` + AsyncCommit
}

// Stage implements Engine.Stage with s.
func (s *Staging) Stage(ctx context.Context, db Stager, blobID int64, r io.Reader) (int64, int64, error) {
	buf := GetBuf()
	defer PutBuf(buf)
	n, eof, err := ReadChunk(r, buf.B[:cap(buf.B)])
	if err != nil {
		return 0, 0, err
	}
	ref, err := s.First(ctx, db, blobID, buf.B[:n])
	if err != nil {
		return 0, 0, fmt.Errorf("%s: stage blob %d: %w", s.Name, blobID, err)
	}
	if eof {
		return ref, int64(n), nil
	}
	rest, err := Pipeline(ctx, r, 1, int64(n), func(ctx context.Context, chunks []Chunk) error {
		return SendBatch(ctx, db, s.Name, blobID, chunks, s.Chunk, func(c Chunk) []any {
			return s.Args(blobID, c)
		})
	})
	return ref, int64(n) + rest, err
}
