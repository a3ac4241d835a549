package content

import (
	"errors"
	"fmt"
	"io"
)

// FetchFunc reads want bytes at off of one blob's content in one short
// statement (no transaction is held between calls).
type FetchFunc func(off, want int64) ([]byte, error)

// NewSpanReader streams n bytes from off, one fetch per ChunkSize-aligned
// piece (never buffering more than one piece). A fetch that returns fewer
// bytes than asked is io.ErrUnexpectedEOF: a short read never looks complete.
// name prefixes errors ("pglo", "pgchunks").
func NewSpanReader(name string, off, n int64, fetch FetchFunc) (io.ReadCloser, error) {
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("%s: bad span %d+%d", name, off, n)
	}
	return &spanReader{name: name, off: off, left: n, fetch: fetch}, nil
}

type spanReader struct {
	name  string
	off   int64 // next offset to fetch
	left  int64 // bytes not yet fetched
	fetch FetchFunc
	buf   []byte
	err   error
}

func (r *spanReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.left == 0 {
			return 0, io.EOF
		}
		want := min(r.left, ChunkSize-r.off%ChunkSize)
		got, err := r.fetch(r.off, want)
		if err != nil {
			r.err = fmt.Errorf("%s: at %d: %w", r.name, r.off, err)
			return 0, r.err
		}
		if int64(len(got)) != want {
			r.err = fmt.Errorf("%s: got %d bytes at %d, want %d: %w", r.name, len(got), r.off, want, io.ErrUnexpectedEOF)
			return 0, r.err
		}
		r.buf = got
		r.off += want
		r.left -= want
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// Close releases the buffer; nothing is held on the server between reads.
func (r *spanReader) Close() error {
	r.buf = nil
	r.err = errors.New(r.name + ": read after close")
	return nil
}
