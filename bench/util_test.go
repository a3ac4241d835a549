package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
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

	"github.com/jackc/pgx/v5"
)

const (
	kib = 1 << 10
	mib = 1 << 20

	// blockSize is the period of the generated content; every block carries its
	// own header, so no two blocks of any two objects are equal.
	blockSize = mib
	hdrLen    = 16
)

// pattern is 1 MiB of random bytes from a fixed seed: incompressible, and the
// same in every run.
var pattern = func() []byte {
	r := rand.New(rand.NewChaCha8([32]byte{'s', '3', 'g', 'a', 't', 'e'}))
	p := make([]byte, blockSize)
	for i := 0; i < len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], r.Uint64())
	}
	return p
}()

// nextID hands out content ids: every object of the run has its own content, so
// content-addressed deduplication never turns a write into a no-op.
var nextID atomic.Uint64

func newID() uint64 { return nextID.Add(1) }

// fill writes the content of object id at offset off into dst: the pattern, with
// the first hdrLen bytes of each block replaced by (id, block number).
func fill(dst []byte, id uint64, off int64) {
	for len(dst) > 0 {
		blk := off / blockSize
		in := int(off % blockSize)
		n := copy(dst, pattern[in:])
		if in < hdrLen {
			var hdr [hdrLen]byte
			binary.LittleEndian.PutUint64(hdr[0:], id)
			binary.LittleEndian.PutUint64(hdr[8:], uint64(blk))
			copy(dst[:n], hdr[in:])
		}
		dst = dst[n:]
		off += int64(n)
	}
}

// genReader streams the content of one object without holding it in memory. It
// is an io.ReadSeeker because the SDK reads a seekable body twice over plain
// HTTP (payload hash, then send).
type genReader struct {
	id        uint64
	size, off int64
}

func newGenReader(id uint64, size int64) *genReader { return &genReader{id: id, size: size} }

func (g *genReader) Read(p []byte) (int, error) {
	if g.off >= g.size {
		return 0, io.EOF
	}
	if rem := g.size - g.off; int64(len(p)) > rem {
		p = p[:rem]
	}
	fill(p, g.id, g.off)
	g.off += int64(len(p))
	return len(p), nil
}

func (g *genReader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = g.off + offset
	case io.SeekEnd:
		abs = g.size + offset
	default:
		return 0, fmt.Errorf("genReader: bad whence %d", whence)
	}
	if abs < 0 {
		return 0, errors.New("genReader: negative position")
	}
	g.off = abs
	return abs, nil
}

// verifier is an io.Writer that checks what it is given against the content of
// object id: a benchmark that returned wrong bytes fast would be worthless.
type verifier struct {
	id      uint64
	off     int64
	scratch []byte
}

func newVerifier(id uint64, scratch []byte) *verifier {
	return &verifier{id: id, scratch: scratch}
}

func (v *verifier) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n := min(len(p)-done, len(v.scratch))
		want := v.scratch[:n]
		fill(want, v.id, v.off)
		if !bytes.Equal(p[done:done+n], want) {
			return done, fmt.Errorf("content of object %d differs in bytes [%d, %d)", v.id, v.off, v.off+int64(n))
		}
		done += n
		v.off += int64(n)
	}
	return done, nil
}

// scale multiplies every fixed workload (object counts, bytes): S3GATE_BENCH_SCALE,
// default 1. A small value (0.1) makes a quick smoke run.
func scale(tb testing.TB) float64 {
	s := os.Getenv("S3GATE_BENCH_SCALE")
	if s == "" {
		return 1
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) {
		tb.Fatalf("S3GATE_BENCH_SCALE=%q: want a positive number", s)
	}
	return f
}

// envInt is the positive integer in environment variable name, or def when
// it is unset; anything else stops the run, since a misspelt knob would
// otherwise measure the default under another name.
func envInt(name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		panic(fmt.Sprintf("%s=%q: want a positive integer", name, v))
	}
	return n
}

// scaled returns n scaled, never less than floor.
func scaled(tb testing.TB, n, floor int) int {
	return max(floor, int(math.Round(float64(n)*scale(tb))))
}

// runOps runs op(ctx, worker, i) for every i in [0, n) on `workers` goroutines
// and returns each op's latency (index i) and the wall time of the whole run.
// The first error cancels the rest and is returned.
func runOps(ctx context.Context, workers, n int, op func(ctx context.Context, w, i int) error) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lat := make([]time.Duration, n)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				err := op(ctx, w, i)
				lat[i] = time.Since(t0)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("op %d (worker %d): %w", i, w, err); cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr == nil && ctx.Err() != nil {
		firstErr = fmt.Errorf("run: %w", ctx.Err())
	}
	return lat, wall, firstErr
}

// percentile returns the p-th percentile (0 < p <= 100) by the nearest-rank
// method: the smallest value that at least p% of the samples do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cpuMeter samples the CPU time of this process (gateway and clients: they share
// it) and, where the PostgreSQL server runs on this machine, of the whole
// server (postmaster, backends, background workers, and exited backends that the
// postmaster has reaped).
type cpuMeter struct {
	postmaster int // 0 when the server's processes cannot be seen
}

// clockTick is USER_HZ, 100 on every Linux platform Go supports (not readable
// without cgo).
const clockTick = 10 * time.Millisecond

// newCPUMeter finds the postmaster of the server behind dsn: the parent of our
// own backend.
func newCPUMeter(ctx context.Context, tb testing.TB, dsn string) *cpuMeter {
	m := &cpuMeter{}
	if dsn == "" {
		return m
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("cpu meter: connect: %v", err)
	}
	defer closeConn(tb, conn)
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		tb.Fatalf("cpu meter: backend pid: %v", err)
	}
	st, err := readStat(backend)
	if err != nil {
		tb.Logf("cpu meter: PostgreSQL CPU not measured (server not on this machine?): %v", err)
		return m
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", st.ppid))
	if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		tb.Logf("cpu meter: PostgreSQL CPU not measured: parent %d of backend %d is not a postmaster", st.ppid, backend)
		return m
	}
	m.postmaster = st.ppid
	return m
}

type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64 // clock ticks
}

// readStat parses /proc/PID/stat (fields as in proc(5); comm may hold spaces
// and parentheses, so fields are counted after the last ')').
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, fmt.Errorf("read stat: %w", err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("stat of %d: no comm", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("stat of %d: %d fields", pid, len(f))
	}
	// f[0] is field 3 (state): ppid is field 4, utime..cstime are 14..17.
	var st procStat
	var nums [5]int64
	for k, idx := range []int{1, 11, 12, 13, 14} {
		if nums[k], err = strconv.ParseInt(f[idx], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("stat of %d field %d: %w", pid, idx+3, err)
		}
	}
	st.ppid = int(nums[0])
	st.utime, st.stime, st.cutime, st.cstime = nums[1], nums[2], nums[3], nums[4]
	return st, nil
}

// pgCPU returns the server's CPU time so far, or false if it cannot be seen.
func (m *cpuMeter) pgCPU() (time.Duration, bool) {
	if m.postmaster == 0 {
		return 0, false
	}
	pm, err := readStat(m.postmaster)
	if err != nil {
		return 0, false
	}
	ticks := pm.cutime + pm.cstime // reaped backends
	exact, ok := runtimeNS(m.postmaster)
	if !ok {
		ticks += pm.utime + pm.stime
	}
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, false
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != m.postmaster {
			continue // gone meanwhile, or not a child of the postmaster
		}
		// A backend's own time in nanoseconds: its ticks truncate, and
		// the fresh connections of a raw round, each a few milliseconds,
		// would read as 0 and undercount that round by up to a tick each.
		if ns, ok := runtimeNS(pid); ok {
			exact += ns
			continue
		}
		ticks += st.utime + st.stime
	}
	return time.Duration(ticks)*clockTick + exact, true
}

// runtimeNS is the CPU time of single-threaded process pid in
// nanoseconds (the first field of /proc/PID/schedstat).
func runtimeNS(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ns), true
}

// selfCPU returns this process's user+system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuSpan is a CPU measurement in progress.
type cpuSpan struct {
	m          *cpuMeter
	pg0        time.Duration
	pgOK       bool
	self0      time.Duration
	reportSelf bool
}

// start begins a measurement; reportSelf says whether this process's CPU means
// anything (it does for the gateway, which runs in-process; for pgx baselines it
// is only the client).
func (m *cpuMeter) start(reportSelf bool) cpuSpan {
	pg0, ok := m.pgCPU()
	return cpuSpan{m: m, pg0: pg0, pgOK: ok, self0: selfCPU(), reportSelf: reportSelf}
}

// report adds CPU per MiB moved: "pg-cpu-ms/MiB" for the PostgreSQL server and
// "go-cpu-ms/MiB" for this process (gateway plus its SDK clients).
func (s cpuSpan) report(b *testing.B, bytes int64) {
	if bytes > 0 {
		s.reportPer(b, float64(bytes)/mib, "ms", "MiB", time.Millisecond)
	}
}

func (s cpuSpan) reportPer(b *testing.B, per float64, unit, perName string, u time.Duration) {
	if pg1, ok := s.m.pgCPU(); ok && s.pgOK {
		b.ReportMetric(float64(pg1-s.pg0)/float64(u)/per, "pg-cpu-"+unit+"/"+perName)
	}
	if s.reportSelf {
		b.ReportMetric(float64(selfCPU()-s.self0)/float64(u)/per, "go-cpu-"+unit+"/"+perName)
	}
}

// reportThroughput adds MiB/s over the wall time.
func reportThroughput(b *testing.B, bytes int64, wall time.Duration) {
	b.ReportMetric(float64(bytes)/mib/wall.Seconds(), "MiB/s")
}

func closeConn(tb testing.TB, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := conn.Close(ctx); err != nil {
		tb.Errorf("close connection: %v", err)
	}
}
