package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// benchPut4KiB puts distinct 4 KiB objects (no dedup) from `clients`
// goroutines and reports puts/s.
func benchPut4KiB(b *testing.B, clients int) {
	e, err := Open(context.Background(), Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	if err := e.CreateBucket(context.Background(), "bench", ""); err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	b.SetBytes(4 << 10)
	b.SetParallelism(clients)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 4<<10)
		for pb.Next() {
			n := seq.Add(1)
			binary.LittleEndian.PutUint64(buf, uint64(n)) // distinct content: no dedup
			if _, err := e.PutObject(context.Background(), "bench", fmt.Sprintf("k/%d", n), bytes.NewReader(buf), store.PutOptions{Size: int64(len(buf))}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
}

func BenchmarkPut4KiB(b *testing.B) {
	for _, c := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) { benchPut4KiB(b, c) })
	}
}

// BenchmarkGet4KiB reads one 4 KiB inline object from parallel clients.
func BenchmarkGet4KiB(b *testing.B) {
	e, err := Open(context.Background(), Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	ctx := context.Background()
	if err := e.CreateBucket(ctx, "bench", ""); err != nil {
		b.Fatal(err)
	}
	if _, err := e.PutObject(ctx, "bench", "k", bytes.NewReader(make([]byte, 4<<10)), store.PutOptions{Size: 4 << 10}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(4 << 10)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _, rd, err := e.GetObject(ctx, "bench", "k", store.GetOptions{}, false)
			if err != nil {
				b.Error(err)
				return
			}
			_, err = io.Copy(io.Discard, rd)
			_ = rd.Close()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "gets/s")
}

// BenchmarkPut64MiB puts distinct 64 MiB objects (staged file, fsync, rename).
func BenchmarkPut64MiB(b *testing.B) {
	e, err := Open(context.Background(), Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	if err := e.CreateBucket(context.Background(), "bench", ""); err != nil {
		b.Fatal(err)
	}
	data := content(1, 64<<20)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := range b.N {
		binary.LittleEndian.PutUint64(data, uint64(i))
		if _, err := e.PutObject(context.Background(), "bench", "big", bytes.NewReader(data), store.PutOptions{Size: int64(len(data))}); err != nil {
			b.Fatal(err)
		}
	}
}
