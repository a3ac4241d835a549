package content

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestSpanReader(t *testing.T) {
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
			calls := 0
			r, err := NewSpanReader("test", tc.off, tc.n, func(off, want int64) ([]byte, error) {
				calls++
				if off/ChunkSize != (off+want-1)/ChunkSize {
					t.Errorf("fetch %d+%d crosses a chunk boundary", off, want)
				}
				if tc.short {
					want--
				}
				return data[off : off+want], nil
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
			if calls != tc.wantCalls {
				t.Errorf("%d fetches, want %d", calls, tc.wantCalls)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Read(make([]byte, 1)); err == nil {
				t.Error("read after close succeeded")
			}
		})
	}
	if _, err := NewSpanReader("test", -1, 1, nil); err == nil {
		t.Error("negative offset accepted")
	}
}
