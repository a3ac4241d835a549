package bench

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

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
	size int64
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
	// fileURL is a plain HTTP file server over dir (net/http.FileServer),
	// the local engine's GET baseline.
	fileURL string
	http    *http.Client
	// small are the small rounds' connections (smallConns), closed with
	// the benchmark that created the environment.
	small []*pgx.Conn
}

// newBaseEnv prepares the raw media: database dsn (its tables) and a
// directory under dir, served by a plain file server on 127.0.0.1.
func newBaseEnv(b *testing.B, dsn, dir string) *baseEnv {
	e := &baseEnv{dsn: dsn, dir: dir, written: map[string][]baseObj{}, size: baseObjSize,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}}
	if e.dir == "" {
		e.dir = b.TempDir()
	}
	e.dir = filepath.Join(e.dir, "bench-baseline")
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		b.Fatalf("baseline dir: %v", err)
	}
	e.cpu = newCPUMeter(b.Context(), b, e.dsn)
	e.setup(b)
	b.Cleanup(func() {
		for _, c := range e.small {
			closeConn(b, c)
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("file server: %v", err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(e.dir)), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	b.Cleanup(func() {
		e.http.CloseIdleConnections()
		if err := srv.Close(); err != nil {
			b.Errorf("file server: close: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			b.Errorf("file server: %v", err)
		}
	})
	e.fileURL = "http://" + ln.Addr().String() + "/"
	return e
}

// smallRound runs n 4 KiB operations on 16 connections (opened before the
// clock starts): op(ctx, conn, i, buf) with a 4 KiB buffer of the stream's.
func (e *baseEnv) smallRound(b *testing.B, n int, op func(ctx context.Context, c *pgx.Conn, i int, buf []byte) error) ([]time.Duration, time.Duration, error) {
	conns := e.smallConns(b)
	bufs := make([][]byte, clients)
	for s := range bufs {
		bufs[s] = make([]byte, smallSize)
	}
	return runOps(b.Context(), clients, n, func(ctx context.Context, s, i int) error { return op(ctx, conns[s], i, bufs[s]) })
}

// streams writes (or reads) objs with k over `streams` concurrent streams,
// each with its own connection opened before the clock starts.
func (e *baseEnv) streams(b *testing.B, k baseKind, streams int, objs []baseObj, write bool) ([]time.Duration, time.Duration, error) {
	var conns []*pgx.Conn
	if k.pg {
		conns = e.connect(b, streams)
	} else {
		conns = make([]*pgx.Conn, streams)
	}
	bufs := make([][]byte, streams)
	for s := range bufs {
		bufs[s] = make([]byte, baseCall)
	}
	return runOps(b.Context(), streams, len(objs), func(ctx context.Context, s, i int) error {
		if write {
			return k.write(ctx, conns[s], &objs[i], bufs[s])
		}
		return k.read(ctx, conns[s], objs[i], bufs[s])
	})
}

// smallConns returns the 16 connections of the small rounds, opened and
// warmed (their catalog caches loaded) on first use: rawSmall calls it
// before its CPU window opens, so a round's PostgreSQL CPU, like the
// gateway's warm pool, holds no backend start-up.
func (e *baseEnv) smallConns(b *testing.B) []*pgx.Conn {
	if e.small != nil {
		return e.small
	}
	conns := make([]*pgx.Conn, clients)
	for s := range conns {
		conn, err := pgx.Connect(context.WithoutCancel(b.Context()), e.dsn)
		if err != nil {
			b.Fatalf("connect: %v", err)
		}
		for _, q := range []string{`SELECT data FROM bench_small WHERE key = ''`, `SELECT 1 FROM bench_objects WHERE key = ''`} {
			if _, err := conn.Exec(b.Context(), q); err != nil {
				b.Fatalf("warm: %v", err)
			}
		}
		conns[s] = conn
	}
	e.small = conns
	return conns
}

// connect opens n connections that close when b ends.
func (e *baseEnv) connect(b *testing.B, n int) []*pgx.Conn {
	conns := make([]*pgx.Conn, n)
	for s := range conns {
		conn, err := pgx.Connect(b.Context(), e.dsn)
		if err != nil {
			b.Fatalf("connect: %v", err)
		}
		conns[s] = conn
		b.Cleanup(func() { closeConn(b, conn) })
	}
	return conns
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
	e := newBaseEnv(b, gw.DatabaseURL, gw.DataDir)
	e.size = max(baseCall, int64(scaled(b, baseObjSize/baseCall, 1))*baseCall)

	for _, k := range []baseKind{
		{name: "pglo", pg: true, write: e.loWrite, read: e.loRead},
		{name: "bytea", pg: true, write: e.byteaWrite, read: e.byteaRead},
		{name: "bytea-pipe", pg: true, write: e.byteaPipeWrite, read: e.byteaPipeRead},
		{name: "pglo-pipe", pg: true, write: e.loPipeWrite, read: e.loPipeRead},
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
		// 4 KiB rows inline in the heap, as the gateway keeps small content.
		`CREATE TABLE bench_small (key text COLLATE "C" PRIMARY KEY, data bytea NOT NULL)`,
		`CREATE TABLE bench_keys (key text COLLATE "C" PRIMARY KEY, size bigint NOT NULL, etag text NOT NULL, modified timestamptz NOT NULL DEFAULT now())`,
		// The two-row floor of a small put (floorPut): blobs and objects
		// shaped as the gateway's, small content in the row.
		`CREATE SEQUENCE bench_blob_ids`,
		`CREATE TABLE bench_blobs (id bigint PRIMARY KEY, sha256 bytea NOT NULL UNIQUE,
			size bigint NOT NULL, data bytea) WITH (toast_tuple_target = 8160)`,
		`CREATE TABLE bench_objects (key text COLLATE "C" PRIMARY KEY,
			blob_id bigint NOT NULL REFERENCES bench_blobs (id), size bigint NOT NULL, etag text NOT NULL,
			modified timestamptz NOT NULL DEFAULT clock_timestamp())`,
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
		objs = newBaseObjs(n, e.size)
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
			objs = newBaseObjs(n, e.size)
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

func newBaseObjs(n int, size int64) []baseObj {
	objs := make([]baseObj, n)
	for i := range objs {
		objs[i].id, objs[i].size = newID(), size
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
	for off := int64(0); off < o.size; off += baseCall {
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
	for off := int64(0); off < o.size; off += baseCall {
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
	for off := int64(0); off < o.size; off += baseCall {
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
	for off := int64(0); off < o.size; off += baseCall {
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
func (e *baseEnv) diskWrite(_ context.Context, _ *pgx.Conn, o *baseObj, buf []byte) error {
	return e.diskWriteTo(o, buf, nil)
}

// diskWriteTo is diskWrite, giving each 1 MiB to hash (if not nil) before it
// is written.
func (e *baseEnv) diskWriteTo(o *baseObj, buf []byte, hash func([]byte)) (err error) {
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
	for off := int64(0); off < o.size; off += baseCall {
		fill(buf, o.id, off)
		if hash != nil {
			hash(buf)
		}
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
	if total != o.size {
		return fmt.Errorf("read %s: %d bytes, want %d", o.path, total, o.size)
	}
	return nil
}

// pipeWindow is how many 1 MiB statements a pipelined stream keeps unanswered.
const pipeWindow = 8

// pipelined runs n statements on conn in pipeline mode with at most
// pipeWindow of them unanswered: send(i) queues statement i, recv(i, rr)
// consumes its result. The whole sequence ends with one Sync.
func pipelined(ctx context.Context, conn *pgx.Conn, n int,
	send func(pl *pgconn.Pipeline, i int), recv func(i int, rr *pgconn.ResultReader) error) (err error) {
	pl := conn.PgConn().StartPipeline(ctx)
	defer func() {
		if cerr := pl.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("pipeline close: %w", cerr)
		}
	}()
	done := 0
	receive := func() error {
		res, err := pl.GetResults()
		if err != nil {
			return fmt.Errorf("pipeline result %d: %w", done, err)
		}
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			return fmt.Errorf("pipeline result %d: unexpected %T", done, res)
		}
		rerr := recv(done, rr)
		if _, err := rr.Close(); err != nil {
			return fmt.Errorf("statement %d: %w", done, err)
		}
		done++
		return rerr
	}
	for i := range n {
		send(pl, i)
		pl.SendFlushRequest()
		if err := pl.Flush(); err != nil {
			return fmt.Errorf("pipeline flush: %w", err)
		}
		for i+1-done > pipeWindow {
			if err := receive(); err != nil {
				return err
			}
		}
	}
	for done < n {
		if err := receive(); err != nil {
			return err
		}
	}
	pl.SendPipelineSync()
	if err := pl.Flush(); err != nil {
		return fmt.Errorf("pipeline flush: %w", err)
	}
	if _, err := pl.GetResults(); err != nil {
		return fmt.Errorf("pipeline sync: %w", err)
	}
	return nil
}

var (
	oidsChunk    = []uint32{pgtype.Int8OID, pgtype.Int4OID, pgtype.ByteaOID}
	binary3      = []int16{1, 1, 1}
	binaryResult = []int16{1}
)

func chunkParams(obj uint64, seq int, data []byte) [][]byte {
	return [][]byte{binary.BigEndian.AppendUint64(nil, obj), binary.BigEndian.AppendUint32(nil, uint32(seq)), data}
}

// byteaPipeWrite inserts one object as 1 MiB rows in one transaction,
// pipelined: BEGIN, the INSERTs and COMMIT go out without waiting for each
// answer (pipeWindow in flight), so that the network, the client's filling
// and PostgreSQL overlap.
func (e *baseEnv) byteaPipeWrite(ctx context.Context, conn *pgx.Conn, o *baseObj, buf []byte) error {
	chunks := int(o.size / baseCall)
	return pipelined(ctx, conn, chunks+2, func(pl *pgconn.Pipeline, i int) {
		switch i {
		case 0:
			pl.SendQueryParams("BEGIN", nil, nil, nil, nil)
		case chunks + 1:
			pl.SendQueryParams("COMMIT", nil, nil, nil, nil)
		default:
			seq := i - 1
			fill(buf, o.id, int64(seq)*baseCall) // Send copies it into the write buffer
			pl.SendQueryParams("INSERT INTO bench_chunks (obj, seq, data) VALUES ($1, $2, $3)",
				chunkParams(o.id, seq, buf), oidsChunk, binary3, nil)
		}
	}, func(int, *pgconn.ResultReader) error { return nil })
}

// byteaPipeRead reads one object's 1 MiB rows, one SELECT per row, pipelined
// (pipeWindow in flight), copying each row out as a server would. Raw reads
// do not verify the bytes (the gateway's GET clients do): PostgreSQL's speed
// is the bound.
func (e *baseEnv) byteaPipeRead(ctx context.Context, conn *pgx.Conn, o baseObj, buf []byte) error {
	chunks := int(o.size / baseCall)
	return pipelined(ctx, conn, chunks, func(pl *pgconn.Pipeline, i int) {
		pl.SendQueryParams("SELECT data FROM bench_chunks WHERE obj = $1 AND seq = $2",
			chunkParams(o.id, i, nil)[:2], oidsChunk[:2], binary3[:2], binaryResult)
	}, func(i int, rr *pgconn.ResultReader) error {
		rows := 0
		for rr.NextRow() {
			if n := copy(buf, rr.Values()[0]); n != baseCall {
				return fmt.Errorf("chunk %d of %d: %d bytes, want %d", i, o.id, n, baseCall)
			}
			rows++
		}
		if rows != 1 {
			return fmt.Errorf("chunk %d of %d: %d rows", i, o.id, rows)
		}
		return nil
	})
}

// diskHashWrite is diskWrite with MD5 and SHA-256 of the content computed on
// the way, as the local engine must (the issue's "fsynced disk rate with
// hashing").
func (e *baseEnv) diskHashWrite(ctx context.Context, conn *pgx.Conn, o *baseObj, buf []byte) error {
	m, s := md5.New(), sha256.New()
	return e.diskWriteTo(o, buf, func(p []byte) { m.Write(p); s.Write(p) })
}

// smallUpsert writes one 4 KiB row in autocommit: the raw form of a small PUT.
func smallUpsert(ctx context.Context, conn *pgx.Conn, key string, data []byte) error {
	if _, err := conn.Exec(ctx, `INSERT INTO bench_small (key, data) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET data = excluded.data`, key, data); err != nil {
		return fmt.Errorf("upsert %s: %w", key, err)
	}
	return nil
}

// smallSelect reads one 4 KiB row: the raw form of a small GET.
func smallSelect(ctx context.Context, conn *pgx.Conn, key string, want int) error {
	var data []byte
	if err := conn.QueryRow(ctx, "SELECT data FROM bench_small WHERE key = $1", key).Scan(&data); err != nil {
		return fmt.Errorf("select %s: %w", key, err)
	}
	if len(data) != want {
		return fmt.Errorf("select %s: %d bytes, want %d", key, len(data), want)
	}
	return nil
}

// fileServerRead reads one file through the plain HTTP file server (not
// verified, like the other raw reads).
func (e *baseEnv) fileServerRead(ctx context.Context, _ *pgx.Conn, o baseObj, buf []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.fileURL+filepath.Base(o.path), nil)
	if err != nil {
		return fmt.Errorf("file server: %w", err)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("file server: %w", err)
	}
	defer resp.Body.Close() // a read error below is the one that matters
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("file server: GET %s: %s", o.path, resp.Status)
	}
	n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
	if err != nil {
		return fmt.Errorf("file server: %s after %d bytes: %w", o.path, n, err)
	}
	if n != o.size {
		return fmt.Errorf("file server: %s: %d bytes, want %d", o.path, n, o.size)
	}
	return nil
}

var (
	oidsLO = []uint32{pgtype.OIDOID, pgtype.Int8OID, pgtype.ByteaOID}
	oidsLG = []uint32{pgtype.OIDOID, pgtype.Int8OID, pgtype.Int4OID}
)

func loParams(oid uint32, off int64, last []byte) [][]byte {
	return [][]byte{binary.BigEndian.AppendUint32(nil, oid), binary.BigEndian.AppendUint64(nil, uint64(off)), last}
}

// loPipeWrite creates one large object (lo_create, autocommit), then writes
// it in one transaction with 1 MiB lo_put calls, pipelined like
// byteaPipeWrite.
func (e *baseEnv) loPipeWrite(ctx context.Context, conn *pgx.Conn, o *baseObj, buf []byte) error {
	if err := conn.QueryRow(ctx, "SELECT lo_create(0)").Scan(&o.oid); err != nil {
		return fmt.Errorf("lo_create: %w", err)
	}
	chunks := int(o.size / baseCall)
	return pipelined(ctx, conn, chunks+2, func(pl *pgconn.Pipeline, i int) {
		switch i {
		case 0:
			pl.SendQueryParams("BEGIN", nil, nil, nil, nil)
		case chunks + 1:
			pl.SendQueryParams("COMMIT", nil, nil, nil, nil)
		default:
			off := int64(i-1) * baseCall
			fill(buf, o.id, off)
			pl.SendQueryParams("SELECT lo_put($1, $2, $3)", loParams(o.oid, off, buf), oidsLO, binary3, nil)
		}
	}, func(int, *pgconn.ResultReader) error { return nil })
}

// loPipeRead reads one large object with 1 MiB lo_get calls in autocommit,
// pipelined like byteaPipeRead.
func (e *baseEnv) loPipeRead(ctx context.Context, conn *pgx.Conn, o baseObj, buf []byte) error {
	chunks := int(o.size / baseCall)
	return pipelined(ctx, conn, chunks, func(pl *pgconn.Pipeline, i int) {
		pl.SendQueryParams("SELECT lo_get($1, $2, $3)", loParams(o.oid, int64(i)*baseCall, binary.BigEndian.AppendUint32(nil, baseCall)),
			oidsLG, binary3, binaryResult)
	}, func(i int, rr *pgconn.ResultReader) error {
		rows := 0
		for rr.NextRow() {
			if n := copy(buf, rr.Values()[0]); n != baseCall {
				return fmt.Errorf("lo_get %d chunk %d: %d bytes, want %d", o.oid, i, n, baseCall)
			}
			rows++
		}
		if rows != 1 {
			return fmt.Errorf("lo_get %d chunk %d: %d rows", o.oid, i, rows)
		}
		return nil
	})
}
