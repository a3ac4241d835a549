package pgchunks_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store/pg/content"
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
	pm := postmaster(b, p)
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
			cpu0, pg0 := selfCPU(), pgCPU(pm)
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
			b.ReportMetric(float64(selfCPU()-cpu0)/float64(time.Millisecond)/mib, "go-cpu-ms/MiB")
			if pm != 0 {
				b.ReportMetric(float64(pgCPU(pm)-pg0)/float64(time.Millisecond)/mib, "pg-cpu-ms/MiB")
			}
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

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// postmaster is the pid of the server's postmaster (the parent of a
// backend), 0 if its processes are not visible here.
func postmaster(tb testing.TB, p *pgxpool.Pool) int {
	var backend int
	if err := p.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		tb.Fatal(err)
	}
	ppid, _ := procTicks(backend)
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid)); err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		tb.Logf("PostgreSQL CPU not measured")
		return 0
	}
	return ppid
}

// pgCPU is the CPU time of the postmaster, its live children and the
// children it reaped (exited backends).
func pgCPU(pm int) time.Duration {
	if pm == 0 {
		return 0
	}
	var ticks int64
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range procs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if ppid, t := procTicks(pid); pid == pm || ppid == pm {
			ticks += t
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100
}

// procTicks reads a process's parent and its utime+stime+cutime+cstime.
func procTicks(pid int) (ppid int, ticks int64) {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(st)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ppid, _ = strconv.Atoi(f[1])
	for _, i := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return ppid, ticks
}
