package content

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// countingReader counts the bytes read from it, and fails with err (if not
// nil) once failAt bytes were read.
type countingReader struct {
	r      io.Reader
	read   atomic.Int64
	failAt int64
	err    error
	onRead func(read int64) // before each Read, with the bytes read so far
}

func (c *countingReader) Read(p []byte) (int, error) {
	read := c.read.Load()
	if c.onRead != nil {
		c.onRead(read)
	}
	if c.err != nil {
		if read >= c.failAt {
			return 0, c.err
		}
		p = p[:min(int64(len(p)), c.failAt-read)]
	}
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

var errWrite = errors.New("write failed")

func TestPipeline(t *testing.T) {
	defer goleak.VerifyNone(t)
	data := make([]byte, 12*ChunkSize+5)
	for i := range data {
		data[i] = byte(i*7 + i>>20)
	}
	errRead := errors.New("read failed")
	tests := []struct {
		name      string
		size      int
		failAt    int64 // the body fails there (0: never)
		failCall  int   // that write call fails (from 1; 0: never)
		cancel    int   // that write call cancels the context first
		want      error
		wholeRead bool // the body is read to its end
	}{
		{name: "whole", size: len(data), wholeRead: true},
		{name: "empty", size: 0, wholeRead: true},
		{name: "one short chunk", size: 10, wholeRead: true},
		{name: "exact chunks", size: 3 * ChunkSize, wholeRead: true},
		{name: "body fails", size: len(data), failAt: 3*ChunkSize + 17, want: errRead},
		{name: "write fails", size: len(data), failCall: 2, want: errWrite},
		{name: "context canceled", size: len(data), cancel: 2, want: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			src := &countingReader{r: bytes.NewReader(data[:tc.size]), failAt: tc.failAt}
			if tc.failAt > 0 {
				src.err = errRead
			}
			var got []byte
			var calls, inWrite atomic.Int32
			var written atomic.Int64 // chunks whose write call returned
			var ahead atomic.Int64   // most chunks read and not yet written
			src.onRead = func(read int64) {
				// The chunk being filled counts: it holds a buffer.
				if d := read/ChunkSize + 1 - written.Load(); d > ahead.Load() {
					ahead.Store(d)
				}
			}
			const seq0, off0 = 3, 1000
			n, err := Pipeline(ctx, src, seq0, off0, func(ctx context.Context, chunks []Chunk) error {
				if inWrite.Add(1) != 1 {
					t.Error("write called concurrently with itself")
				}
				defer inWrite.Add(-1)
				// Every call gives its buffers back when it returns.
				defer written.Add(int64(len(chunks)))
				call := int(calls.Add(1))
				if call == tc.cancel {
					cancel()
				}
				if call == tc.failCall {
					return errWrite
				}
				for _, c := range chunks {
					if wantSeq := seq0 + int32(len(got)/ChunkSize); c.Seq != wantSeq || c.Off != off0+int64(len(got)) {
						t.Errorf("chunk %d at %d, want %d at %d", c.Seq, c.Off, wantSeq, off0+len(got))
					}
					got = append(got, c.Data...)
					// A writer much slower than the reader: the reader
					// runs ahead as far as its buffers let it.
					for range 8 {
						sha256.Sum256(c.Data)
					}
				}
				return nil
			})
			if tc.want == nil && err != nil || !errors.Is(err, tc.want) {
				t.Fatalf("Pipeline: %v, want %v", err, tc.want)
			}
			if tc.want == nil {
				if n != int64(tc.size) || !bytes.Equal(got, data[:tc.size]) {
					t.Errorf("wrote %d bytes (returned %d), want the %d of the body", len(got), n, tc.size)
				}
				if tc.size == 0 && calls.Load() != 0 {
					t.Errorf("%d writes of an empty body", calls.Load())
				}
			} else if !bytes.Equal(got, data[:len(got)]) {
				t.Error("the chunks written before the failure are not a prefix of the body")
			}
			if read := src.read.Load(); tc.wholeRead != (read == int64(tc.size)) {
				t.Errorf("read %d of %d bytes of the body", read, tc.size)
			}
			if a := ahead.Load(); a > WriteAhead {
				t.Errorf("the reader ran %d chunks ahead of the writes, more than WriteAhead (%d)", a, WriteAhead)
			}
		})
	}
}
