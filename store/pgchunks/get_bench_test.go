package pgchunks_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/pg/content/contenttest"
	"github.com/s3gate/s3gate/store/pgchunks"
)

// BenchmarkPGChunksGet measures what a GET of pgchunks content costs below
// the gateway's HTTP layer: 64 MiB objects read whole by 1 and 4 concurrent
// streams, and a 16 MiB range starting mid-chunk, each copied out in 32 KiB
// reads as a response writer does. It reports MiB/s and CPU per MiB of this
// process (the gateway's side) and of the PostgreSQL server.
func BenchmarkPGChunksGet(b *testing.B) {
	p := pool(b)
	for i := range 4 {
		write(b, p, int64(i+1), randBytes(uint64(10+i), benchSize))
	}
	cpu := contenttest.NewCPUMeter(b, p)
	rangeOff := int64(20*content.ChunkSize + 12345)
	cases := []struct {
		name       string
		streams    int
		off, n     int64
		objPerIter int
	}{
		{name: "whole/streams=1", streams: 1, n: benchSize},
		{name: "whole/streams=4", streams: 4, n: benchSize},
		{name: "range-16MiB", streams: 1, off: rangeOff, n: 16 << 20},
		{name: "range-4KiB", streams: 1, off: rangeOff, n: 4 << 10},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var moved int64
			done := cpu.Start()
			start := time.Now()
			for b.Loop() {
				var wg sync.WaitGroup
				errs := make(chan error, tc.streams)
				for s := range tc.streams {
					wg.Go(func() { errs <- readSpan(p, int64(s+1), tc.off, tc.n) })
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				moved += int64(tc.streams) * tc.n
			}
			mib := float64(moved) / (1 << 20)
			b.ReportMetric(mib/time.Since(start).Seconds(), "MiB/s")
			done(b, mib)
		})
	}
}

// readSpan reads n bytes at off of blob id through the engine.
func readSpan(p *pgxpool.Pool, id, off, n int64) error {
	rd, err := pgchunks.New().Open(context.Background(), p, id, 0, off, n)
	if err != nil {
		return err
	}
	got, err := io.CopyBuffer(io.Discard, rd, make([]byte, 32<<10))
	if cerr := rd.Close(); err == nil {
		err = cerr
	}
	if err == nil && got != n {
		err = fmt.Errorf("read %d bytes, want %d", got, n)
	}
	return err
}
