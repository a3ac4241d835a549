package contenttest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
)

// BenchSize is the object size of the put and get benchmarks.
const BenchSize = 64 << 20

// RawBatch is how many 1 MiB statements a pipelined raw write sends per
// round trip: content.WriteAhead, the most a put's pipeline sends at once.
const RawBatch = 4

// RawWrite writes data as object id straight to PostgreSQL on p, the
// baseline a put through the store is measured against.
type RawWrite func(ctx context.Context, p *pgxpool.Pool, id int64, data []byte) error

// Raw is a named RawWrite.
type Raw struct {
	Name  string
	Write RawWrite
}

// PutBench measures a BenchSize PutObject through the store on the large
// engine large (hashing, staging, the joint transaction), next to raws, raw
// write rates of the same server in the same run (setup, if not empty, is
// run first on their database). They alternate, rounds times, so that
// drifting load lands on all alike: read put/raw of the same round and
// stream count. Every write has its own content (no dedup); 1 and 4
// streams.
func PutBench(b *testing.B, large, setup string, raws ...Raw) {
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	e, err := pg.Open(ctx, pg.Config{DatabaseURL: dsn, Large: large, InlineMax: 512 << 10})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	if err := e.CreateBucket(ctx, "bench", ""); err != nil {
		b.Fatal(err)
	}
	p, err := pgxpool.New(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	if setup != "" {
		if _, err := p.Exec(ctx, setup); err != nil {
			b.Fatal(err)
		}
	}
	cpu := NewCPUMeter(b, p)
	var obj atomic.Int64
	bodies := make([][]byte, 4)
	for i := range bodies {
		bodies[i] = Bytes(uint64(100+i), BenchSize)
	}
	// unique stamps every MiB of body s with a fresh object number.
	unique := func(s int) (int64, []byte) {
		id := obj.Add(1)
		for off := 0; off < BenchSize; off += 1 << 20 {
			binary.LittleEndian.PutUint64(bodies[s][off:], uint64(id))
		}
		return id, bodies[s]
	}
	ops := map[string]func(s int) error{
		"put": func(s int) error {
			id, data := unique(s)
			_, err := e.PutObject(ctx, "bench", fmt.Sprint("obj-", id), bytes.NewReader(data), store.PutOptions{Size: BenchSize})
			return err
		},
	}
	names := []string{}
	for _, r := range raws {
		ops[r.Name] = func(s int) error {
			id, data := unique(s)
			return r.Write(ctx, p, id, data)
		}
		names = append(names, r.Name)
	}
	names = append(names, "put")
	const rounds = 2
	for range rounds {
		for _, streams := range []int{1, 4} {
			for _, name := range names {
				b.Run(fmt.Sprintf("%s/streams=%d", name, streams), func(b *testing.B) {
					Streams(b, cpu, streams, ops[name])
				})
			}
		}
	}
}

// Streams runs op on streams goroutines per iteration, each moving
// BenchSize bytes, and reports MiB/s and CPU per MiB (cpu.Report).
func Streams(b *testing.B, cpu *CPUMeter, streams int, op func(s int) error) {
	var moved int64
	done := cpu.Start()
	start := time.Now()
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, streams)
		for s := range streams {
			wg.Go(func() { errs <- op(s) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		moved += int64(streams) * BenchSize
	}
	mib := float64(moved) / (1 << 20)
	b.ReportMetric(mib/time.Since(start).Seconds(), "MiB/s")
	done(b, mib)
}

// Bytes returns n pseudo-random bytes of seed.
func Bytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// CPUMeter measures the CPU time of this process (the store's side, and
// the benchmark's client) and of the PostgreSQL server of a pool.
type CPUMeter struct{ pm int }

// NewCPUMeter finds the server's postmaster (the parent of p's backend);
// where its processes are not visible, only this process is measured.
func NewCPUMeter(tb testing.TB, p *pgxpool.Pool) *CPUMeter {
	var backend int
	if err := p.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		tb.Fatal(err)
	}
	ppid, _ := procTicks(backend)
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", ppid)); err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		tb.Logf("PostgreSQL CPU not measured")
		ppid = 0
	}
	return &CPUMeter{pm: ppid}
}

// Start starts a measurement; the function it returns reports CPU per MiB
// of mib MiB moved: go-cpu-ms/MiB and pg-cpu-ms/MiB.
func (m *CPUMeter) Start() func(b *testing.B, mib float64) {
	self0, pg0 := selfCPU(), m.pgCPU()
	return func(b *testing.B, mib float64) {
		b.ReportMetric(float64(selfCPU()-self0)/float64(time.Millisecond)/mib, "go-cpu-ms/MiB")
		if m.pm != 0 {
			b.ReportMetric(float64(m.pgCPU()-pg0)/float64(time.Millisecond)/mib, "pg-cpu-ms/MiB")
		}
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pgCPU is the CPU time of the postmaster, its live children and the
// children it reaped (exited backends).
func (m *CPUMeter) pgCPU() time.Duration {
	if m.pm == 0 {
		return 0
	}
	var ticks int64
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range procs {
		pid, _ := strconv.Atoi(filepath.Base(d))
		if ppid, t := procTicks(pid); pid == m.pm || ppid == m.pm {
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
