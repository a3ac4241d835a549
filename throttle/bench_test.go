package throttle

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// readerOnly hides bytes.Reader's WriterTo so that the copy goes through Read.
type readerOnly struct{ io.Reader }

// writerOnly hides io.Discard's ReaderFrom so both paths copy with the same
// 64 KiB buffer.
type writerOnly struct{ io.Writer }

const benchSize = 64 << 20

// BenchmarkUnlimited compares a direct copy with the unlimited governed reader
// (guard included); divide the ns/op of the two to get the overhead ratio.
func BenchmarkUnlimited(b *testing.B) {
	buf := make([]byte, DefaultQuantum)
	data := make([]byte, benchSize)
	for i := range data {
		data[i] = byte(i)
	}
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(benchSize)
		for b.Loop() {
			if _, err := io.CopyBuffer(writerOnly{io.Discard}, readerOnly{bytes.NewReader(data)}, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("governed", func(b *testing.B) {
		g, err := New(Config{})
		if err != nil {
			b.Fatal(err)
		}
		var valid atomic.Bool // stands in for a pin's Valid
		valid.Store(true)
		guard := func() error {
			if valid.Load() {
				return nil
			}
			return io.ErrUnexpectedEOF
		}
		b.SetBytes(benchSize)
		for b.Loop() {
			r := g.NewReader(context.Background(), readerOnly{bytes.NewReader(data)}, guard)
			if _, err := io.CopyBuffer(writerOnly{io.Discard}, r, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPerRequestCap streams 64 MiB under a 10 MiB/s per-request cap and
// reports the achieved rate (expect ~10 MiB/s; each op takes ~6.4 s, so run it
// with -benchtime=1x).
func BenchmarkPerRequestCap(b *testing.B) {
	const capBps = 10 << 20
	g, err := New(Config{PerRequest: capBps})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, DefaultQuantum)
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		r := g.NewReader(context.Background(), io.LimitReader(zeros{}, benchSize), nil)
		if _, err := io.CopyBuffer(writerOnly{io.Discard}, r, buf); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(benchSize)*float64(b.N)/total.Seconds()/(1<<20), "MiB/s")
	b.ReportMetric(float64(capBps)/(1<<20), "cap-MiB/s")
}
