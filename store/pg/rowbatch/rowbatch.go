// Package rowbatch sends concurrent one-row reads to PostgreSQL together:
// a read that arrives while another is in flight waits for it and then goes
// out with every read that queued meanwhile, as one pipelined batch on one
// pooled connection. A backend then serves many reads per wake-up, and the
// gateway writes and reads its socket once per batch instead of once per
// read; a read that finds nothing in flight goes out at once, alone, as a
// plain QueryRow would (ADR 027).
//
// One lane in flight batches best, but serializes reads on one backend; a
// read that has waited Config.Spread (its lane is slow: reads from disk, a
// loaded server) opens another lane, up to Config.Lanes, so slow reads still
// run side by side.
//
// Only reads belong here: the statements of a batch share one implicit
// transaction, so one that fails aborts those after it (they are then run
// again one by one), and a write would be tied to its neighbours' fate.
// Each statement still takes its own snapshot under READ COMMITTED, and a
// batch is sent only after every statement in it was queued, so a read sees
// every write acknowledged before it was asked.
package rowbatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of Config.
const (
	// DefaultLanes: batches in flight at once, at most. Reads beyond them
	// queue.
	DefaultLanes = 4
	// DefaultSpread is how long a queued read waits for the lanes in flight
	// before it opens another. Batches of reads served from memory take a
	// few hundred microseconds; a lane busy longer is waiting on something
	// (disk, locks, CPU) that more backends can overlap.
	DefaultSpread = 2 * time.Millisecond
	// DefaultMaxBatch caps the statements of one batch.
	DefaultMaxBatch = 64
	// DefaultTimeout bounds one batch, pool wait included: a batch serves
	// many requests, so no one request's context can bound it.
	DefaultTimeout = 30 * time.Second
)

// Config configures a Batcher; zero fields take the defaults.
type Config struct {
	Lanes    int
	MaxBatch int
	Spread   time.Duration
	Timeout  time.Duration
	// Observe, if set, is told the size of every batch sent (metrics, tests).
	Observe func(statements int)
	// OnError, if set, hears what no read returns: a batch whose every
	// statement answered but whose end failed (its connection is dropped).
	OnError func(error)
}

// Batcher queues one-row reads and runs them in pipelined batches on pool.
// It is safe for concurrent use.
type Batcher struct {
	pool *pgxpool.Pool
	cfg  Config

	mu      sync.Mutex
	queue   []*call
	running int // lanes busy
}

// New returns a Batcher over pool.
func New(pool *pgxpool.Pool, cfg Config) *Batcher {
	if cfg.Lanes <= 0 {
		cfg.Lanes = DefaultLanes
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Spread <= 0 {
		cfg.Spread = DefaultSpread
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Batcher{pool: pool, cfg: cfg}
}

// QueryRow returns a row whose Scan runs sql in the next batch, as
// pgxpool.Pool.QueryRow would run it alone: pgx.ErrNoRows for no row, the
// first row's columns scanned into dest otherwise.
func (b *Batcher) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return &row{b: b, ctx: ctx, sql: sql, args: args}
}

type row struct {
	b    *Batcher
	ctx  context.Context
	sql  string
	args []any
}

func (r *row) Scan(dest ...any) error { return r.b.do(r.ctx, r.sql, r.args, dest) }

// The states of a call.
const (
	queued    = iota
	sent      // in a batch on the wire
	abandoned // its caller went away: nothing may be written to dest
	done
)

type call struct {
	sql  string
	args []any
	dest []any
	done chan struct{}

	mu    sync.Mutex // held while dest is written, and to abandon
	state int
	err   error
}

func (b *Batcher) do(ctx context.Context, sql string, args, dest []any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	if b.running == 0 {
		// Nothing in flight (so nothing queued): the read goes out alone,
		// on its caller's own context, as a plain QueryRow.
		b.running++
		b.mu.Unlock()
		b.observe(1)
		err := b.pool.QueryRow(ctx, sql, args...).Scan(dest...)
		b.release()
		return err
	}
	// A lane is in flight and takes the queue when it is done (lane,
	// release): the read waits for it, unless it waits Spread.
	c := &call{sql: sql, args: args, dest: dest, done: make(chan struct{})}
	b.queue = append(b.queue, c)
	spread := b.running < b.cfg.Lanes
	b.mu.Unlock()
	if spread && b.wait(ctx, c) {
		return c.err
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state == done {
		return c.err
	}
	// A queued call is skipped when its batch is taken; a sent one has its
	// row discarded. Either way dest is never written after this.
	c.state = abandoned
	return ctx.Err()
}

// wait waits Spread for c's batch, then opens another lane if c is still
// queued and the lanes allow; it reports whether c is done.
func (b *Batcher) wait(ctx context.Context, c *call) bool {
	t := time.NewTimer(b.cfg.Spread)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	b.mu.Lock()
	// An older read may have opened a lane already and taken c with it.
	open := b.running < b.cfg.Lanes && slices.Contains(b.queue, c)
	if open {
		b.running++
	}
	b.mu.Unlock()
	if open {
		go b.lane()
	}
	return false
}

// release frees a lane that ran a read alone, or hands it to the reads that
// queued meanwhile.
func (b *Batcher) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) > 0 {
		go b.lane()
		return
	}
	b.running--
}

func (b *Batcher) observe(n int) {
	if b.cfg.Observe != nil {
		b.cfg.Observe(n)
	}
}

// lane sends batches until the queue is empty, then frees itself.
func (b *Batcher) lane() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.cfg.MaxBatch)
		if n == 0 {
			b.running--
			b.mu.Unlock()
			return
		}
		batch := make([]*call, n)
		copy(batch, b.queue)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.mu.Unlock()
		b.send(batch)
	}
}

// send runs one batch; every call in it is done (or abandoned) on return.
func (b *Batcher) send(batch []*call) {
	live := batch[:0:0]
	for _, c := range batch {
		c.mu.Lock()
		if c.state == queued {
			c.state = sent
			live = append(live, c)
		}
		c.mu.Unlock()
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timeout)
	defer cancel()
	b.observe(len(live))
	again := live
	if len(live) > 1 {
		again = b.pipeline(ctx, live)
	}
	// Alone, or after a failed statement of a batch: those after it were
	// aborted with it (one implicit transaction) and run again, each on its
	// own.
	for _, c := range again {
		c.finish(b.pool.Query(ctx, c.sql, c.args...))
	}
}

// pipeline sends live as one batch on one connection and finishes the calls
// it can; it returns those that must run again.
func (b *Batcher) pipeline(ctx context.Context, live []*call) (again []*call) {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		for _, c := range live {
			c.deliver(fmt.Errorf("rowbatch: acquire a connection: %w", err))
		}
		return nil
	}
	// Release destroys a connection that a failed batch left broken or
	// mid-protocol.
	defer conn.Release()
	pb := &pgx.Batch{}
	for _, c := range live {
		pb.Queue(c.sql, c.args...)
	}
	br := conn.SendBatch(ctx, pb)
	for i, c := range live {
		if err := c.finish(br.Query()); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			// c has its own statement's error; the rest were aborted.
			again = live[i+1:]
			break
		}
	}
	if err := br.Close(); err != nil && again == nil && b.cfg.OnError != nil {
		// Every statement answered; only the batch's end failed.
		b.cfg.OnError(fmt.Errorf("rowbatch: end of batch: %w", err))
	}
	return again
}

// finish delivers the first row of rows to the call, as pgx's QueryRow
// would: scanned into dest, pgx.ErrNoRows, or the statement's error, which
// it returns. The reads from the connection happen outside c.mu, so a
// caller that gives up never waits on the network; only the scan of a row
// already received runs under it.
func (c *call) finish(rows pgx.Rows, err error) error {
	if err != nil {
		if rows != nil {
			rows.Close()
		}
		c.deliver(err)
		return err
	}
	next := rows.Next()
	if next {
		c.mu.Lock()
		if c.state != abandoned {
			err = rows.Scan(c.dest...)
		}
		c.mu.Unlock()
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	if err == nil && !next {
		err = pgx.ErrNoRows
	}
	c.deliver(err)
	return err
}

// deliver ends the call with err unless its caller abandoned it.
func (c *call) deliver(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != abandoned {
		c.err, c.state = err, done
		close(c.done)
	}
}
