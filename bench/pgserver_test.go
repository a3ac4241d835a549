package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/pgtest"
)

// benchPG is the PostgreSQL server of one benchmark run: the gateways'
// databases and the raw baselines' live on it side by side.
type benchPG struct {
	admin string // URL of a database for the harness's own queries
	newDB func(tb testing.TB) string
	// stmts is false when pg_stat_statements is not loaded (a server of
	// S3GATE_TEST_DATABASE_URL): statement counts are then not reported.
	stmts bool
	// stmtConn is the counting connection, opened once: a connection per
	// round would cost more than a listing on a busy machine.
	stmtConn *pgx.Conn
	cleanup  func(func()) // the Cleanup of the benchmark that started the server
	// own is true for the server this benchmark started (settle may vacuum
	// and checkpoint it).
	own bool
}

// settle vacuums the databases behind dsns ("" is none) and checkpoints the server, so
// that the next engine's rounds do not share the machine with autovacuum of
// the last engine's tables and a checkpoint of its writes: both sides of a
// pair would see that load, but in a short round unevenly. Only on the
// server the benchmark started.
func (p *benchPG) settle(tb testing.TB, dsns ...string) {
	if p == nil || !p.own {
		return
	}
	for _, dsn := range dsns {
		if dsn == "" {
			continue // the embedded default: no database
		}
		conn, err := pgx.Connect(tb.Context(), dsn)
		if err != nil {
			tb.Fatalf("settle: connect: %v", err)
		}
		_, err = conn.Exec(tb.Context(), "VACUUM")
		closeConn(tb, conn)
		if err != nil {
			tb.Fatalf("settle: VACUUM: %v", err)
		}
	}
	conn := p.connect(tb)
	defer closeConn(tb, conn)
	if _, err := conn.Exec(tb.Context(), "CHECKPOINT"); err != nil {
		tb.Fatalf("settle: CHECKPOINT: %v", err)
	}
}

// Durable settings: the figures are for synchronous commit on, and
// pg_stat_statements counts the statements of each operation.
var durable = []string{
	"fsync=on", "synchronous_commit=on", "full_page_writes=on",
	"shared_buffers=256MB", "shared_preload_libraries=pg_stat_statements",
	"pg_stat_statements.track_utility=on", "max_connections=300",
	// The default 1 GB forced a checkpoint every ~16 s in the 64 MiB rounds,
	// landing on whichever side ran then; a server taking such writes is
	// given room (a checkpoint still runs every checkpoint_timeout).
	"max_wal_size=4GB",
}

var dbSeq atomic.Int64

// startBenchPG starts a durable throwaway server of tb's own, or, with
// S3GATE_TEST_DATABASE_URL set, takes fresh databases on that server.
func startBenchPG(tb testing.TB) *benchPG {
	if os.Getenv(pgtest.EnvDatabaseURL) != "" {
		p := &benchPG{newDB: pgtest.DSN, cleanup: tb.Cleanup}
		p.admin = p.newDB(tb)
		p.stmts = p.createExtension(tb) == nil
		if !p.stmts {
			tb.Log("pg_stat_statements not available on that server: no statement counts")
		}
		return p
	}
	srv := pgtest.NewServer(tb)
	srv.Set(durable...)
	if err := srv.Start(); err != nil {
		tb.Fatalf("bench PostgreSQL: %v", err)
	}
	p := &benchPG{admin: srv.DSN(), own: true, stmts: true, cleanup: tb.Cleanup, newDB: func(tb testing.TB) string {
		u, err := srv.CreateDatabase(fmt.Sprintf("bench_%d", dbSeq.Add(1)))
		if err != nil {
			tb.Fatalf("bench PostgreSQL: %v", err)
		}
		return u
	}}
	if err := p.createExtension(tb); err != nil {
		tb.Fatalf("bench PostgreSQL: %v", err)
	}
	return p
}

// counter returns the counting connection, opened on first use and closed
// when tb (the benchmark that started the server) ends.
func (p *benchPG) counter(tb testing.TB) *pgx.Conn {
	if p.stmtConn == nil {
		conn, err := pgx.Connect(context.Background(), p.admin)
		if err != nil {
			tb.Fatalf("statement count: connect: %v", err)
		}
		p.stmtConn = conn
		p.cleanup(func() { closeConn(tb, conn) })
	}
	return p.stmtConn
}

func (p *benchPG) createExtension(tb testing.TB) error {
	conn := p.connect(tb)
	defer closeConn(tb, conn)
	if _, err := conn.Exec(tb.Context(), "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return fmt.Errorf("pg_stat_statements: %w", err)
	}
	return nil
}

func (p *benchPG) connect(tb testing.TB) *pgx.Conn {
	conn, err := pgx.Connect(tb.Context(), p.admin)
	if err != nil {
		tb.Fatalf("bench PostgreSQL: connect: %v", err)
	}
	return conn
}

// stmtCount counts the statements PostgreSQL executed in one database
// between start and stop (pg_stat_statements: top-level statements, BEGIN and
// COMMIT included; a pipelined batch counts each of its statements).
type stmtCount struct {
	p    *benchPG
	conn *pgx.Conn
	db   string
}

// countStatements resets the statistics and starts counting the statements
// of the database behind dsn; nil when counts are not available.
func (p *benchPG) countStatements(tb testing.TB, dsn string) *stmtCount {
	if p == nil || !p.stmts || dsn == "" {
		return nil
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		tb.Fatalf("statement count: %v", err)
	}
	c := &stmtCount{p: p, conn: p.counter(tb), db: cfg.Database}
	if _, err := c.conn.Exec(tb.Context(), "SELECT pg_stat_statements_reset()"); err != nil {
		tb.Fatalf("statement count: reset: %v", err)
	}
	return c
}

// stop returns the statements counted so far; with S3GATE_BENCH_STMTS=1 it
// prints them per op, the most frequent first.
func (c *stmtCount) stop(tb testing.TB, ops int) (float64, bool) {
	if c == nil {
		return 0, false
	}
	ctx := tb.Context()
	// Per call, for the log: mean execution time (waits on locks included),
	// WAL records and bytes, shared buffers touched (hit + read).
	const q = `SELECT s.calls, s.total_exec_time / s.calls, s.wal_records::float8 / s.calls,
			s.wal_bytes::float8 / s.calls, (s.shared_blks_hit + s.shared_blks_read)::float8 / s.calls, s.query
		FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
		WHERE d.datname = $1 ORDER BY s.calls DESC`
	rows, err := c.conn.Query(ctx, q, c.db)
	if err != nil {
		tb.Fatalf("statement count: %v", err)
	}
	var total int64
	var top []string
	for rows.Next() {
		var calls int64
		var execMS, walRecs, walBytes, blks float64
		var query string
		if err := rows.Scan(&calls, &execMS, &walRecs, &walBytes, &blks, &query); err != nil {
			tb.Fatalf("statement count: %v", err)
		}
		total += calls
		top = append(top, fmt.Sprintf("%8.2f/op %8.1f us %6.2f wal-rec %7.0f wal-B %6.2f blks  %s", float64(calls)/float64(ops),
			execMS*1000, walRecs, walBytes, blks, strings.Join(strings.Fields(query), " ")))
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("statement count: %v", err)
	}
	if os.Getenv("S3GATE_BENCH_STMTS") != "" {
		// Straight to stderr: a benchmark's log is cut at 10 lines without -v.
		fmt.Fprintf(os.Stderr, "%s: statements per op (%d ops):\n%s\n", tb.Name(), ops, strings.Join(top, "\n"))
	}
	return float64(total), true
}
