package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
)

// Baseline workloads: objects of baseObjSize written and read in 1 MiB calls;
// one object per stream with 16 streams (1 GiB), four with one stream
// (256 MiB). S3GATE_BENCH_SCALE scales the object size.
const (
	baseObjSize   = 64 * mib
	baseCall      = mib
	baseObjsOne   = 4
	baseObjsMulti = 1
)

// baseObj is an object written by a baseline write round: a large object (oid),
// a run of bytea rows (id), or a file (path).
type baseObj struct {
	id   uint64
	oid  uint32
	path string
}

// baseEnv is the raw storage under one gateway: its database and data dir.
type baseEnv struct {
	dsn  string
	dir  string
	cpu  *cpuMeter
	size int64
	// settings describes the server; the first round logs it (a parent
	// benchmark's log shows only with -v).
	settings string
	// written[kind/streams] are the objects of the last write round, for the
	// read round (sub-benchmarks run one at a time: no lock needed).
	written map[string][]baseObj
}

// BenchmarkBaseline measures the raw media under the gateway, on the same
// PostgreSQL server and in the same data directory, so that the gateway's
// figures can be read as ratios: large objects through the LO API (1 MiB
// lowrite calls, one transaction per object) and read with 1 MiB lo_get calls
// in autocommit; 1 MiB bytea rows with STORAGE EXTERNAL; fsynced files. Each with
// 1 and 16 concurrent streams.
func BenchmarkBaseline(b *testing.B) {
	if testgw.External() {
		b.Skip("baselines need the gateway's own PostgreSQL and data dir; not available for an external endpoint")
	}
	// Any PostgreSQL engine will do: only its database (on the shared server)
	// and data dir are used (the embedded default has no database).
	gw := testgw.Start(b, testgw.Options{Engine: config.EnginePGChunks})
	ctx := b.Context()
	e := &baseEnv{dsn: gw.DatabaseURL, dir: gw.DataDir, written: map[string][]baseObj{},
		size: max(baseCall, int64(scaled(b, baseObjSize/baseCall, 1))*baseCall)}
	if e.dir == "" {
		e.dir = b.TempDir()
	}
	e.dir = filepath.Join(e.dir, "bench-baseline")
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		b.Fatalf("baseline dir: %v", err)
	}
	e.cpu = newCPUMeter(ctx, b, e.dsn)
	e.setup(b)

	for _, k := range []baseKind{
		{name: "pglo", pg: true, write: e.loWrite, read: e.loRead},
		{name: "bytea", pg: true, write: e.byteaWrite, read: e.byteaRead},
		{name: "disk", write: e.diskWrite, read: e.diskRead},
	} {
		for _, streams := range []int{1, 16} {
			n := streams * baseObjsMulti
			if streams == 1 {
				n = baseObjsOne
			}
			b.Run(fmt.Sprintf("%s-write/streams=%d", k.name, streams), func(b *testing.B) { e.run(b, k, streams, n, true) })
			b.Run(fmt.Sprintf("%s-read/streams=%d", k.name, streams), func(b *testing.B) { e.run(b, k, streams, n, false) })
		}
	}
}

// baseKind is one raw medium: how to write and read one object on it.
type baseKind struct {
	name  string
	pg    bool // needs a connection per stream; its server CPU is measured
	write func(ctx context.Context, conn *pgx.Conn, o *baseObj, buf []byte) error
	read  func(ctx context.Context, conn *pgx.Conn, o baseObj, buf []byte) error
}

// setup creates the bytea table with STORAGE EXTERNAL: no compression attempt
// (content is incompressible, and the attempt costs CPU), still TOASTed out of
// line in ~2 KB chunks.
func (e *baseEnv) setup(b *testing.B) {
	conn, err := pgx.Connect(b.Context(), e.dsn)
	if err != nil {
		b.Fatalf("baseline: connect: %v", err)
	}
	defer closeConn(b, conn)
	for _, q := range []string{
		`CREATE TABLE bench_chunks (obj bigint NOT NULL, seq int NOT NULL, data bytea NOT NULL, PRIMARY KEY (obj, seq))`,
		`ALTER TABLE bench_chunks ALTER COLUMN data SET STORAGE EXTERNAL`,
	} {
		if _, err := conn.Exec(b.Context(), q); err != nil {
			b.Fatalf("baseline: %s: %v", q, err)
		}
	}
	var settings string
	if err := conn.QueryRow(b.Context(), `SELECT string_agg(name || '=' || current_setting(name), ' ' ORDER BY name)
		FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'wal_level')`).Scan(&settings); err != nil {
		b.Fatalf("baseline: settings: %v", err)
	}
	e.settings = fmt.Sprintf("PostgreSQL under test: %s; data dir %s", settings, e.dir)
}

// run does one round: n objects over `streams` goroutines, each with its own
// connection opened before the clock starts. A write round keeps its objects
// for the read round of the same kind and stream count; a read round that finds
// none (filtered out by -bench) writes them first, untimed.
func (e *baseEnv) run(b *testing.B, k baseKind, streams, n int, write bool) {
	ctx := b.Context()
	if e.settings != "" {
		b.Log(e.settings)
		e.settings = ""
	}
	conns := make([]*pgx.Conn, streams)
	bufs := make([][]byte, streams)
	for s := range streams {
		bufs[s] = make([]byte, baseCall)
		if !k.pg {
			continue
		}
		conn, err := pgx.Connect(ctx, e.dsn)
		if err != nil {
			b.Fatalf("connect: %v", err)
		}
		conns[s] = conn
		defer closeConn(b, conn)
	}
	key := fmt.Sprintf("%s/%d", k.name, streams)
	writeAll := func(objs []baseObj) (time.Duration, error) {
		_, wall, err := runOps(ctx, streams, n, func(ctx context.Context, s, i int) error {
			return k.write(ctx, conns[s], &objs[i], bufs[s])
		})
		return wall, err
	}
	objs := e.written[key]
	if !write && len(objs) < n {
		b.StopTimer()
		objs = newBaseObjs(n)
		if _, err := writeAll(objs); err != nil {
			b.Fatalf("populate for read: %v", err)
		}
		e.written[key] = objs
		b.StartTimer()
	}
	var wall time.Duration
	var bytes int64
	cpu := e.cpu.start(false)
	for iter := 0; iter < b.N; iter++ {
		var w time.Duration
		var err error
		if write {
			objs = newBaseObjs(n)
			w, err = writeAll(objs)
			e.written[key] = objs
		} else {
			_, w, err = runOps(ctx, streams, n, func(ctx context.Context, s, i int) error {
				return k.read(ctx, conns[s], objs[i], bufs[s])
			})
		}
		if err != nil {
			b.Fatal(err)
		}
		wall += w
		bytes += int64(n) * e.size
	}
	reportThroughput(b, bytes, wall)
	if k.pg {
		cpu.report(b, bytes)
	}
}

func newBaseObjs(n int) []baseObj {
	objs := make([]baseObj, n)
	for i := range objs {
		objs[i].id = newID()
	}
	return objs
}

// loWrite creates one large object in one transaction through the LO API, in
// 1 MiB lowrite calls.
func (e *baseEnv) loWrite(ctx context.Context, conn *pgx.Conn, o *baseObj, buf []byte) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit a no-op; on error the error below is reported
	los := tx.LargeObjects()
	oid, err := los.Create(ctx, 0)
	if err != nil {
		return fmt.Errorf("lo create: %w", err)
	}
	lo, err := los.Open(ctx, oid, pgx.LargeObjectModeWrite)
	if err != nil {
		return fmt.Errorf("lo open: %w", err)
	}
	for off := int64(0); off < e.size; off += baseCall {
		fill(buf, o.id, off)
		if _, err := lo.Write(buf); err != nil {
			return fmt.Errorf("lo write at %d: %w", off, err)
		}
	}
	if err := lo.Close(); err != nil {
		return fmt.Errorf("lo close: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	o.oid = oid
	return nil
}

// loRead reads one large object with 1 MiB lo_get calls in autocommit, the way
// paced streams and Range requests read it.
func (e *baseEnv) loRead(ctx context.Context, conn *pgx.Conn, o baseObj, _ []byte) error {
	var chunk []byte
	for off := int64(0); off < e.size; off += baseCall {
		if err := conn.QueryRow(ctx, "SELECT lo_get($1, $2, $3)", o.oid, off, baseCall).Scan(&chunk); err != nil {
			return fmt.Errorf("lo_get %d at %d: %w", o.oid, off, err)
		}
		if len(chunk) != baseCall {
			return fmt.Errorf("lo_get %d at %d: %d bytes, want %d", o.oid, off, len(chunk), baseCall)
		}
	}
	return nil
}

// byteaWrite inserts one object as 1 MiB rows in one transaction.
func (e *baseEnv) byteaWrite(ctx context.Context, conn *pgx.Conn, o *baseObj, buf []byte) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after Commit a no-op; on error the error below is reported
	for off := int64(0); off < e.size; off += baseCall {
		fill(buf, o.id, off)
		if _, err := tx.Exec(ctx, "INSERT INTO bench_chunks (obj, seq, data) VALUES ($1, $2, $3)",
			int64(o.id), int32(off/baseCall), buf); err != nil {
			return fmt.Errorf("insert chunk at %d: %w", off, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// byteaRead reads one object row by row, one statement per 1 MiB row.
func (e *baseEnv) byteaRead(ctx context.Context, conn *pgx.Conn, o baseObj, _ []byte) error {
	var chunk []byte
	for off := int64(0); off < e.size; off += baseCall {
		if err := conn.QueryRow(ctx, "SELECT data FROM bench_chunks WHERE obj = $1 AND seq = $2",
			int64(o.id), int32(off/baseCall)).Scan(&chunk); err != nil {
			return fmt.Errorf("chunk %d of %d: %w", off/baseCall, o.id, err)
		}
		if len(chunk) != baseCall {
			return fmt.Errorf("chunk %d of %d: %d bytes, want %d", off/baseCall, o.id, len(chunk), baseCall)
		}
	}
	return nil
}

// diskWrite writes one file in 1 MiB writes and fsyncs it before closing.
func (e *baseEnv) diskWrite(_ context.Context, _ *pgx.Conn, o *baseObj, buf []byte) (err error) {
	o.path = filepath.Join(e.dir, fmt.Sprintf("obj-%d", o.id))
	f, err := os.OpenFile(o.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", o.path, cerr)
		}
	}()
	for off := int64(0); off < e.size; off += baseCall {
		fill(buf, o.id, off)
		if _, err := f.Write(buf); err != nil {
			return fmt.Errorf("write %s at %d: %w", o.path, off, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", o.path, err)
	}
	return nil
}

// diskRead reads one file in 1 MiB reads (from the page cache when it fits,
// like the gateway's local engine would).
func (e *baseEnv) diskRead(_ context.Context, _ *pgx.Conn, o baseObj, buf []byte) error {
	f, err := os.Open(o.path)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer f.Close() // read-only: nothing to lose
	var total int64
	for {
		n, err := f.Read(buf)
		total += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s at %d: %w", o.path, total, err)
		}
	}
	if total != e.size {
		return fmt.Errorf("read %s: %d bytes, want %d", o.path, total, e.size)
	}
	return nil
}
