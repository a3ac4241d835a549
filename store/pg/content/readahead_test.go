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

func TestRowsReader(t *testing.T) {
	data := make([]byte, 8*ChunkSize+123)
	for i := range data {
		data[i] = byte(i * 13)
	}
	const pieceMax = ChunkSize / 4
	tests := []struct {
		name       string
		off, n     int64
		missing    int64 // a chunk the rows statement does not find (-1: none)
		wantRows   int   // statements of whole rows
		wantPieces int   // substring-style fetches
	}{
		// 8 whole chunks, 2 per statement; the 123-byte tail is read alone.
		{name: "whole", off: 0, n: int64(len(data)), missing: -1, wantRows: 4, wantPieces: 1},
		{name: "whole rows only", off: 0, n: 7 * ChunkSize, missing: -1, wantRows: 4},
		{name: "small edges read alone", off: ChunkSize - 10, n: 2*ChunkSize + 20, missing: -1, wantRows: 1, wantPieces: 2},
		{name: "large edges sliced from whole rows", off: ChunkSize / 2, n: 2 * ChunkSize, missing: -1, wantRows: 2},
		// 6 whole rows and a 10-byte tail read alone.
		{name: "small tail after whole rows", off: 0, n: 6*ChunkSize + 10, missing: -1, wantRows: 3, wantPieces: 1},
		{name: "gap mid-statement", off: 0, n: int64(len(data)), missing: 3, wantRows: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rowCalls, pieceCalls, maxRows atomic.Int64
			piece := func(seq, from, to int64, buf *Buf) ([]byte, error) {
				pieceCalls.Add(1)
				if to-from > pieceMax {
					t.Errorf("piece of %d bytes fetched alone", to-from)
				}
				buf.B = append(buf.B[:0], data[seq*ChunkSize+from:seq*ChunkSize+to]...)
				return buf.B, nil
			}
			rows := func(seq int64, bufs []*Buf, got func(int)) error {
				rowCalls.Add(1)
				if k := int64(len(bufs)); k > maxRows.Load() {
					maxRows.Store(k)
				}
				for i, b := range bufs {
					s := seq + int64(i)
					if s == tc.missing {
						return io.ErrUnexpectedEOF
					}
					b.B = append(b.B[:0], data[s*ChunkSize:min((s+1)*ChunkSize, int64(len(data)))]...)
					got(i)
				}
				return nil
			}
			r, err := NewRowsReader("test", tc.off, tc.n, piece, rows, pieceMax)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if tc.missing >= 0 {
				if !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("gap: err %v, want ErrUnexpectedEOF", err)
				}
				if want := tc.missing * ChunkSize; int64(len(got)) != want || !bytes.Equal(got, data[:want]) {
					t.Fatalf("gap: read %d bytes, want the %d before it", len(got), want)
				}
			} else if err != nil || !bytes.Equal(got, data[tc.off:tc.off+tc.n]) {
				t.Fatalf("read %d bytes, err %v", len(got), err)
			}
			if tc.missing < 0 && (rowCalls.Load() != int64(tc.wantRows) || pieceCalls.Load() != int64(tc.wantPieces)) {
				t.Errorf("%d row statements and %d pieces, want %d and %d", rowCalls.Load(), pieceCalls.Load(), tc.wantRows, tc.wantPieces)
			}
			if m := maxRows.Load(); m > RowsBatch {
				t.Errorf("%d chunks in one statement, batch %d", m, RowsBatch)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Read(make([]byte, 1)); err == nil {
				t.Error("read after close succeeded")
			}
		})
	}
}
