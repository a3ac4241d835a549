package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// stmtLimit bounds each pool's statement cache. The engine's statements are
// literals or built from a few fixed variants (listings), about a hundred
// texts in all; a text beyond the bound runs unprepared, as without a cache.
const stmtLimit = 256

// stmtCache keeps a prepared statement for each statement text run on one
// pool (e.rdb or e.wdb: a statement of one pool cannot run in a transaction
// of the other). Without it database/sql hands every call's text to the
// driver, which parses and finalizes it each time: about a quarter of a small
// GET's CPU. A cached *sql.Stmt is prepared once on each pooled connection
// that runs it (database/sql re-prepares it lazily there); inside a
// transaction Tx.StmtContext reuses the statement already prepared on the
// transaction's connection. SQLite re-prepares a statement whose schema
// changed (sqlite3_prepare_v2), so cached statements survive schema changes.
//
// One rule follows from the reuse: a transaction must not run a text again
// while Rows of that same text are still open in it, because both would step
// the one SQLite statement of that connection. The engine reads every Rows to
// its end before its next statement.
//
// As a querier, a stmtCache runs statements outside any transaction on its
// pool (autocommit).
type stmtCache struct {
	db    *sql.DB
	limit int

	mu     sync.RWMutex
	stmts  map[string]*sql.Stmt
	closed bool
	// pending holds the texts that missed inside a transaction, to prepare
	// before the next BEGIN on this pool (see txQuerier).
	pending  map[string]struct{}
	npending atomic.Int32

	prepared atomic.Int64 // statements prepared into the cache
	uncached atomic.Int64 // calls run unprepared: a miss in a transaction, a full or closed cache
}

func newStmtCache(db *sql.DB, limit int) *stmtCache {
	return &stmtCache{db: db, limit: limit, stmts: map[string]*sql.Stmt{}, pending: map[string]struct{}{}}
}

var _ querier = (*stmtCache)(nil)

// lookup returns the cached statement of query, or nil.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.RLock()
	s := c.stmts[query]
	c.mu.RUnlock()
	return s
}

// full reports that no statement can be added.
func (c *stmtCache) full() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.closed || len(c.stmts) >= c.limit
}

// stmt returns the cached statement of query, preparing it on a miss while
// the cache has room; nil means run query unprepared. Preparing takes a
// connection of the pool: never call it from inside a transaction on this
// pool (the writer's pool has one connection; txQuerier defers instead).
func (c *stmtCache) stmt(ctx context.Context, query string) *sql.Stmt {
	if s := c.lookup(query); s != nil {
		return s
	}
	if c.full() {
		c.uncached.Add(1)
		return nil
	}
	// Prepared outside the lock: it waits for a connection. Two callers that
	// miss together both prepare; the second closes its own.
	s, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		// Running it unprepared reports the error with its caller's context.
		c.uncached.Add(1)
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.stmts[query]; old != nil || c.closed || len(c.stmts) >= c.limit {
		_ = s.Close() // never used; closing an unused statement cannot fail
		if old == nil {
			c.uncached.Add(1)
		}
		return old
	}
	c.stmts[query] = s
	c.prepared.Add(1)
	return s
}

// deferPrepare records that query missed inside a transaction, to be prepared by
// preparePending.
func (c *stmtCache) deferPrepare(query string) {
	c.uncached.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.stmts)+len(c.pending) >= c.limit {
		return
	}
	if _, ok := c.pending[query]; !ok {
		c.pending[query] = struct{}{}
		c.npending.Add(1)
	}
}

// preparePending prepares the texts that missed inside transactions. Callers
// run it just before BEGIN on the pool, holding only what BEGIN waits with,
// so that waiting for a connection here adds no wait that BEGIN does not
// have. A text that fails to prepare is dropped; its next miss records it
// again.
func (c *stmtCache) preparePending(ctx context.Context) {
	if c.npending.Load() == 0 {
		return
	}
	c.mu.Lock()
	texts := make([]string, 0, len(c.pending))
	for q := range c.pending {
		texts = append(texts, q)
	}
	clear(c.pending)
	c.npending.Store(0)
	c.mu.Unlock()
	for _, q := range texts {
		c.stmt(ctx, q)
	}
}

// close closes every cached statement; later calls run unprepared (and fail
// on the closed pool). database/sql closes a statement in use by a
// transaction or Rows once they end.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for q, s := range c.stmts {
		if err := s.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close statement: %w", err))
		}
		delete(c.stmts, q)
	}
	clear(c.pending)
	c.npending.Store(0)
	return errors.Join(errs...)
}

// size returns the number of cached statements.
func (c *stmtCache) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.stmts)
}

// QueryRowContext runs query outside a transaction, prepared once.
func (c *stmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := c.stmt(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, query, args...)
}

// QueryContext runs query outside a transaction, prepared once.
func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := c.stmt(ctx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, query, args...)
}

// ExecContext runs query outside a transaction, prepared once.
func (c *stmtCache) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := c.stmt(ctx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return c.db.ExecContext(ctx, query, args...)
}

// readTx runs fn in a transaction on c's pool that is only read (it is rolled
// back): the read transactions of the reader pool.
func (c *stmtCache) readTx(ctx context.Context, opts *sql.TxOptions, fn func(tx txQuerier) error) error {
	c.preparePending(ctx)
	tx, err := c.db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin read: %w", mapErr(err))
	}
	defer func() { _ = tx.Rollback() }() // read-only: ending it is all that matters
	return fn(txQuerier{tx: tx, c: c})
}

// txQuerier runs the statements of one transaction on c's pool through c: a
// cached text runs as the transaction's copy of the statement (Tx.StmtContext:
// the one already prepared on this connection, or prepared on it now and
// kept for it); a missed text runs unprepared and is prepared before the next
// BEGIN, not now: preparing needs a second connection of the pool while this
// transaction holds one, and the writer's pool has only one.
type txQuerier struct {
	tx *sql.Tx
	c  *stmtCache
}

var _ querier = txQuerier{}

// stmt returns the transaction's statement of query, or nil to run it
// unprepared.
func (q txQuerier) stmt(ctx context.Context, query string) *sql.Stmt {
	s := q.c.lookup(query)
	if s == nil {
		q.c.deferPrepare(query)
		return nil
	}
	return q.tx.StmtContext(ctx, s)
}

// QueryRowContext runs query in the transaction.
func (q txQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if s := q.stmt(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	return q.tx.QueryRowContext(ctx, query, args...)
}

// QueryContext runs query in the transaction.
func (q txQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if s := q.stmt(ctx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	return q.tx.QueryContext(ctx, query, args...)
}

// ExecContext runs query in the transaction.
func (q txQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if s := q.stmt(ctx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	return q.tx.ExecContext(ctx, query, args...)
}
