package gc

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/pg"
)

// BenchmarkSweepSmallBlobs: one sweep reclaims S3GATE_GC_BENCH_BLOBS
// (default 10,000) unreferenced 4 KiB inline blobs on PostgreSQL, per
// iteration. It reports blobs/s of the sweep, and the CPU per blob of
// PostgreSQL (the test's own server: postmaster, backends and the backends
// it reaped) and of this process.
func BenchmarkSweepSmallBlobs(b *testing.B) {
	n := 10000
	if s := os.Getenv("S3GATE_GC_BENCH_BLOBS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			b.Fatalf("S3GATE_GC_BENCH_BLOBS=%q: want a positive integer", s)
		}
	}
	ctx := context.Background()
	eng, err := pg.Open(ctx, pg.Config{DatabaseURL: pgtest.DSN(b), Large: pg.LargePGChunks})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	db := pg.NewGC(eng.Pool())
	if err := EnsureSchema(ctx, db); err != nil {
		b.Fatal(err)
	}
	var backend int
	if err := eng.Pool().QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		b.Fatal(err)
	}
	pm, _ := procTicks(backend)
	opts := Options{Grace: -1, StageGrace: -1, Logger: slog.New(slog.DiscardHandler)}
	var wall, pgCPU, ownCPU time.Duration
	b.StopTimer()
	for i := range b.N {
		if _, err := eng.Pool().Exec(ctx, `INSERT INTO blobs (sha256, size, tier, inline_data)
			SELECT sha256(int8send(g) || int4send($2::int)), 4096, 'inline',
				(SELECT decode(string_agg(md5(g || ':' || k || ':' || $2::int), ''), 'hex') FROM generate_series(1, 256) AS k)
			FROM generate_series(1, $1::int) AS g`, n, i); err != nil {
			b.Fatal(err)
		}
		if _, err := eng.Pool().Exec(ctx, `VACUUM ANALYZE blobs`); err != nil {
			b.Fatal(err)
		}
		pg0, own0, t0 := procTree(pm), selfCPU(), time.Now()
		b.StartTimer()
		st, err := Sweep(ctx, db, opts)
		b.StopTimer()
		wall += time.Since(t0)
		pgCPU += procTree(pm) - pg0
		ownCPU += selfCPU() - own0
		if err != nil {
			b.Fatal(err)
		}
		if st.BlobsDeleted != int64(n) {
			b.Fatalf("swept %+v, want %d blobs deleted", st, n)
		}
	}
	blobs := float64(n * b.N)
	b.ReportMetric(blobs/wall.Seconds(), "blobs/s")
	b.ReportMetric(float64(pgCPU.Microseconds())/blobs, "pg-cpu-µs/blob")
	b.ReportMetric(float64(ownCPU.Microseconds())/blobs, "gc-cpu-µs/blob")
	if pm == 0 {
		b.Log("PostgreSQL's processes are not visible here: pg-cpu-µs/blob is 0")
	}
}

// selfCPU is this process's CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procTree is the CPU time of process pm and its children, reaped ones
// included; 0 if pm is 0.
func procTree(pm int) time.Duration {
	if pm == 0 {
		return 0
	}
	var ticks int64
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if ppid, t := procTicks(pid); pid == pm || ppid == pm {
			ticks += t
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// procTicks reads a process's parent and its utime+stime+cutime+cstime in
// clock ticks (zeros if it is gone).
func procTicks(pid int) (ppid int, ticks int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ppid, _ = strconv.Atoi(f[1])
	for _, i := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return ppid, ticks
}
