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

// NewReader streams n bytes from off, one fetch per ChunkSize-aligned piece,
// up to ReadAhead of them in flight while it serves one more, into pooled
// buffers. A stalled client stops new fetches; no connection waits on it. A
// piece shorter than asked is io.ErrUnexpectedEOF: a short read never looks
// complete. name prefixes errors ("pglo", "pgchunks").
func NewReader(name string, off, n int64, fetch PieceFunc) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("%s: bad span %d+%d", name, off, n)
	}
	return &reader{name: name, fetch: fetch, next: off, end: off + n}, nil
}

// piece is one fetch in flight.
type piece struct {
	off  int64 // where it starts in the content
	buf  *Buf
	got  []byte
	done chan error // receives the fetch's result once
}

// reader streams [next, end) of one blob.
type reader struct {
	name  string
	fetch PieceFunc
	next  int64    // next offset to fetch
	end   int64    // end of the span
	queue []*piece // fetches in flight, in order
	cur   *piece   // the piece being served
	rest  []byte   // its bytes not yet read
	err   error
}

// fill launches fetches until ReadAhead are in flight or the span is covered.
func (r *reader) fill() {
	for len(r.queue) < ReadAhead && r.next < r.end {
		seq, from := r.next/ChunkSize, r.next%ChunkSize
		to := min(ChunkSize, from+r.end-r.next)
		f := &piece{off: r.next, buf: bufs.Get().(*Buf), done: make(chan error, 1)}
		r.next += to - from
		r.queue = append(r.queue, f)
		go func() {
			got, err := r.fetch(seq, from, to, f.buf)
			if err == nil && int64(len(got)) != to-from {
				err = fmt.Errorf("got %d bytes, want %d: %w", len(got), to-from, io.ErrUnexpectedEOF)
			}
			f.got = got
			f.done <- err
		}()
	}
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
