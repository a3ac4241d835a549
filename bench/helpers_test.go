package bench

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// The helpers below decide whether a benchmark's GET counts as correct, so they
// get plain tests of their own (fast, no PostgreSQL).

func TestGenReaderMatchesFillAcrossSeeks(t *testing.T) {
	tests := []struct {
		name string
		size int64
		seek int64
	}{
		{"small object", 4 * kib, 0},
		{"across block headers", 3*blockSize + 123, 0},
		{"seek into a header", 2 * blockSize, blockSize + 5},
		{"empty", 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]byte, tc.size)
			fill(want, 7, 0)
			g := newGenReader(7, tc.size)
			// Read once fully (as the SDK does to hash), then seek and read again.
			if _, err := io.Copy(io.Discard, g); err != nil {
				t.Fatal(err)
			}
			if _, err := g.Seek(tc.seek, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(g)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want[tc.seek:]) {
				t.Fatalf("content after seek to %d differs from fill", tc.seek)
			}
		})
	}
}

func TestContentIsUniquePerObjectAndBlock(t *testing.T) {
	a := make([]byte, 2*blockSize)
	b := make([]byte, 2*blockSize)
	fill(a, 1, 0)
	fill(b, 2, 0)
	if bytes.Equal(a[:blockSize], b[:blockSize]) {
		t.Fatal("objects 1 and 2 share their first block: dedup would skew the benchmark")
	}
	if bytes.Equal(a[:blockSize], a[blockSize:]) {
		t.Fatal("blocks 0 and 1 of one object are equal")
	}
}

func TestVerifier(t *testing.T) {
	good := make([]byte, blockSize+100)
	fill(good, 9, 0)
	bad := bytes.Clone(good)
	bad[blockSize+1] ^= 1
	tests := []struct {
		name    string
		id      uint64
		body    []byte
		wantErr bool
	}{
		{"right bytes", 9, good, false},
		{"one flipped bit", 9, bad, true},
		{"other object's bytes", 8, good, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A scratch smaller than the writes exercises the piecewise compare.
			_, err := io.CopyBuffer(newVerifier(tc.id, make([]byte, 1000)), bytes.NewReader(tc.body), make([]byte, 4096))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i))
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"p50 of 1..100", hundred, 50, 50},
		{"p99 of 1..100", hundred, 99, 99},
		{"p100 of 1..100", hundred, 100, 100},
		{"p99 of one sample", []time.Duration{5}, 99, 5},
		{"p50 of two", []time.Duration{1, 2}, 50, 1},
		{"empty", nil, 50, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Fatalf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}
