package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/s3gate/s3gate/store/protocol"
)

// The pipelined small put (ADR 002, amendment of issue 16). The protocol
// names the statements its fn runs first (protocol.Prefetch); this dialect
// sends BEGIN, the advisory locks, the blob upsert's two statements and the
// current-object read as one pipeline, answers fn's calls of them from its
// results, defers the object row's upsert (whose result, last_modified, is
// the clock read after the locks) and sends it with COMMIT. A small PUT is
// then two round trips. Every step is still the protocol's, in its order:
// the dialect only sends statements earlier or later, never others.

var _ protocol.Prefetcher = dialect{}

// WritePrefetched implements protocol.Prefetcher.
func (d dialect) WritePrefetched(ctx context.Context, keys []int64, p protocol.Prefetch, fn func(protocol.Tx) error) error {
	return d.e.withPipelinedTx(ctx, keys, p, fn)
}

// lockSQL takes the advisory transaction locks of $1 in ascending order.
const lockSQL = `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k ORDER BY k`

// prefetch is what a pipelined write sent early, and the statement it
// defers to COMMIT. Its methods are no-ops on nil (an ordinary transaction).
type prefetch struct {
	blob        *protocol.Blob
	blobRes     blobResult
	bucket, key string
	cur         protocol.Current
	now         time.Time // the clock, read after the locks were granted
	curErr      error
	blobUsed    bool
	curUsed     bool
	// deferred is the object row's upsert, sent with COMMIT.
	deferred []any
}

// queue adds the prefetched statements to b.
func (p *prefetch) queue(b *pgx.Batch) {
	b.Queue(insertBlobSQL, blobArgs(*p.blob)...)
	b.Queue(lockBlobSQL, p.blob.Digests.SHA256[:])
	b.Queue(currentSQL, currentArgs(p.bucket, p.key)...)
}

// read reads their results from br, in order; after a failure every later
// one reports the same error (pgx's pipeline skips them).
func (p *prefetch) read(br pgx.BatchResults) {
	p.blobRes.insErr = br.QueryRow().Scan(&p.blobRes.insID)
	p.blobRes.lockErr = br.QueryRow().Scan(&p.blobRes.lockID)
	p.cur, p.now, p.curErr = scanCurrent(br.QueryRow())
}

// takeBlob answers UpsertBlob(b) from the pipeline, once (sent false: run
// the statements). Another blob than the planned one is a protocol error:
// the planned one was inserted already.
func (p *prefetch) takeBlob(b protocol.Blob) (blobResult, bool, error) {
	if p == nil || p.blob == nil || p.blobUsed {
		return blobResult{}, false, nil
	}
	p.blobUsed = true
	if b.ID != p.blob.ID || b.Digests.SHA256 != p.blob.Digests.SHA256 || b.Tier != p.blob.Tier {
		return blobResult{}, false, errors.New("pg: pipelined write upserted another blob than the one it named")
	}
	return p.blobRes, true, nil
}

// takeCurrent answers CurrentObject(bucket, key) from the pipeline, once,
// after the blob upsert.
func (p *prefetch) takeCurrent(bucket, key string) (protocol.Current, bool, error) {
	if p == nil || p.curUsed {
		return protocol.Current{}, false, nil
	}
	p.curUsed = true
	if !p.blobUsed || bucket != p.bucket || key != p.key {
		return protocol.Current{}, false, errors.New("pg: pipelined write read another object than the one it named")
	}
	return p.cur, true, p.curErr
}

// deferObjectRow defers the upsert of the prefetched object's row to COMMIT,
// with the clock read after the locks as its last_modified: the key's lock
// is held from before that read to COMMIT, so a later write of the key reads
// a later clock (last_modified stays monotonic per key).
func (p *prefetch) deferObjectRow(o protocol.ObjectRow) (time.Time, bool) {
	if p == nil || !p.curUsed || p.curErr != nil || p.deferred != nil || o.Bucket != p.bucket || o.Key != p.key {
		return time.Time{}, false
	}
	p.deferred = putObjectArgs(o, &p.now)
	return p.now, true
}

func (p *prefetch) pending() bool { return p != nil && p.deferred != nil }

// pipeQuerier is the Querier of a pipelined transaction: a statement fn
// runs after the deferred upsert sends that first (statement order is fn's).
type pipeQuerier struct {
	tx  pgx.Tx
	pre *prefetch
}

// flush sends the deferred upsert, if any.
func (q pipeQuerier) flush(ctx context.Context) error {
	if !q.pre.pending() {
		return nil
	}
	args := q.pre.deferred
	q.pre.deferred = nil
	var lm time.Time
	if err := q.tx.QueryRow(ctx, putObjectSQL, args...).Scan(&lm); err != nil {
		return objectRowErr(err)
	}
	return nil
}

func (q pipeQuerier) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := q.flush(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return q.tx.Exec(ctx, sql, args...)
}

func (q pipeQuerier) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := q.flush(ctx); err != nil {
		return nil, err
	}
	return q.tx.Query(ctx, sql, args...)
}

func (q pipeQuerier) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := q.flush(ctx); err != nil {
		return errRow{err}
	}
	return q.tx.QueryRow(ctx, sql, args...)
}

// withPipelinedTx is withTx for a write with prefetched statements: the
// first pipeline is BEGIN, the locks and p's statements; fn runs on their
// results; the second is the deferred upsert and COMMIT. The transaction is
// ended on every path before the connection goes back (amendment A1): a
// failed statement of a pipeline aborts it (the server skips the rest) and
// it is rolled back; a connection that cannot roll back is closed, and the
// pool destroys a connection that is not idle rather than lend it out.
func (e *Engine) withPipelinedTx(ctx context.Context, keys []int64, p protocol.Prefetch, fn func(protocol.Tx) error) (err error) {
	if p.Blob == nil {
		return errors.New("pg: pipelined write without its blob")
	}
	c, err := e.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", mapErr(err))
	}
	defer c.Release()
	pre := &prefetch{blob: p.Blob, bucket: p.Bucket, key: p.Key}
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	if len(keys) > 0 {
		b.Queue(lockSQL, keys)
	}
	pre.queue(b)
	br := c.Conn().SendBatch(ctx, b)
	tx := br.Tx()
	ended := false
	defer func() {
		if !ended {
			if rerr := rollback(ctx, tx); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	_, err = br.Exec()
	if err != nil {
		err = fmt.Errorf("begin: %w", err)
	} else if len(keys) > 0 {
		if _, err = br.Exec(); err != nil {
			err = fmt.Errorf("advisory lock: %w", err)
		}
	}
	if err == nil {
		pre.read(br)
	}
	if cerr := br.Close(); err == nil && pre.curErr == nil {
		err = cerr
	}
	if err != nil {
		return mapErr(err)
	}
	t := &txn{q: pipeQuerier{tx: tx, pre: pre}, tx: tx, write: true, afterPinRows: e.afterPinRows, pre: pre}
	if err := fn(t); err != nil {
		return mapErr(err)
	}
	if !pre.blobUsed || !pre.curUsed {
		return errors.New("pg: pipelined write did not run the statements it named")
	}
	return commitPipelined(ctx, tx, pre, &ended)
}

// commitPipelined sends the deferred upsert (if any) with COMMIT. The
// upsert's own failure is a known rollback (the server skipped the COMMIT):
// the step's error. Anything else, once COMMIT was sent, may have committed:
// a *protocol.CommitError.
func commitPipelined(ctx context.Context, tx pgx.Tx, pre *prefetch, ended *bool) error {
	b := &pgx.Batch{}
	if pre.pending() {
		b.Queue(putObjectSQL, pre.deferred...)
	}
	b.Queue("COMMIT")
	br := tx.Conn().SendBatch(ctx, b)
	var stepErr, err error
	if pre.pending() {
		var lm time.Time
		if err = br.QueryRow().Scan(&lm); err != nil && errors.As(err, new(*pgconn.PgError)) {
			stepErr = objectRowErr(err)
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback
	}
	// An idle connection has ended its transaction (committed, or rolled
	// back by a failed COMMIT); else the caller rolls back.
	*ended = tx.Conn().PgConn().TxStatus() == 'I'
	switch {
	case stepErr != nil:
		return stepErr
	case err != nil:
		return &protocol.CommitError{Err: fmt.Errorf("commit: %w", mapErr(err))}
	}
	return nil
}
