package content

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
	"testing"
)

func TestReader(t *testing.T) {
	data := make([]byte, 3*ChunkSize+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	tests := []struct {
		name      string
		off, n    int64
		short     bool // the fetch returns one byte too few
		wantCalls int
	}{
		{name: "whole", off: 0, n: int64(len(data)), wantCalls: 4},
		{name: "unaligned start stays row-aligned", off: ChunkSize - 10, n: 20, wantCalls: 2},
		{name: "empty", off: 5, n: 0, wantCalls: 0},
		{name: "short fetch", off: 0, n: 100, short: true, wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			r, err := NewReader("test", tc.off, tc.n, func(seq, from, to int64, buf *Buf) ([]byte, error) {
				calls.Add(1)
				if from < 0 || to > ChunkSize || from >= to {
					t.Errorf("fetch of [%d, %d) of chunk %d", from, to, seq)
				}
				if tc.short {
					to--
				}
				buf.B = append(buf.B[:0], data[seq*ChunkSize+from:seq*ChunkSize+to]...)
				return buf.B, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if tc.short {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("short fetch: err %v, want ErrUnexpectedEOF", err)
				}
			} else if err != nil || !bytes.Equal(got, data[tc.off:tc.off+tc.n]) {
				t.Fatalf("read %d bytes, err %v", len(got), err)
			}
			if n := calls.Load(); n > int64(tc.wantCalls) || !tc.short && n != int64(tc.wantCalls) {
				t.Errorf("%d fetches, want %d", n, tc.wantCalls)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Read(make([]byte, 1)); err == nil {
				t.Error("read after close succeeded")
			}
		})
	}
	if _, err := NewReader("test", -1, 1, nil); err == nil {
		t.Error("negative offset accepted")
	}
}
