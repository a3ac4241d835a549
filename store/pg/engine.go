// Package pg is the metadata engine on PostgreSQL (pgx v5): buckets, objects,
// multipart uploads and content-addressed blobs, published by joint
// transactions. Small content lives inline in the blob row; large content goes
// to a content engine: PostgreSQL large objects (store/pglo), 1 MiB bytea rows
// (store/pgchunks) or filesystem media (store/localfs).
//
// Every transaction is ended on every path before its connection returns to
// the pool (amendment A1): see withTx.
package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/pg/rowbatch"
	"github.com/s3gate/s3gate/store/pgchunks"
	"github.com/s3gate/s3gate/store/pglo"
	"github.com/s3gate/s3gate/store/protocol"
	"github.com/s3gate/s3gate/throttle"
)

// Large engine names for Config.Large.
const (
	LargePGLO     = store.TierPGLO
	LargePGChunks = store.TierPGChunks
	LargeLocal    = store.TierLocal
	// DefaultLarge is the large engine used when Config.Large is empty. 1 MiB
	// bytea rows measured faster than large objects for both writes and reads
	// (see docs/adr and the package benchmarks) and travel through logical
	// replication.
	DefaultLarge = LargePGChunks
)

// rollbackTimeout bounds the rollback that ends a failed transaction; it runs
// on a fresh context because the request's may be the reason for the failure.
const rollbackTimeout = 5 * time.Second

// defaultMaxConns is the pool size unless the URL sets pool_max_conns.
const defaultMaxConns = 32

// Backstops set on every pooled session unless the URL sets them (ADR 007).
// Nothing legitimate leaves a pooled transaction idle for seconds, and no
// statement of the gateway (1 MiB chunk writes, batched GC deletes) runs for
// minutes; a bug or a stuck peer then costs a session, not the pool.
const (
	idleInTxTimeout  = "30s"
	statementTimeout = "5min"
)

// Config configures Open.
type Config struct {
	// DatabaseURL is a PostgreSQL URL (pgxpool options such as pool_max_conns
	// are honoured).
	DatabaseURL string
	// InlineMax is the inline knee: content up to this many bytes is stored in
	// the blob row. 0 means store.DefaultInlineMax; negative stores nothing
	// inline.
	InlineMax int
	// ReadLanes is how many batches of concurrent object reads (the
	// resolving statement of a GET or HEAD) may be in flight at once; reads
	// wait for the one in flight and go out together in the next batch, and
	// open another lane only when that one is slow (rowbatch, ADR 027).
	// 0 means rowbatch.DefaultLanes; negative sends every read alone.
	ReadLanes int
	// Large names the large-content engine: "pglo", "pgchunks" or "local"
	// ("" means DefaultLarge).
	Large string
	// Media is the filesystem media for Large = "local".
	Media *localfs.Media
	// Region is the default region of new buckets.
	Region string
	// SkipMigrate skips applying migrations in Open (the schema must then be
	// current already; Open checks it).
	SkipMigrate bool
	// Pins protects streamed content against GC while GETs read it: in
	// production a *fleet.SessionPins on the same database, which the caller
	// opens and closes (after the engine's readers are closed). Nil means no
	// pinning, for tests and tools that run without GC.
	Pins fleet.Pinner
	// Governor paces GET streams; nil means unpaced. The caller owns it.
	Governor *throttle.BandwidthGovernor
	// RowPins, if set, turns row pins on (ADR 010): every put commits a pin
	// row of the blob it references in its joint transaction. Open starts
	// the fleet.RowPins on the engine's pool (the Store field is set by
	// Open); Close closes it, reporting a failure to its OnError.
	RowPins *fleet.RowPinsConfig
	// ReadRowPins makes GETs pin with the row pins instead of Pins
	// (S3GATE_PIN_MODE=rows, which works through a transaction-pooling
	// proxy); Pins, if set, then protects staged content only. It needs
	// RowPins.
	ReadRowPins bool

	// ObserveReadBatch, if set, hears the size of every batch of object
	// reads sent (metrics).
	ObserveReadBatch func(statements int)

	// testHookPinned is protocol.Config.TestHookPinned (tests).
	testHookPinned func(blobID int64)
}

// Engine is the PostgreSQL metadata engine. It implements store.ObjectStore.
type Engine struct {
	pool         *pgxpool.Pool
	large        string
	content      content.Engine // pglo or pgchunks; nil for local
	media        *localfs.Media // local only
	region       string
	pins         fleet.Pinner                // nil: no pinning
	gov          *throttle.BandwidthGovernor // nil: unpaced
	stager       *slotStager                 // staging writes, limited to a share of the pool
	reads        rowQuerier                  // object reads: the pool, or batched over it
	rowPins      *fleet.RowPins              // nil: row pins off
	onRowPinsErr func(error)
	// afterPinRows, if set (tests), runs in a joint transaction right after
	// its pin rows, before the rest of the driver and COMMIT; an error fails
	// the driver there.
	afterPinRows func(tx pgx.Tx) error
	// The write protocol over this engine's dialect: PutObject, UploadPart,
	// Create/Complete/AbortMultipartUpload, ListParts, DeleteObject(s).
	*protocol.Store
}

var _ store.ObjectStore = (*Engine)(nil)

// Open connects to the database, applies pending migrations (unless
// cfg.SkipMigrate) and returns the engine.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("pg: empty database URL")
	}
	e := &Engine{region: cfg.Region, large: cfg.Large, pins: cfg.Pins, gov: cfg.Governor}
	if e.region == "" {
		e.region = "us-east-1"
	}
	if e.large == "" {
		e.large = DefaultLarge
	}
	switch e.large {
	case LargePGLO:
		e.content = pglo.New()
	case LargePGChunks:
		e.content = pgchunks.New()
	case LargeLocal:
		if cfg.Media == nil {
			return nil, errors.New("pg: large engine \"local\" needs media")
		}
		e.media = cfg.Media
	default:
		return nil, fmt.Errorf("pg: unknown large engine %q (want pglo, pgchunks or local)", cfg.Large)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("pg: parse database URL: %w", err)
	}
	if !strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		pcfg.MaxConns = defaultMaxConns
	}
	setDefaultParam(pcfg.ConnConfig.RuntimeParams, "idle_in_transaction_session_timeout", idleInTxTimeout)
	setDefaultParam(pcfg.ConnConfig.RuntimeParams, "statement_timeout", statementTimeout)
	setDefaultParam(pcfg.ConnConfig.RuntimeParams, "application_name", AppName)
	if !cfg.SkipMigrate {
		if err := Migrate(ctx, cfg.DatabaseURL); err != nil {
			return nil, err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("pg: pool: %w", err)
	}
	e.pool = pool
	e.stager = newSlotStager(pool, stageSlots(pcfg.MaxConns))
	e.reads = pool
	if cfg.ReadLanes >= 0 {
		e.reads = rowbatch.New(pool, rowbatch.Config{Lanes: cfg.ReadLanes, Observe: cfg.ObserveReadBatch})
	}
	var large protocol.Content = pgContent{e}
	if e.media != nil {
		// Blob ids never come back: a file at a new id is not this put's.
		large = e.media.Content(false)
	}
	// A pin session's advisory locks can be lost (design §3), and so can
	// row pins that were not renewed in time.
	pcfgProto := protocol.Config{Engine: "pg", Content: large, InlineMax: cfg.InlineMax,
		Pins: e.pins, PinsLosable: true, Governor: e.gov, TestHookPinned: cfg.testHookPinned}
	if cfg.ReadRowPins && cfg.RowPins == nil {
		pool.Close()
		return nil, errors.New("pg: row pins on the read path need RowPins")
	}
	if cfg.RowPins != nil {
		rc := *cfg.RowPins
		rc.Store = NewRowPinStore(pool)
		if e.rowPins, err = fleet.NewRowPins(rc); err != nil {
			pool.Close()
			return nil, fmt.Errorf("pg: %w", err)
		}
		e.onRowPinsErr = rc.OnError
		pcfgProto.RowPins = e.rowPins
		if cfg.ReadRowPins {
			pcfgProto.ReadPins = e.rowPins
		}
	}
	e.Store = protocol.NewStore(dialect{e}, pcfgProto)
	applied, known, err := SchemaVersion(ctx, pool)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("pg: %w", err)
	}
	if applied != known {
		e.Close()
		return nil, fmt.Errorf("pg: schema version %d, this binary needs %d: run migrations", applied, known)
	}
	return e, nil
}

// setDefaultParam sets a session parameter sent at connection start-up,
// unless the operator's URL already set it.
func setDefaultParam(params map[string]string, name, value string) {
	if _, ok := params[name]; !ok {
		params[name] = value
	}
}

// Close stops the row pins (if on) and closes the pool. Open readers must be
// closed first.
func (e *Engine) Close() {
	if e.rowPins != nil {
		if err := e.rowPins.Close(); err != nil && e.onRowPinsErr != nil {
			e.onRowPinsErr(err)
		}
	}
	e.pool.Close()
}

// RowPins are the engine's row pins, nil if off.
func (e *Engine) RowPins() *fleet.RowPins { return e.rowPins }

// Ping checks that the database answers.
func (e *Engine) Ping(ctx context.Context) error {
	if err := e.pool.Ping(ctx); err != nil {
		return fmt.Errorf("pg: ping: %w: %w", store.ErrUnavailable, err)
	}
	return nil
}

// Pool exposes the connection pool to sibling packages of the process (GC,
// fleet) that share the schema.
func (e *Engine) Pool() *pgxpool.Pool { return e.pool }

// Large reports the large engine in use.
func (e *Engine) Large() string { return e.large }

func objectLockKey(bucket, key string) int64 { return fleet.ObjectLockKey(bucket, key) }
func uploadLockKey(uploadID string) int64    { return fleet.UploadLockKey(uploadID) }

// lockXact takes transaction-level advisory locks in ascending key order (a
// fixed order avoids deadlocks between transactions taking several). They are
// released by COMMIT or ROLLBACK, never leaked to the next pool borrower.
func lockXact(ctx context.Context, tx pgx.Tx, keys ...int64) error {
	if _, err := tx.Exec(ctx, lockSQL, keys); err != nil {
		return fmt.Errorf("advisory lock: %w", err)
	}
	return nil
}

// withTx runs fn in a transaction and commits it. Whatever happens after
// BEGIN (an error, a panic, a cancelled context) the transaction is ended
// before the connection goes back to the pool: rollback runs on a fresh,
// bounded context, and if even that fails pgx closes the connection instead
// of returning it (amendment A1).
func (e *Engine) withTx(ctx context.Context, fn func(tx pgx.Tx) error) (err error) {
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", mapErr(err))
	}
	committed := false
	defer func() {
		if !committed {
			if rerr := rollback(ctx, tx); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	if err := fn(tx); err != nil {
		// A connection lost mid-transaction is an outage (503) wherever in
		// fn it surfaced.
		return mapErr(err)
	}

	if err := tx.Commit(ctx); err != nil {
		// pgx ends the transaction on a failed commit (or closes the connection).
		committed = true
		return &protocol.CommitError{Err: fmt.Errorf("commit: %w", mapErr(err))}
	}
	committed = true
	return nil
}

// rollback ends tx on a fresh context. A failed rollback makes pgx close the
// connection, so the pool destroys it rather than lend it out mid-transaction.
func rollback(ctx context.Context, tx pgx.Tx) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if err := tx.Rollback(rctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("rollback (connection discarded): %w", err)
	}
	return nil
}

// mapErr turns connection-level failures into store.ErrUnavailable (503) and
// leaves others as they are.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "53300", pgErr.Code == "53200", strings.HasPrefix(pgErr.Code, "57P"), strings.HasPrefix(pgErr.Code, "08"):
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
	if pgconn.SafeToRetry(err) || errors.As(err, new(*pgconn.ConnectError)) || errors.Is(err, pgconn.ErrConnClosed) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	// pgconn's own errors (they carry SafeToRetry) that are not server
	// answers are a broken connection: reset, EOF or a failed write mid-query
	// when the server stopped or restarted. A client's body error never
	// carries this type.
	var connErr interface{ SafeToRetry() bool }
	if errors.As(err, &connErr) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// isFKViolation reports a foreign-key violation of the named constraint.
func isFKViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503" && pgErr.ConstraintName == constraint
}

// isUniqueViolation reports a unique violation of the named constraint.
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == constraint
}

// Readers of the PostgreSQL content engines, by tier: a blob is read by the
// engine of its tier, whatever engine this instance writes new content with.
var (
	readPGLO     content.Engine = pglo.New()
	readPGChunks content.Engine = pgchunks.New()
)

func contentFor(tier string) content.Engine {
	if tier == store.TierPGLO {
		return readPGLO
	}
	return readPGChunks
}
