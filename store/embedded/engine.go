// Package embedded is the metadata engine of the embedded default: no
// PostgreSQL, metadata in an SQLite database (modernc.org/sqlite, pure Go, so
// the binary stays cgo-free) at <Dir>/meta.db, small content inline in the blob
// row and large content in files through store/localfs under <Dir>. It
// implements store.ObjectStore with the same semantics and error sentinels as
// the PostgreSQL engine (store/pg): content-addressed blobs deduplicated by
// SHA-256 with ids that are never reused, object rows referencing blobs,
// multipart objects as manifests of part blobs, copies as metadata operations.
//
// SQLite allows one writer at a time: the engine keeps one dedicated writer
// connection that opens every write transaction with BEGIN IMMEDIATE (so a
// transaction never has to upgrade its lock halfway), and a separate pool of
// reader connections, which WAL mode lets read committed snapshots while the
// writer works. Object and upload locks and content pins live in process.
//
// Statements run prepared: database/sql would hand each call's SQL text to
// the driver, which parses and finalizes it every time (about a quarter of a
// small GET's CPU). Each pool has a statement cache (stmts.go) that prepares a
// text once per connection and reuses it, inside transactions too; it holds
// at most stmtLimit texts (the engine has about a hundred) and runs any
// beyond that unprepared. SQLite re-prepares a statement whose schema changed.
// See ADR 005.
package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/protocol"
	"github.com/s3gate/s3gate/throttle"
)

// MetaFile is the name of the metadata database inside Config.Dir.
const MetaFile = "meta.db"

// busyTimeout is how long a connection waits for SQLite's file locks. Writes
// are already serialized in process by the single writer connection; the
// timeout only covers checkpoints and a second process opening the files.
const busyTimeout = 10 * time.Second

// Config configures Open.
type Config struct {
	// Dir is the data directory: the metadata database is <Dir>/meta.db and
	// large content lives in <Dir>/stage and <Dir>/blobs (store/localfs).
	Dir string
	// InlineMax is the inline knee: content up to this many bytes is stored in
	// the blob row. 0 means store.DefaultInlineMax; negative stores nothing
	// inline.
	InlineMax int
	// Region is the default region of new buckets ("" means us-east-1).
	Region string
	// Governor paces GET streams; nil means unpaced. The caller owns it.
	Governor *throttle.BandwidthGovernor
	// Pins holds the content pins of GET streams; nil means a private,
	// uncapped fleet.LocalPins. Pass one to cap pins (beyond the cap GETs
	// answer store.ErrSlowDown) or to export its metrics.
	Pins *fleet.LocalPins
	// KeysOnly is for commands that only manage access keys beside a running
	// gateway (s3gate admin): SQLite's own file locks keep those writes safe,
	// so no data directory lock (LockFile) is taken. Every other user holds it.
	KeysOnly bool

	driver string // the database/sql driver; "" means modernc's "sqlite" (tests count compilations)
}

// Engine is the embedded metadata engine. It implements store.ObjectStore.
type Engine struct {
	wdb     *sql.DB    // exactly one connection: every write transaction
	rdb     *sql.DB    // reader pool
	wq      *stmtCache // the writer's prepared statements
	rq      *stmtCache // the readers' prepared statements; the querier of autocommit reads
	media   *localfs.Media
	region  string
	locks   *lockTable
	pins    *fleet.LocalPins
	gov     *throttle.BandwidthGovernor // nil: unpaced
	dirLock *os.File                    // holds the data directory's flock until Close
	// The write protocol over this engine's dialect: PutObject, UploadPart,
	// Create/Complete/AbortMultipartUpload, ListParts, DeleteObject(s).
	*protocol.Store
}

var _ store.ObjectStore = (*Engine)(nil)

// Open opens (creating if needed) the data directory and its metadata
// database, applies pending migrations and returns the engine.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded: no data directory given")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded: data directory %q: %w", cfg.Dir, err)
	}
	if strings.ContainsAny(dir, "?#") {
		// The driver splits its DSN at '?'.
		return nil, fmt.Errorf("embedded: data directory %q must not contain '?' or '#'", dir)
	}
	if err := localfs.PrivateDir(dir); err != nil {
		return nil, fmt.Errorf("embedded: data directory: %w", err)
	}
	var lock *os.File
	if !cfg.KeysOnly {
		if lock, err = lockDataDir(dir); err != nil {
			return nil, err
		}
	}
	opened := false
	defer func() {
		if !opened && lock != nil {
			_ = lock.Close() // releases the flock; the open error is the one to report
		}
	}()
	media, err := localfs.Open(dir, false)
	if err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	e := &Engine{dirLock: lock, media: media, region: cfg.Region, locks: newLockTable(), pins: cfg.Pins, gov: cfg.Governor}
	if e.pins == nil {
		e.pins = fleet.NewLocalPins(0, nil)
	}
	if e.region == "" {
		e.region = "us-east-1"
	}
	// SQLite hands the id of a rolled-back blob row out again: a file found
	// at a new row's id is the orphan of that rollback.
	// Its pins are in process and never lost.
	e.Store = protocol.NewStore(dialect{e}, protocol.Config{Engine: "embedded", Content: media.Content(true),
		InlineMax: cfg.InlineMax, Pins: e.pins, Governor: e.gov})

	path := filepath.Join(dir, MetaFile)
	if err := privateDB(path); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	// The writer sets the persistent journal mode before any reader opens.
	driver := cfg.driver
	if driver == "" {
		driver = "sqlite"
	}
	e.wdb, err = sql.Open(driver, dsn(path, true))
	if err != nil {
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	e.wdb.SetMaxOpenConns(1)
	e.wdb.SetMaxIdleConns(1)
	e.wdb.SetConnMaxLifetime(0)
	e.wdb.SetConnMaxIdleTime(0)
	if err := e.wdb.PingContext(ctx); err != nil {
		_ = e.wdb.Close() // the ping error is the one to report
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	if err := migrate(ctx, e.wdb); err != nil {
		_ = e.wdb.Close()
		return nil, fmt.Errorf("embedded: %w", err)
	}
	e.wq = newStmtCache(e.wdb, stmtLimit)
	e.rdb, err = sql.Open(driver, dsn(path, false))
	if err != nil {
		_ = e.wdb.Close()
		return nil, fmt.Errorf("embedded: open %s for reading: %w", path, err)
	}
	e.rq = newStmtCache(e.rdb, stmtLimit)
	readers := max(4, runtime.GOMAXPROCS(0)*2)
	e.rdb.SetMaxOpenConns(readers)
	e.rdb.SetMaxIdleConns(readers)
	if err := e.rdb.PingContext(ctx); err != nil {
		_ = e.Close()
		return nil, fmt.Errorf("embedded: open %s for reading: %w", path, err)
	}
	opened = true
	return e, nil
}

// LockFile is the file inside Config.Dir whose exclusive flock an open
// engine holds: locks and pins live in process, so one process per data
// directory.
const LockFile = "lock"

// ErrInUse means that another process holds the data directory's lock.
var ErrInUse = errors.New("in use by another s3gate process (serve, gc or fsck): one process per data directory")

// lockDataDir takes the data directory's exclusive, non-blocking flock.
func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockFile), os.O_RDWR|os.O_CREATE, localfs.FileMode)
	if err != nil {
		return nil, fmt.Errorf("embedded: lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close() // the lock error is the one to report
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("embedded: data directory %s is %w", dir, ErrInUse)
		}
		return nil, fmt.Errorf("embedded: lock data directory %s: %w", dir, err)
	}
	return f, nil
}

// dsn builds the driver's data source name. Writers take the write lock at
// BEGIN (BEGIN IMMEDIATE); readers are query-only.
func dsn(path string, writer bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	if writer {
		q.Add("_pragma", "journal_mode(WAL)")
		// NORMAL in WAL mode: a commit is durable once the WAL is synced at
		// checkpoint; a power loss can lose the last commits but never
		// corrupts the database. Content files are fsynced before COMMIT.
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
	} else {
		q.Add("_pragma", "query_only(1)")
	}
	return path + "?" + q.Encode()
}

// Close closes both connection pools. Open readers must be closed first.
func (e *Engine) Close() error {
	var errs []error
	// Statements first, while their connections are open to finalize them.
	for _, c := range []*stmtCache{e.rq, e.wq} {
		if c != nil {
			if err := c.close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if e.rdb != nil {
		if err := e.rdb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close readers: %w", err))
		}
	}
	if e.wdb != nil {
		if err := e.wdb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close writer: %w", err))
		}
	}
	if e.dirLock != nil {
		if err := e.dirLock.Close(); err != nil { // closing releases the flock
			errs = append(errs, fmt.Errorf("unlock data directory: %w", err))
		}
		e.dirLock = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("embedded: %w", err)
	}
	return nil
}

// Ping checks that the database answers a query and that the content media
// accepts durable writes.
func (e *Engine) Ping(ctx context.Context) error {
	var one int
	if err := e.rq.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("embedded: ping: %w: %w", store.ErrUnavailable, err)
	}
	if err := e.media.Writable(ctx); err != nil {
		return fmt.Errorf("embedded: ping: %w: %w", store.ErrUnavailable, err)
	}
	return nil
}

// Media returns the content media (for GC and metrics).
func (e *Engine) Media() *localfs.Media { return e.media }

// DB returns the reader pool (for GC, metrics and admin commands that read the
// schema; writes must go through the engine).
func (e *Engine) DB() *sql.DB { return e.rdb }

// withWrite runs fn in a write transaction (BEGIN IMMEDIATE on the single
// writer connection) and commits it. Any error or panic rolls back; the
// connection is never returned mid-transaction. Callers take their object
// locks before calling, never inside fn: fn holds the only writer connection.
// fn's statements run prepared through the writer's statement cache.
func (e *Engine) withWrite(ctx context.Context, fn func(tx txQuerier) error) (err error) {
	e.wq.preparePending(ctx)
	tx, err := e.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", mapErr(err))
	}
	committed := false
	defer func() {
		if !committed {
			if rerr := tx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
			}
		}
	}()
	if err := fn(txQuerier{tx: tx, c: e.wq}); err != nil {
		return err
	}
	// database/sql ends the transaction whatever Commit returns, and the
	// driver rolls back a COMMIT that failed inside the transaction, so the
	// writer connection never goes back to its pool mid-transaction.
	committed = true
	if err := tx.Commit(); err != nil {
		return &protocol.CommitError{Err: fmt.Errorf("commit: %w", mapErr(err))}
	}
	return nil
}

// withRead runs fn in a read transaction on the reader pool: every statement
// of fn sees the same committed snapshot. fn's statements run prepared
// through the readers' statement cache.
func (e *Engine) withRead(ctx context.Context, fn func(tx txQuerier) error) error {
	return e.rq.readTx(ctx, nil, fn)
}

// mapErr turns "database is busy/locked" into store.ErrUnavailable (503) and
// leaves other errors as they are.
func mapErr(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
	}
	return err
}

// isConstraint reports a constraint violation of the given extended kind
// (sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY, ...).
func isConstraint(err error, code int) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == code
}

// now is the time stamp of a write, in the resolution the schema keeps.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func toMicros(t time.Time) int64    { return t.UnixMicro() }
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// lockStripes is the number of in-process object lock stripes. Two identities
// that share a stripe merely wait for each other.
const lockStripes = 1024

// lockTable is a striped lock keyed by a hash of an object or upload
// identity, the in-process counterpart of store/pg's advisory locks. Each
// stripe is a one-slot channel so that waiting honours the context.
type lockTable struct {
	stripes [lockStripes]chan struct{}
}

func newLockTable() *lockTable {
	t := &lockTable{}
	for i := range t.stripes {
		t.stripes[i] = make(chan struct{}, 1)
	}
	return t
}

// lock takes the stripes of keys in ascending stripe order (a fixed order
// cannot deadlock) and returns the function that releases them.
func (t *lockTable) lock(ctx context.Context, keys ...uint64) (func(), error) {
	idx := make([]int, 0, len(keys))
	for _, k := range keys {
		idx = append(idx, int(k%lockStripes))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	unlock := func(n int) {
		for _, i := range idx[:n] {
			<-t.stripes[i]
		}
	}
	for n, i := range idx {
		select {
		case t.stripes[i] <- struct{}{}:
		case <-ctx.Done():
			unlock(n)
			return nil, fmt.Errorf("object lock: %w", ctx.Err())
		}
	}
	return func() { unlock(len(idx)) }, nil
}

// privateDB creates the database file with localfs.FileMode before SQLite
// opens it, and sets that mode on an existing one and its -wal and -shm:
// SQLite creates the -wal and -shm files with the mode of the database file,
// so they follow, whatever the umask.
func privateDB(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, localfs.FileMode)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Chmod(p, localfs.FileMode); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("set mode of %s: %w", p, err)
		}
	}
	return nil
}
