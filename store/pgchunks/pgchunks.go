// Package pgchunks stores large blobs as 1 MiB bytea rows in the table
// blob_chunks (created by store/pg's migrations, STORAGE EXTERNAL so that
// PostgreSQL does not try to compress content and can read slices of a row
// without detoasting all of it).
//
// Rows are staged in short autocommit statements before the joint
// transaction of the put publishes them (ADR 007); reads are one short
// autocommit statement per chunk, a few of them in flight. Unlike large objects, the rows travel
// through logical replication.
package pgchunks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

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

// Stage implements content.Engine; the reference is 0 (the blob id keys the
// rows). Each chunk is read whole from r first, then inserted by one
// autocommit statement that touches the stage row and inserts nothing if the
// row is gone.
func (e *Engine) Stage(ctx context.Context, db content.Stager, blobID int64, r io.Reader) (int64, int64, error) {
	if _, err := db.Exec(ctx, `INSERT INTO blob_stages (blob_id) VALUES ($1)`, blobID); err != nil {
		return 0, 0, fmt.Errorf("pgchunks: register stage of blob %d: %w", blobID, err)
	}
	buf := make([]byte, content.ChunkSize)
	var total int64
	for seq := int32(0); ; seq++ {
		n, eof, err := content.ReadChunk(r, buf)
		if err != nil {
			return 0, total, err
		}
		if n > 0 {
			tag, err := db.Exec(ctx, `WITH s AS (
					UPDATE blob_stages SET touched_at = clock_timestamp() WHERE blob_id = $1 RETURNING blob_id)
				INSERT INTO blob_chunks (blob_id, seq, data) SELECT blob_id, $2, $3 FROM s`,
				blobID, seq, buf[:n])
			if err != nil {
				return 0, total, fmt.Errorf("pgchunks: insert chunk %d of blob %d: %w", seq, blobID, err)
			}
			if tag.RowsAffected() != 1 {
				return 0, total, fmt.Errorf("pgchunks: chunk %d of blob %d: %w", seq, blobID, content.ErrStageLost)
			}
			total += int64(n)
		}
		if eof {
			return 0, total, nil
		}
	}
}

// Drop implements content.Engine.
func (e *Engine) Drop(ctx context.Context, tx pgx.Tx, blobID, _ int64) error {
	if _, err := tx.Exec(ctx, `DELETE FROM blob_chunks WHERE blob_id = $1`, blobID); err != nil {
		return fmt.Errorf("pgchunks: drop blob %d: %w", blobID, err)
	}
	return nil
}

// Open implements content.Engine. Pieces are fetched in order, up to
// readAhead at a time, each by its own short autocommit statement: a whole
// row, sliced here (SELECT data costs PostgreSQL much less than substring()),
// except a small piece at the edge of a range, read alone with substring()
// (STORAGE EXTERNAL reads only that slice). A stalled client stops new
// fetches; no connection waits on it.
func (e *Engine) Open(ctx context.Context, q content.Querier, blobID, _ int64, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("pgchunks: bad span %d+%d", off, n)
	}
	return &reader{ctx: ctx, q: q, blobID: blobID, next: off, end: off + n}, nil
}

// readAhead is the number of chunk fetches a stream keeps in flight while it
// serves one more: a stream holds at most (readAhead+1) × content.ChunkSize
// bytes of buffers. One in flight read about half as fast here; three no
// faster than two (BenchmarkPGChunksGet).
const readAhead = 2

// substringMax is the largest piece read with substring() rather than as a
// whole row: a range of a few bytes should not cost a 1 MiB transfer.
const substringMax = content.ChunkSize / 4

// bufs holds chunk buffers (cap content.ChunkSize) for reuse across streams:
// scanning into a fresh slice per chunk cost a 1 MiB allocation and zeroing.
var bufs = sync.Pool{New: func() any { return &chunkBuf{b: make([]byte, 0, content.ChunkSize)} }}

// chunkBuf is a pgx scan target that copies a bytea into its own buffer.
type chunkBuf struct{ b []byte }

// ScanBytes implements pgtype.BytesScanner.
func (c *chunkBuf) ScanBytes(v []byte) error {
	if len(v) > content.ChunkSize {
		return fmt.Errorf("chunk of %d bytes, more than %d", len(v), content.ChunkSize)
	}
	c.b = append(c.b[:0], v...)
	return nil
}

// fetch is one piece in flight: bytes [from, to) of chunk seq.
type fetch struct {
	seq      int32
	from, to int64
	buf      *chunkBuf
	done     chan error // receives the fetch's result once
}

// reader streams [next, end) of one blob.
type reader struct {
	ctx    context.Context
	q      content.Querier
	blobID int64
	next   int64    // next offset to fetch
	end    int64    // end of the span
	queue  []*fetch // fetches in flight, in order
	cur    *fetch   // the piece being served
	rest   []byte   // its bytes not yet read
	err    error
}

// fill launches fetches until readAhead are in flight or the span is covered.
func (r *reader) fill() {
	for len(r.queue) < readAhead && r.next < r.end {
		from := r.next % content.ChunkSize
		f := &fetch{seq: int32(r.next / content.ChunkSize), from: from, to: min(content.ChunkSize, from+r.end-r.next),
			buf: bufs.Get().(*chunkBuf), done: make(chan error, 1)}
		r.next += f.to - f.from
		r.queue = append(r.queue, f)
		go func() { f.done <- r.fetch(f) }()
	}
}

// fetch reads one piece into f.buf in one statement. A missing row, or one
// shorter than the piece needs, is io.ErrUnexpectedEOF: a blob deleted under
// the read-ahead ends the stream, never with other bytes.
func (r *reader) fetch(f *fetch) error {
	var err error
	want := f.to - f.from
	if want <= substringMax && want < content.ChunkSize {
		// substring is 1-based.
		err = r.q.QueryRow(r.ctx, `SELECT substring(data FROM $3 FOR $4) FROM blob_chunks WHERE blob_id = $1 AND seq = $2`,
			r.blobID, f.seq, int32(f.from+1), int32(want)).Scan(f.buf)
		f.from, f.to = 0, want
	} else {
		err = r.q.QueryRow(r.ctx, `SELECT data FROM blob_chunks WHERE blob_id = $1 AND seq = $2`, r.blobID, f.seq).Scan(f.buf)
	}
	switch got := int64(len(f.buf.b)); {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("chunk %d missing: %w", f.seq, io.ErrUnexpectedEOF)
	case err != nil:
		return fmt.Errorf("chunk %d: %w", f.seq, err)
	case got < f.to:
		return fmt.Errorf("chunk %d: got %d bytes, want %d: %w", f.seq, got-f.from, f.to-f.from, io.ErrUnexpectedEOF)
	}
	return nil
}

// Read implements io.Reader. Errors are sticky.
func (r *reader) Read(p []byte) (int, error) {
	for len(r.rest) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.release()
		r.fill()
		if len(r.queue) == 0 {
			return 0, io.EOF
		}
		r.cur, r.queue = r.queue[0], r.queue[1:]
		if err := <-r.cur.done; err != nil {
			r.err = fmt.Errorf("pgchunks: blob %d: %w", r.blobID, err)
			return 0, r.err
		}
		r.rest = r.cur.buf.b[r.cur.from:r.cur.to]
		r.fill()
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

// release returns the served piece's buffer to the pool.
func (r *reader) release() {
	if r.cur != nil {
		bufs.Put(r.cur.buf)
		r.cur, r.rest = nil, nil
	}
}

// Close waits for the fetches in flight (short statements, bounded by the
// stream's context) and returns their buffers; later reads fail.
func (r *reader) Close() error {
	r.release()
	for _, f := range r.queue {
		<-f.done
		bufs.Put(f.buf)
	}
	r.queue, r.next = nil, r.end
	r.err = errors.New("pgchunks: read after close")
	return nil
}
