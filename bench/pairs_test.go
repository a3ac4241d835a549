package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A round is one timed piece of work (a gateway workload or its raw
// PostgreSQL counterpart), with the server CPU it cost.
type round struct {
	ops   int
	bytes int64 // > 0: a throughput round (MiB/s), else ops/s
	wall  time.Duration
	lat   []time.Duration
	// gwCPU is the gateway process's CPU (0 and !gwOK for raw rounds);
	// pgCPU the whole PostgreSQL server's.
	gwCPU, pgCPU time.Duration
	gwOK, pgOK   bool
	// clCPU is this process's CPU over the round: the clients (SDK or
	// pgx) on the same cores as the servers. A CPU-bound round's rate is
	// bounded by the cores over client plus server CPU per op.
	clCPU     time.Duration
	stmtCalls float64 // statements executed in the gateway's database
	stmtsOK   bool
	timed     bool // shown as time per op (listings, Complete), not a rate
}

// stmts is the statements per op.
func (r round) stmts() float64 { return r.stmtCalls / float64(r.ops) }

// add returns the sum of two rounds of one side (slices of a workload).
func (r round) add(o round) round {
	if r.ops == 0 {
		return o
	}
	r.ops, r.bytes, r.wall = r.ops+o.ops, r.bytes+o.bytes, r.wall+o.wall
	r.lat = append(r.lat, o.lat...)
	r.gwCPU, r.pgCPU, r.clCPU, r.stmtCalls = r.gwCPU+o.gwCPU, r.pgCPU+o.pgCPU, r.clCPU+o.clCPU, r.stmtCalls+o.stmtCalls
	r.gwOK, r.pgOK, r.stmtsOK = r.gwOK && o.gwOK, r.pgOK && o.pgOK, r.stmtsOK && o.stmtsOK
	return r
}

// show is the round's figure for the summary.
func (r round) show() string {
	if r.timed {
		return fmt.Sprintf("%.1f ms", ms(r.wall)/float64(r.ops))
	}
	return fmt.Sprintf("%.1f %s", r.rate(), r.unit())
}

func (r round) rate() float64 {
	if r.bytes > 0 {
		return float64(r.bytes) / mib / r.wall.Seconds()
	}
	return float64(r.ops) / r.wall.Seconds()
}

func (r round) unit() string {
	if r.bytes > 0 {
		return "MiB/s"
	}
	return "ops/s"
}

// per is the divisor of CPU figures: MiB for throughput rounds, ops else.
func (r round) per() (float64, string, time.Duration) {
	if r.bytes > 0 {
		return float64(r.bytes) / mib, "ms/MiB", time.Millisecond
	}
	return float64(r.ops), "us/op", time.Microsecond
}

// serverCPU is gateway plus PostgreSQL CPU per op (or per MiB), in the unit
// of per().
func (r round) serverCPU() (float64, bool) {
	if !r.gwOK && !r.pgOK {
		return 0, false
	}
	n, _, u := r.per()
	return float64(r.gwCPU+r.pgCPU) / float64(u) / n, true
}

// clientCPU is the clients' CPU per op (or per MiB), in the unit of per().
func (r round) clientCPU() float64 {
	n, _, u := r.per()
	return float64(r.clCPU) / float64(u) / n
}

// cpuProbe reads the CPU time of the servers of a round: the gateway's
// process(es) (gw, nil for raw rounds) and the PostgreSQL server (pg).
type cpuProbe struct {
	gw func() (time.Duration, bool)
	pg *cpuMeter
}

// measure runs fn (which returns per-op latencies and the wall time) and
// records the servers' CPU over it.
func (p cpuProbe) measure(ops int, bytes int64, fn func() ([]time.Duration, time.Duration, error)) (round, error) {
	r := round{ops: ops, bytes: bytes}
	var gw0, pg0 time.Duration
	var gwOK, pgOK bool
	if p.gw != nil {
		gw0, gwOK = p.gw()
	}
	if p.pg != nil {
		pg0, pgOK = p.pg.pgCPU()
	}
	cl0 := selfCPU()
	lat, wall, err := fn()
	if err != nil {
		return r, err
	}
	r.lat, r.wall, r.clCPU = lat, wall, selfCPU()-cl0
	if gwOK {
		gw1, ok := p.gw()
		r.gwCPU, r.gwOK = gw1-gw0, ok
	}
	if pgOK {
		pg1, ok := p.pg.pgCPU()
		r.pgCPU, r.pgOK = pg1-pg0, ok
	}
	return r, nil
}

// pidsCPU sums the CPU (own and reaped children's) of the processes in
// S3GATE_BENCH_PIDS (comma-separated): the server's CPU for an external
// endpoint on this machine.
func pidsCPU(tb testing.TB) func() (time.Duration, bool) {
	list := os.Getenv("S3GATE_BENCH_PIDS")
	if list == "" {
		return nil
	}
	var pids []int
	for _, f := range strings.Split(list, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || pid <= 0 {
			tb.Fatalf("S3GATE_BENCH_PIDS=%q: want comma-separated process ids", list)
		}
		pids = append(pids, pid)
	}
	return func() (time.Duration, bool) {
		var ticks int64
		for _, pid := range pids {
			st, err := readStat(pid)
			if err != nil {
				return 0, false
			}
			ticks += st.utime + st.stime + st.cutime + st.cstime
		}
		return time.Duration(ticks) * clockTick, true
	}
}

// target is an issue's goal for a workload: met reports whether a pair of
// rounds meets it (ok false: cannot be judged from this run alone).
type target struct {
	text string
	met  func(gw, raw round) (met, ok bool)
}

// row is one line of the summary that BenchmarkGateway prints at its end.
type row struct {
	engine, name string
	gw, raw      round
	hasRaw       bool
	target       target
}

type summary struct{ rows []row }

// report adds a workload's metrics to b and its row to the summary: the
// gateway's rate, the raw rate of the same run and their ratio (x-raw), the
// servers' CPU per op or MiB (gateway, PostgreSQL, both), statements per op.
func (s *summary) report(b *testing.B, engine, name string, gw round, raw *round, t target) {
	b.ReportMetric(gw.rate(), gw.unit())
	if gw.timed {
		b.ReportMetric(ms(gw.wall)/float64(gw.ops), "ms/op")
	}
	if gw.bytes == 0 && len(gw.lat) > 0 {
		sorted := slices.Clone(gw.lat)
		slices.Sort(sorted)
		b.ReportMetric(ms(percentile(sorted, 50)), "p50-ms")
		b.ReportMetric(ms(percentile(sorted, 99)), "p99-ms")
	}
	n, unit, u := gw.per()
	if gw.gwOK {
		b.ReportMetric(float64(gw.gwCPU)/float64(u)/n, "gw-cpu-"+unit)
	}
	if gw.pgOK {
		b.ReportMetric(float64(gw.pgCPU)/float64(u)/n, "pg-cpu-"+unit)
	}
	if c, ok := gw.serverCPU(); ok {
		b.ReportMetric(c, "srv-cpu-"+unit)
	}
	if gw.stmtsOK {
		b.ReportMetric(gw.stmts(), "stmts/op")
	}
	b.ReportMetric(gw.clientCPU(), "cl-cpu-"+unit)
	r := row{engine: engine, name: name, gw: gw, target: t}
	if raw != nil {
		r.raw, r.hasRaw = *raw, true
		b.ReportMetric(raw.rate(), "raw-"+raw.unit())
		b.ReportMetric(gw.rate()/raw.rate(), "x-raw")
		if c, ok := raw.serverCPU(); ok {
			_, runit, _ := raw.per()
			b.ReportMetric(c, "raw-pg-cpu-"+runit)
			b.ReportMetric(raw.clientCPU(), "raw-cl-cpu-"+runit)
		}
	}
	s.rows = append(s.rows, r)
}

// print writes the summary as a Markdown table (benchstat ignores it).
func (s *summary) print() {
	if len(s.rows) == 0 {
		return
	}
	var sb strings.Builder
	sb.WriteString("\n| engine | workload | s3gate | raw | ÷ raw | server CPU (gw + pg) | raw pg CPU | client CPU (s3gate / raw) | stmts/op | target | met |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range s.rows {
		rawRate, ratio, rawCPU := "–", "–", "–"
		if r.hasRaw {
			rawRate = r.raw.show()
			ratio = fmt.Sprintf("%.2f×", r.gw.rate()/r.raw.rate())
			if c, ok := r.raw.serverCPU(); ok {
				_, unit, _ := r.raw.per()
				rawCPU = fmt.Sprintf("%.0f %s", c, unit)
				if r.raw.bytes > 0 {
					rawCPU = fmt.Sprintf("%.2f %s", c, unit)
				}
			}
		}
		cpu := "–"
		if c, ok := r.gw.serverCPU(); ok {
			_, unit, u := r.gw.per()
			n, _, _ := r.gw.per()
			cpu = fmt.Sprintf("%.0f %s (%.0f + %.0f)", c, unit, float64(r.gw.gwCPU)/float64(u)/n, float64(r.gw.pgCPU)/float64(u)/n)
			if r.gw.bytes > 0 {
				cpu = fmt.Sprintf("%.2f %s (%.2f + %.2f)", c, unit, float64(r.gw.gwCPU)/float64(u)/n, float64(r.gw.pgCPU)/float64(u)/n)
			}
			if !r.gw.pgOK { // no PostgreSQL behind it (embedded, external)
				cpu = fmt.Sprintf("%.2f %s (gateway only)", c, unit)
			}
		}
		_, unit, _ := r.gw.per()
		client := fmt.Sprintf("%.0f / ", r.gw.clientCPU())
		if r.gw.bytes > 0 {
			client = fmt.Sprintf("%.2f / ", r.gw.clientCPU())
		}
		if !r.hasRaw {
			client += "– " + unit
		} else if r.raw.bytes > 0 {
			client += fmt.Sprintf("%.2f %s", r.raw.clientCPU(), unit)
		} else {
			client += fmt.Sprintf("%.0f %s", r.raw.clientCPU(), unit)
		}
		stmts := "–"
		if r.gw.stmtsOK {
			stmts = fmt.Sprintf("%.1f", r.gw.stmts())
		}
		met := "–"
		if r.target.met != nil {
			if m, ok := r.target.met(r.gw, r.raw); ok {
				met = map[bool]string{true: "yes", false: "**no**"}[m]
			}
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.engine, r.name, r.gw.show(), rawRate, ratio, cpu, rawCPU, client, stmts, r.target.text, met)
	}
	fmt.Print(sb.String())
}
