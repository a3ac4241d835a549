package pg

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// GC is the PostgreSQL side of package gc: the SQL of its queries and the
// transactions of its arbitration (docs/adr/006-gc-arbitration.md). It needs
// only a pool, so that maintenance commands and tests build one without an
// engine.
type GC struct{ db *pgxpool.Pool }

// NewGC returns GC's dialect over db.
func NewGC(db *pgxpool.Pool) *GC { return &GC{db: db} }

// Pool returns the pool GC works on.
func (g *GC) Pool() *pgxpool.Pool { return g.db }

// maxUnlinksPerTx bounds the large objects one transaction unlinks: each
// lo_unlink holds a lock until commit in the shared lock table (design §3).
const maxUnlinksPerTx = 256

// gcSchemaLockKey serializes EnsureSchema across instances starting at once.
const gcSchemaLockKey int64 = 0x73336761_67637363 // "s3gagcsc"

// GCSchema holds GC's own bookkeeping: when an orphan large object was first
// seen. Large objects carry no creation time, so their grace period runs from
// the first sweep that saw them unreferenced.
const GCSchema = `CREATE TABLE IF NOT EXISTS gc_lo_sightings (
    lo         oid PRIMARY KEY,
    first_seen timestamptz NOT NULL DEFAULT clock_timestamp()
)`

// olderThan is the cut-off "older than $1" in database time; a negative
// duration (none) admits everything.
const olderThan = `clock_timestamp() - $1::bigint * interval '1 microsecond'`

// notInObjects and unreferenced are the predicates "no object references
// blob b" (no version of one, current or not) and "nothing references blob
// b".
const (
	notInObjects = `NOT EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM object_versions v WHERE v.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM version_parts vp WHERE vp.blob_id = b.id)`
	unreferenced = notInObjects + `
		  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id)`
	// unpinned: no unexpired row pin protects blob b (ADR 010). It only
	// spares the sweep a doomed attempt: the pins foreign key decides.
	unpinned = `NOT EXISTS (SELECT 1 FROM pins p WHERE p.blob_id = b.id AND p.expires_at > clock_timestamp())`
	// orphanLO: a large object that neither a blob nor a stage row owns.
	orphanLO = `NOT EXISTS (SELECT 1 FROM blobs b WHERE b.lo_oid = m.oid)
		  AND NOT EXISTS (SELECT 1 FROM blob_stages s WHERE s.lo_oid = m.oid)`
)

// SQLSTATEs that mean "leave this for later".
const (
	sqlFKViolation  = "23503" // a reference exists or committed meanwhile
	sqlUniqueViolat = "23505" // the probed row exists
	sqlLockTimeout  = "55P03" // lock_not_available: a lock outlived lock_timeout
	sqlDeadlock     = "40P01"
)

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// verdictOf classifies an arbitration error; ok is false for a real failure.
func verdictOf(err error) (store.GCVerdict, bool) {
	switch pgCode(err) {
	case sqlFKViolation, sqlUniqueViolat:
		return store.GCReferenced, true
	case sqlLockTimeout, sqlDeadlock:
		return store.GCBusy, true
	}
	return 0, false
}

func collect[T any](rows pgx.Rows, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[T])
}

// EnsureSchema creates GC's tables if they do not exist, under an advisory
// lock so that several instances may start at once.
func (g *GC) EnsureSchema(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, gcSchemaLockKey); err != nil {
			return fmt.Errorf("schema lock: %w", err)
		}
		if _, err := tx.Exec(ctx, GCSchema); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("gc: schema: %w", err)
	}
	return nil
}

// Candidates lists unreferenced blobs older than grace with ids above after.
func (g *GC) Candidates(ctx context.Context, after int64, grace time.Duration, limit int) ([]int64, error) {
	ids, err := collect[int64](g.db.Query(ctx, `SELECT b.id FROM blobs b
		WHERE b.created_at <= `+olderThan+` AND b.id > $2 AND `+unreferenced+` AND `+unpinned+`
		ORDER BY b.id LIMIT $3`, grace.Microseconds(), after, limit))
	if err != nil {
		return nil, fmt.Errorf("list candidate blobs: %w", err)
	}
	return ids, nil
}

// Rowless returns the ids among ids that have no blob row.
func (g *GC) Rowless(ctx context.Context, ids []int64) ([]int64, error) {
	out, err := collect[int64](g.db.Query(ctx, `SELECT i FROM unnest($1::bigint[]) AS i
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = i)`, ids))
	if err != nil {
		return nil, fmt.Errorf("blob files without rows: %w", err)
	}
	return out, nil
}

// HasLocalBlobs reports whether any blob lives on the local tier.
func (g *GC) HasLocalBlobs(ctx context.Context) (bool, error) {
	var ok bool
	if err := g.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM blobs WHERE tier = 'local')`).Scan(&ok); err != nil {
		return false, fmt.Errorf("look for local blobs: %w", err)
	}
	return ok, nil
}

// InTx runs fn in a short transaction with lock_timeout set and commits it
// only if fn says so. The transaction always ends before its connection
// returns to the pool.
func (g *GC) InTx(ctx context.Context, lockTimeout time.Duration, fn func(store.GCTx) (bool, error)) (err error) {
	tx, err := g.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if rerr := tx.Rollback(rctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
				err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
			}
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`,
		fmt.Sprintf("%dms", max(lockTimeout.Milliseconds(), 1))); err != nil {
		return fmt.Errorf("set lock_timeout: %w", err)
	}
	commit, err := fn(gcTx{tx})
	if err != nil || !commit {
		return err
	}
	committed = true // pgx ends the transaction whatever Commit returns
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

type gcTx struct{ tx pgx.Tx }

// TryPin: pg_try_advisory_xact_lock on the pin key; a GET holds it shared.
func (t gcTx) TryPin(ctx context.Context, id int64) (bool, error) {
	var got bool
	if err := t.tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, fleet.BlobLockKey(id)).Scan(&got); err != nil {
		return false, fmt.Errorf("try pin lock: %w", err)
	}
	return got, nil
}

// DeleteBlob is a plain DELETE: the foreign keys of every referencing table
// decide (ADR 006), with a fresh snapshot after any wait. Row pins (ADR 010)
// are such a table: the blob's expired pin rows go first, in this
// transaction; an unexpired one (or one renewed or inserted meanwhile) fails
// the DELETE, and the blob is skipped as pinned.
func (t gcTx) DeleteBlob(ctx context.Context, id int64) (store.GCBlob, store.GCVerdict, error) {
	var b store.GCBlob
	// The blob row is locked before its pin rows, in the order of every
	// transaction that pins it (ADR 010): no deadlock with a put.
	var one int
	err := t.tx.QueryRow(ctx, `SELECT 1 FROM blobs WHERE id = $1 FOR UPDATE`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, store.GCGone, nil
	}
	if v, ok := verdictOf(err); ok {
		return b, v, nil
	}
	if err != nil {
		return b, 0, fmt.Errorf("lock blob row: %w", err)
	}
	if _, err := t.tx.Exec(ctx, `DELETE FROM pins WHERE blob_id = $1 AND expires_at <= clock_timestamp()`, id); err != nil {
		if v, ok := verdictOf(err); ok {
			return b, v, nil
		}
		return b, 0, fmt.Errorf("reap expired pins: %w", err)
	}
	var oid *uint32
	err = t.tx.QueryRow(ctx, `DELETE FROM blobs WHERE id = $1 RETURNING tier, size, lo_oid`, id).Scan(&b.Tier, &b.Size, &oid)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, store.GCGone, nil
	}
	if isFKViolation(err, "pins_blob_id_fkey") {
		return b, store.GCPinned, nil
	}
	if v, ok := verdictOf(err); ok {
		return b, v, nil
	}
	if err != nil {
		return b, 0, fmt.Errorf("delete: %w", err)
	}
	switch b.Tier {
	case store.TierPGLO:
		if oid == nil {
			return b, 0, errors.New("pglo blob without a large object")
		}
		// Unlink only if it exists: a missing large object is damage for
		// fsck to report, not a reason to keep an unreferenced row.
		if _, err := t.tx.Exec(ctx, `SELECT lo_unlink(oid) FROM pg_largeobject_metadata WHERE oid = $1`, *oid); err != nil {
			return b, 0, fmt.Errorf("lo_unlink %d: %w", *oid, err)
		}
	case store.TierPGChunks:
		// Chunk rows have no foreign key (staged rows precede their blob
		// row, ADR 007): they go with the row in this transaction.
		if _, err := t.tx.Exec(ctx, `DELETE FROM blob_chunks WHERE blob_id = $1`, id); err != nil {
			return b, 0, fmt.Errorf("delete chunks: %w", err)
		}
	}
	return b, store.GCDone, nil
}

// TryPins takes the pin keys of ids with pg_try_advisory_xact_lock in one
// statement; a GET holds them shared.
func (t gcTx) TryPins(ctx context.Context, ids []int64) ([]int64, error) {
	keys := make([]int64, len(ids))
	for i, id := range ids {
		keys[i] = fleet.BlobLockKey(id)
	}
	got, err := collect[int64](t.tx.Query(ctx, `SELECT t.id FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS t(id, k, n)
		WHERE pg_try_advisory_xact_lock(t.k) ORDER BY t.n`, ids, keys))
	if err != nil {
		return nil, fmt.Errorf("try pin locks: %w", err)
	}
	return got, nil
}

// noPinRows: no pin row of blob b is left, expired or not.
const noPinRows = `NOT EXISTS (SELECT 1 FROM pins pr WHERE pr.blob_id = b.id)`

// DeleteBlobs is DeleteBlob for a batch, in a few statements whatever its
// size (ADR 006, amendment of issue 16). It locks the blob rows FOR UPDATE
// SKIP LOCKED: a row that a put, a copy or a pin holds (upsert, FK check,
// FOR KEY SHARE) is left for DeleteBlob, which waits for it, and no
// reference can be added to a locked row until this transaction ends. So the
// DELETE, a fresh statement after every lock was granted, sees every
// reference that committed before and re-checks it in its predicate; the
// foreign keys stay as a backstop (a violation rolls the batch back:
// ErrGCUndecided). Expired pin rows go first (those a renewal holds are
// left, and keep their blob); a blob with any pin row left is pinned.
func (t gcTx) DeleteBlobs(ctx context.Context, ids []int64) ([]store.GCDecision, error) {
	if len(ids) > maxUnlinksPerTx {
		return nil, fmt.Errorf("delete %d blobs in one transaction: at most %d (lock table)", len(ids), maxUnlinksPerTx)
	}
	locked, err := collect[int64](t.tx.Query(ctx, `SELECT id FROM blobs WHERE id = ANY($1) ORDER BY id FOR UPDATE SKIP LOCKED`, ids))
	if err != nil || len(locked) == 0 {
		return nil, batchErr("lock blob rows", err)
	}
	if _, err := t.tx.Exec(ctx, `DELETE FROM pins WHERE (blob_id, owner) IN (
			SELECT blob_id, owner FROM pins WHERE blob_id = ANY($1) AND expires_at <= clock_timestamp()
			FOR UPDATE SKIP LOCKED)
		AND expires_at <= clock_timestamp()`, locked); err != nil {
		return nil, batchErr("reap expired pins", err)
	}
	rows, err := t.tx.Query(ctx, `DELETE FROM blobs b WHERE b.id = ANY($1) AND `+unreferenced+` AND `+noPinRows+`
		RETURNING b.id, b.tier, b.size, b.lo_oid`, locked)
	if err != nil {
		return nil, batchErr("delete", err)
	}
	type gone struct {
		d   store.GCDecision
		oid *uint32
	}
	dead, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (gone, error) {
		g := gone{d: store.GCDecision{Verdict: store.GCDone}}
		err := r.Scan(&g.d.ID, &g.d.Blob.Tier, &g.d.Blob.Size, &g.oid)
		return g, err
	})
	if err != nil {
		return nil, batchErr("delete", err)
	}
	out := make([]store.GCDecision, 0, len(locked))
	var oids []uint32
	var chunked, kept []int64
	deleted := make(map[int64]bool, len(dead))
	for _, g := range dead {
		deleted[g.d.ID] = true
		out = append(out, g.d)
		switch g.d.Blob.Tier {
		case store.TierPGLO:
			if g.oid == nil {
				return nil, fmt.Errorf("pglo blob %d without a large object", g.d.ID)
			}
			oids = append(oids, *g.oid)
		case store.TierPGChunks:
			chunked = append(chunked, g.d.ID)
		}
	}
	for _, id := range locked {
		if !deleted[id] {
			kept = append(kept, id)
		}
	}
	// Those kept: a pin row left means pinned, else a reference.
	if len(kept) > 0 {
		rows, err := t.tx.Query(ctx, `SELECT b.id, NOT `+noPinRows+` FROM unnest($1::bigint[]) AS b(id)`, kept)
		if err != nil {
			return nil, batchErr("classify kept blobs", err)
		}
		why, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.GCDecision, error) {
			d := store.GCDecision{Verdict: store.GCReferenced}
			var pinned bool
			if err := r.Scan(&d.ID, &pinned); err != nil {
				return d, err
			}
			if pinned {
				d.Verdict = store.GCPinned
			}
			return d, nil
		})
		if err != nil {
			return nil, batchErr("classify kept blobs", err)
		}
		out = append(out, why...)
	}
	// As in DeleteBlob: unlinked only if it exists, chunk rows by hand.
	if len(oids) > 0 {
		if _, err := t.tx.Exec(ctx, `SELECT count(lo_unlink(m.oid)) FROM pg_largeobject_metadata m WHERE m.oid = ANY($1::oid[])`, oids); err != nil {
			return nil, batchErr("lo_unlink", err)
		}
	}
	if len(chunked) > 0 {
		if _, err := t.tx.Exec(ctx, `DELETE FROM blob_chunks WHERE blob_id = ANY($1)`, chunked); err != nil {
			return nil, batchErr("delete chunks", err)
		}
	}
	return out, nil
}

// batchErr wraps an error of DeleteBlobs; an arbitration conflict (a lock
// past lock_timeout, a deadlock, a foreign key) leaves the batch undecided.
func batchErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := verdictOf(err); ok {
		return fmt.Errorf("%s: %w: %w", what, store.ErrGCUndecided, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// ProveRowless inserts a probe row with the id: it waits for an uncommitted
// insert of the id and fails on a committed one. The caller rolls it back.
func (t gcTx) ProveRowless(ctx context.Context, id int64) (store.GCVerdict, error) {
	var probe [32]byte
	if _, err := rand.Read(probe[:]); err != nil {
		return 0, fmt.Errorf("probe hash: %w", err)
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO blobs (id, sha256, size, tier) VALUES ($1, $2, 0, 'local')`, id, probe[:])
	if v, ok := verdictOf(err); ok {
		return v, nil
	}
	if err != nil {
		return 0, fmt.Errorf("probe row: %w", err)
	}
	return store.GCDone, nil
}

// ExpiredUploads lists uploads initiated more than expiry ago, by id.
func (g *GC) ExpiredUploads(ctx context.Context, expiry time.Duration, after string, limit int) ([]store.GCUpload, error) {
	rows, err := g.db.Query(ctx, `SELECT upload_id, bucket, key FROM uploads
		WHERE initiated <= `+olderThan+` AND upload_id > $2 ORDER BY upload_id LIMIT $3`,
		expiry.Microseconds(), after, limit)
	if err != nil {
		return nil, fmt.Errorf("list expired uploads: %w", err)
	}
	us, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.GCUpload, error) {
		var u store.GCUpload
		err := r.Scan(&u.ID, &u.Bucket, &u.Key)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("list expired uploads: %w", err)
	}
	return us, nil
}

// AbortUpload deletes upload u (its parts cascade) if it is still expired,
// under the upload and object advisory locks that Complete and Abort take.
func (g *GC) AbortUpload(ctx context.Context, u store.GCUpload, expiry, lockTimeout time.Duration) (store.GCVerdict, error) {
	res := store.GCGone
	err := g.InTx(ctx, lockTimeout, func(gt store.GCTx) (bool, error) {
		tx := gt.(gcTx).tx
		err := lockXact(ctx, tx, uploadLockKey(u.ID), objectLockKey(u.Bucket, u.Key))
		if v, ok := verdictOf(err); ok {
			res = v
			return false, nil
		}
		if err != nil {
			return false, err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM uploads WHERE initiated <= `+olderThan+` AND upload_id = $2`,
			expiry.Microseconds(), u.ID)
		if v, ok := verdictOf(err); ok {
			res = v
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("delete upload: %w", err)
		}
		if tag.RowsAffected() == 1 {
			res = store.GCDone
		}
		return res == store.GCDone, nil
	})
	return res, err
}

// ReapPins deletes expired pin rows (ADR 010), at most batch per statement
// (each a short transaction), until fewer than batch were left. Rows a
// renewal or a put holds are skipped; a row that a renewal extended meanwhile
// is re-checked and kept.
func (g *GC) ReapPins(ctx context.Context, batch int) (int64, error) {
	var total int64
	for {
		tag, err := g.db.Exec(ctx, `DELETE FROM pins WHERE (blob_id, owner) IN (
				SELECT blob_id, owner FROM pins WHERE expires_at <= clock_timestamp()
				ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)
			AND expires_at <= clock_timestamp()`, batch)
		if err != nil {
			return total, fmt.Errorf("reap expired pins: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}
