package content

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// ReadAhead is the number of piece fetches a stream keeps in flight while it
// serves one more: a stream holds at most (ReadAhead+1) × ChunkSize bytes of
// buffers. One in flight read about half as fast here; three no faster than
// two (BenchmarkPGChunksGet).
const ReadAhead = 2

// Buf is a pooled piece buffer (capacity ChunkSize) and a pgx scan target
// that copies a bytea into itself: scanning into a fresh slice per chunk cost
// a 1 MiB allocation and zeroing.
type Buf struct{ B []byte }

// ScanBytes implements pgtype.BytesScanner.
func (c *Buf) ScanBytes(v []byte) error {
	if len(v) > ChunkSize {
		return fmt.Errorf("chunk of %d bytes, more than %d", len(v), ChunkSize)
	}
	c.B = append(c.B[:0], v...)
	return nil
}

var bufs = sync.Pool{New: func() any { return &Buf{B: make([]byte, 0, ChunkSize)} }}

// PieceFunc reads bytes [from, to) of chunk seq (offsets inside the chunk;
// chunk seq starts at seq × ChunkSize) in one short statement into buf, and
// returns them: a slice of buf.B, shorter if the content is. No transaction
// is held between calls; calls run concurrently.
type PieceFunc func(seq, from, to int64, buf *Buf) ([]byte, error)

// RowsFunc reads the whole chunks seq, seq+1, ..., seq+len(bufs)-1 in one
// short statement, in order, chunk i into bufs[i], and calls got(i) as soon
// as chunk i is in its buffer (got never blocks: every row has its buffer
// before the statement is sent, so the connection never waits on the
// stream's reader). A missing chunk is an error wrapping io.ErrUnexpectedEOF.
type RowsFunc func(seq int64, bufs []*Buf, got func(i int)) error

// Rows-reader window: up to RowsWindow chunks in flight or ready, fetched by
// statements of RowsBatch of them (fewer only at the edges of the span), so
// a stream holds at most (RowsWindow+1) × ChunkSize bytes of buffers, sends
// one statement per RowsBatch chunks and keeps up to RowsWindow/RowsBatch
// statements in flight (on as many PostgreSQL backends: one 4-row statement
// read a single stream about a quarter slower than two of 2 rows).
const (
	RowsWindow = 4
	RowsBatch  = 2
)

// NewReader streams n bytes from off, one fetch per ChunkSize-aligned piece,
// up to ReadAhead of them in flight while it serves one more, into pooled
// buffers. A stalled client stops new fetches; no connection waits on it. A
// piece shorter than asked is io.ErrUnexpectedEOF: a short read never looks
// complete. name prefixes errors ("pglo", "pgchunks").
func NewReader(name string, off, n int64, fetch PieceFunc) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("%s: bad span %d+%d", name, off, n)
	}
	return &reader{name: name, fetch: fetch, next: off, end: off + n, window: ReadAhead}, nil
}

// NewRowsReader is NewReader for content that can read several whole chunks
// in one statement (RowsFunc): pieces longer than pieceMax are read as whole
// chunks, several per statement (RowsWindow, RowsBatch), and sliced; shorter
// ones (the edges of a small range) are read alone by fetch.
func NewRowsReader(name string, off, n int64, fetch PieceFunc, rows RowsFunc, pieceMax int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("%s: bad span %d+%d", name, off, n)
	}
	return &reader{name: name, fetch: fetch, rows: rows, pieceMax: pieceMax,
		next: off, end: off + n, window: RowsWindow}, nil
}

// piece is one fetch in flight.
type piece struct {
	off      int64 // where it starts in the content
	from, to int64 // its bytes in its chunk
	buf      *Buf
	got      []byte
	done     chan error // receives the fetch's result once
}

// reader streams [next, end) of one blob.
type reader struct {
	name     string
	fetch    PieceFunc
	rows     RowsFunc // nil: every piece by fetch
	pieceMax int64    // pieces up to this long go to fetch even with rows
	window   int      // pieces in flight or ready, at most
	next     int64    // next offset to fetch
	end      int64    // end of the span
	queue    []*piece // fetches in flight, in order
	cur      *piece   // the piece being served
	rest     []byte   // its bytes not yet read
	err      error
}

// pieceAt returns the chunk of offset at and the bytes [from, to) of it that
// a piece starting there covers.
func (r *reader) pieceAt(at int64) (seq, from, to int64) {
	seq, from = at/ChunkSize, at%ChunkSize
	return seq, from, min(ChunkSize, from+r.end-at)
}

// fill launches fetches until the window is full or the span is covered.
func (r *reader) fill() {
	for len(r.queue) < r.window && r.next < r.end {
		seq, from, to := r.pieceAt(r.next)
		if r.rows != nil && to-from > r.pieceMax {
			if !r.fillRows() {
				return
			}
			continue
		}
		f := &piece{off: r.next, from: from, to: to, buf: GetBuf(), done: make(chan error, 1)}
		r.next += to - from
		r.queue = append(r.queue, f)
		go func() {
			got, err := r.fetch(seq, f.from, f.to, f.buf)
			f.done <- f.settle(got, err)
		}()
	}
}

// fillRows launches one statement for up to RowsBatch whole-chunk pieces
// from r.next, unless the window alone holds them to fewer while others are
// still ahead of the reader; it reports whether it launched one.
func (r *reader) fillRows() bool {
	free := r.window - len(r.queue)
	seq0 := r.next / ChunkSize
	var batch []*piece
	for at := r.next; len(batch) < min(free, RowsBatch) && at < r.end; {
		seq, from, to := r.pieceAt(at)
		if to-from <= r.pieceMax || seq != seq0+int64(len(batch)) {
			break
		}
		batch = append(batch, &piece{off: at, from: from, to: to})
		at += to - from
	}
	if len(batch) == free && free < RowsBatch && len(r.queue) > 0 {
		return false // only the window stops it: wait for room; pieces are still ahead
	}
	last := batch[len(batch)-1]
	bufs := make([]*Buf, len(batch))
	for i, f := range batch {
		f.buf, f.done = GetBuf(), make(chan error, 1)
		bufs[i] = f.buf
		r.queue = append(r.queue, f)
	}
	r.next = last.off + last.to - last.from
	go func() {
		sent := 0
		err := r.rows(seq0, bufs, func(i int) {
			f := batch[i]
			b := f.buf.B
			f.done <- f.settle(b[min(f.from, int64(len(b))):min(f.to, int64(len(b)))], nil)
			sent = i + 1
		})
		if err == nil && sent < len(batch) {
			err = fmt.Errorf("chunk %d missing: %w", seq0+int64(sent), io.ErrUnexpectedEOF)
		}
		for _, f := range batch[sent:] {
			f.done <- err
		}
	}()
	return true
}

// settle records a fetch's bytes and returns its result: a piece shorter
// than asked is io.ErrUnexpectedEOF.
func (f *piece) settle(got []byte, err error) error {
	if err == nil && int64(len(got)) != f.to-f.from {
		err = fmt.Errorf("got %d bytes, want %d: %w", len(got), f.to-f.from, io.ErrUnexpectedEOF)
	}
	f.got = got
	return err
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
			r.err = fmt.Errorf("%s: at %d: %w", r.name, r.cur.off, err)
			return 0, r.err
		}
		r.rest = r.cur.got
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
	r.err = errors.New(r.name + ": read after close")
	return nil
}
