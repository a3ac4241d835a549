package content

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// WriteAhead is the number of chunk buffers of one staging pipeline: while
// its writer has one batch of them in PostgreSQL, the reader fills the rest
// from the client, so network, hashing and PostgreSQL overlap. A put holds at
// most WriteAhead × ChunkSize bytes of chunks (plus pgx's encoding of the
// batch in flight). BenchmarkPGChunksPut measured 2 and 4 level and one
// buffer (no overlap) much slower.
const WriteAhead = 4

// Chunk is one chunk of content read from the client, in memory, waiting
// for its write: Data is the chunk's bytes at content offset Off, chunk
// number Seq.
type Chunk struct {
	Seq  int32
	Off  int64
	Data []byte
	buf  *Buf
}

// BatchFunc writes chunks, already in memory, in one round of statements
// (typically one pgx batch: one pipelined round trip, one implicit
// transaction). It is never called concurrently with itself.
type BatchFunc func(ctx context.Context, chunks []Chunk) error

// Pipeline streams r to EOF into write. The calling goroutine reads r one
// chunk at a time into WriteAhead pooled buffers; one writer goroutine hands
// write every chunk read since its last call. So a connection is borrowed
// only for chunks already in memory (ADR 007), and never waits on the
// client. seq and off number the first chunk (a put whose first chunk was
// written otherwise starts after it).
//
// Pipeline returns once no write is in flight: the bytes read, and the first
// error, the reader's (wrapped, errors.Is sees it) before the writer's. A
// failed write stops the reader at its next chunk; a canceled ctx stops
// both. Chunks written before an error stay (their stage row owns them).
func Pipeline(ctx context.Context, r io.Reader, seq int32, off int64, write BatchFunc) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// Both channels hold every buffer there is, so sends never block.
	free := make(chan *Buf, WriteAhead)
	ready := make(chan Chunk, WriteAhead)
	for range WriteAhead {
		free <- GetBuf()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		batch := make([]Chunk, 0, WriteAhead)
		for c := range ready {
			batch = append(batch[:0], c)
			batch = drain(ready, batch)
			if ctx.Err() == nil {
				if err := write(ctx, batch); err != nil {
					cancel(err)
				}
			}
			for _, c := range batch {
				free <- c.buf
			}
		}
	})
	start := off
	var rerr error
	for {
		var buf *Buf
		select {
		case buf = <-free:
		case <-ctx.Done():
		}
		if buf != nil && ctx.Err() != nil {
			// Both were ready: a failed write stops the reader at once.
			free <- buf
			buf = nil
		}
		if buf == nil {
			break
		}
		k, eof, err := ReadChunk(r, buf.B[:cap(buf.B)])
		if err != nil {
			rerr = err
			free <- buf
			break
		}
		if k > 0 {
			ready <- Chunk{Seq: seq, Off: off, Data: buf.B[:k], buf: buf}
			seq++
			off += int64(k)
		} else {
			free <- buf
		}
		if eof {
			break
		}
	}
	close(ready)
	wg.Wait()
	for range WriteAhead {
		PutBuf(<-free)
	}
	if rerr != nil {
		return off - start, rerr
	}
	if err := context.Cause(ctx); err != nil {
		return off - start, err
	}
	return off - start, nil
}

// GetBuf returns a pooled chunk buffer (capacity ChunkSize); PutBuf gives it
// back.
func GetBuf() *Buf { return bufs.Get().(*Buf) }

// PutBuf gives back a buffer of GetBuf.
func PutBuf(b *Buf) { bufs.Put(b) }

// drain appends to batch the chunks ready now, up to its capacity.
func drain(ready <-chan Chunk, batch []Chunk) []Chunk {
	for len(batch) < cap(batch) {
		select {
		case c, ok := <-ready:
			if !ok {
				return batch
			}
			batch = append(batch, c)
		default:
			return batch
		}
	}
	return batch
}

// SendBatch runs one batch statement per chunk on db, each with the
// arguments args(chunk), as one pipelined round trip (one implicit
// transaction: a failing statement rolls the whole batch back). Each
// statement must affect exactly one row, or the stage row is gone:
// ErrStageLost. name and blobID label errors.
func SendBatch(ctx context.Context, db Stager, name string, blobID int64, chunks []Chunk, sql string, args func(Chunk) []any) error {
	b := &pgx.Batch{}
	for _, c := range chunks {
		b.Queue(sql, args(c)...).Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("%s: chunk %d of blob %d: %w", name, c.Seq, blobID, ErrStageLost)
			}
			return nil
		})
	}
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, ErrStageLost) {
			return err
		}
		return fmt.Errorf("%s: write chunks %d-%d of blob %d: %w", name, chunks[0].Seq, chunks[len(chunks)-1].Seq, blobID, err)
	}
	return nil
}
