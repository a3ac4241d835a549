package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// GC is the embedded engine's side of package gc. Its arbitration: the
// blob's pin is taken exclusively in process (fleet.LocalPins.TryExclusive,
// see pins.go), and every deciding step runs in one write transaction on the
// engine's single writer, which serializes it with every put, copy and
// Complete: a reference either committed before (the check sees it) or is
// made after (the blob row is gone, a put inserts a new one). A blob's file
// is removed after COMMIT; a crash in between leaves an orphan file, which
// the reaper of files without a row collects after the grace.
type GC struct{ e *Engine }

// GC returns the engine's GC dialect.
func (e *Engine) GC() *GC { return &GC{e: e} }

// unreferenced is the predicate "nothing references blob b"; notInObjects
// its part about objects.
const (
	notInObjects = `NOT EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM object_versions v WHERE v.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM version_parts vp WHERE vp.blob_id = b.id)`
	unreferenced = notInObjects + `
		  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id)`
)

// cutoff is the time stamp "older than d" in the schema's microseconds; a
// negative d (none) admits everything.
func cutoff(d time.Duration) int64 { return toMicros(time.Now().Add(-d)) }

// Candidates lists unreferenced blobs older than grace with ids above after.
func (g *GC) Candidates(ctx context.Context, after int64, grace time.Duration, limit int) ([]int64, error) {
	return g.ids(ctx, `SELECT b.id FROM blobs b WHERE b.created_at <= ? AND b.id > ? AND `+unreferenced+`
		ORDER BY b.id LIMIT ?`, cutoff(grace), after, limit)
}

// Rowless returns the ids among ids that have no blob row.
func (g *GC) Rowless(ctx context.Context, ids []int64) ([]int64, error) {
	arr, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("blob files without rows: %w", err)
	}
	return g.ids(ctx, `SELECT j.value FROM json_each(?) j
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = j.value)`, string(arr))
}

func (g *GC) ids(ctx context.Context, q string, args ...any) ([]int64, error) {
	rows, err := g.e.rq.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("gc query: %w", mapErr(err))
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("gc query: %w", mapErr(err))
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("gc query: %w", mapErr(err))
	}
	return out, nil
}

// errNoCommit rolls a GC transaction back on purpose.
var errNoCommit = errors.New("gc: not committed")

// InTx runs fn in one write transaction (the engine's single writer) and
// commits only if fn says so. The exclusive pins fn took are released after
// the transaction ended. No row locks exist here, so lockTimeout is unused.
func (g *GC) InTx(ctx context.Context, _ time.Duration, fn func(store.GCTx) (bool, error)) error {
	t := &gcTx{pins: g.e.pins}
	defer func() {
		for _, release := range t.releases {
			release()
		}
	}()
	err := g.e.withWrite(ctx, func(tx txQuerier) error {
		t.tx = tx
		commit, err := fn(t)
		if err == nil && !commit {
			err = errNoCommit
		}
		return err
	})
	if errors.Is(err, errNoCommit) {
		return nil
	}
	return err
}

type gcTx struct {
	tx       txQuerier
	pins     *fleet.LocalPins
	releases []func()
}

// TryPin takes the blob's in-process pin exclusively: a GET that pins
// afterwards waits for the end of this transaction, then re-checks the row.
func (t *gcTx) TryPin(_ context.Context, id int64) (bool, error) {
	release, ok := t.pins.TryExclusive(id)
	if ok {
		t.releases = append(t.releases, release)
	}
	return ok, nil
}

// DeleteBlob deletes the row only if nothing references it: this writer
// transaction sees every committed reference, and no other can commit
// meanwhile. (The foreign keys would refuse it too.)
func (t *gcTx) DeleteBlob(ctx context.Context, id int64) (store.GCBlob, store.GCVerdict, error) {
	var b store.GCBlob
	err := t.tx.QueryRowContext(ctx, `DELETE FROM blobs AS b WHERE b.id = ? AND `+unreferenced+` RETURNING tier, size`, id).
		Scan(&b.Tier, &b.Size)
	if errors.Is(err, sql.ErrNoRows) {
		v, err := t.ProveRowless(ctx, id)
		if v == store.GCDone {
			v = store.GCGone
		}
		return b, v, err
	}
	if err != nil {
		return b, 0, fmt.Errorf("delete: %w", mapErr(err))
	}
	return b, store.GCDone, nil
}

// TryPins is TryPin for each of ids.
func (t *gcTx) TryPins(ctx context.Context, ids []int64) ([]int64, error) {
	var got []int64
	for _, id := range ids {
		if ok, _ := t.TryPin(ctx, id); ok {
			got = append(got, id)
		}
	}
	return got, nil
}

// DeleteBlobs is DeleteBlob for a batch, in one statement and one look-up:
// the single writer orders it against every put as it does one blob. It
// decides every id.
func (t *gcTx) DeleteBlobs(ctx context.Context, ids []int64) ([]store.GCDecision, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	arr, err := json.Marshal(ids)
	if err != nil {
		return nil, fmt.Errorf("delete: %w", err)
	}
	out := make([]store.GCDecision, 0, len(ids))
	deleted := make(map[int64]bool, len(ids))
	err = t.each(ctx, func(s scanner) error {
		d := store.GCDecision{Verdict: store.GCDone}
		if err := s.Scan(&d.ID, &d.Blob.Tier, &d.Blob.Size); err != nil {
			return err
		}
		deleted[d.ID] = true
		out = append(out, d)
		return nil
	}, `DELETE FROM blobs AS b WHERE b.id IN (SELECT value FROM json_each(?)) AND `+unreferenced+`
		RETURNING id, tier, size`, string(arr))
	if err != nil {
		return nil, fmt.Errorf("delete: %w", err)
	}
	// The rest is referenced if its row exists, else gone.
	err = t.each(ctx, func(s scanner) error {
		d := store.GCDecision{Verdict: store.GCGone}
		var exists bool
		if err := s.Scan(&d.ID, &exists); err != nil || deleted[d.ID] {
			return err
		}
		if exists {
			d.Verdict = store.GCReferenced
		}
		out = append(out, d)
		return nil
	}, `SELECT j.value, EXISTS (SELECT 1 FROM blobs b WHERE b.id = j.value) FROM json_each(?) j`, string(arr))
	if err != nil {
		return nil, fmt.Errorf("look up kept blobs: %w", err)
	}
	return out, nil
}

type scanner interface{ Scan(...any) error }

// each runs query q in the transaction and calls fn for each row.
func (t *gcTx) each(ctx context.Context, fn func(scanner) error, q string, args ...any) error {
	rows, err := t.tx.QueryContext(ctx, q, args...)
	if err != nil {
		return mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return mapErr(err)
		}
	}
	return mapErr(rows.Err())
}

// ProveRowless: inside the write transaction no put can be publishing, so a
// missing row stays missing until it ends.
func (t *gcTx) ProveRowless(ctx context.Context, id int64) (store.GCVerdict, error) {
	var exists bool
	if err := t.tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM blobs WHERE id = ?)`, id).Scan(&exists); err != nil {
		return 0, fmt.Errorf("look up blob row: %w", mapErr(err))
	}
	if exists {
		return store.GCReferenced, nil
	}
	return store.GCDone, nil
}

// ExpiredUploads lists uploads initiated more than expiry ago, by id.
func (g *GC) ExpiredUploads(ctx context.Context, expiry time.Duration, after string, limit int) ([]store.GCUpload, error) {
	rows, err := g.e.rq.QueryContext(ctx, `SELECT upload_id, bucket, key FROM uploads
		WHERE initiated <= ? AND upload_id > ? ORDER BY upload_id LIMIT ?`, cutoff(expiry), after, limit)
	if err != nil {
		return nil, fmt.Errorf("list expired uploads: %w", mapErr(err))
	}
	defer rows.Close()
	var out []store.GCUpload
	for rows.Next() {
		var u store.GCUpload
		if err := rows.Scan(&u.ID, &u.Bucket, &u.Key); err != nil {
			return nil, fmt.Errorf("list expired uploads: %w", mapErr(err))
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list expired uploads: %w", mapErr(err))
	}
	return out, nil
}

// AbortUpload deletes upload u (its parts cascade) if it is still expired,
// under the upload and object locks that UploadPart, Complete and Abort take
// (before the write transaction, as they do). Locks held past lockTimeout
// leave it for next time.
func (g *GC) AbortUpload(ctx context.Context, u store.GCUpload, expiry, lockTimeout time.Duration) (store.GCVerdict, error) {
	lctx, cancel := context.WithTimeout(ctx, max(lockTimeout, time.Millisecond))
	unlock, err := g.e.locks.lock(lctx, uint64(fleet.UploadLockKey(u.ID)), uint64(fleet.ObjectLockKey(u.Bucket, u.Key)))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0, err
		}
		return store.GCBusy, nil
	}
	defer unlock()
	res := store.GCGone
	err = g.e.withWrite(ctx, func(tx txQuerier) error {
		r, err := tx.ExecContext(ctx, `DELETE FROM uploads WHERE upload_id = ? AND initiated <= ?`, u.ID, cutoff(expiry))
		if err != nil {
			return fmt.Errorf("delete upload: %w", mapErr(err))
		}
		if n, err := r.RowsAffected(); err == nil && n == 1 {
			res = store.GCDone
		}
		return nil
	})
	return res, err
}

// PlanBlobs counts the unreferenced blobs older than grace, the uploads
// older than expiry, and the blobs that only those uploads' parts reference.
func (g *GC) PlanBlobs(ctx context.Context, grace, expiry time.Duration) (store.GCPlan, error) {
	var p store.GCPlan
	if err := g.e.rq.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(b.size), 0) FROM blobs b
		WHERE b.created_at <= ? AND `+unreferenced, cutoff(grace)).Scan(&p.Blobs, &p.BlobBytes); err != nil {
		return p, fmt.Errorf("unreferenced blobs: %w", mapErr(err))
	}
	if err := g.e.rq.QueryRowContext(ctx, `WITH exp AS (SELECT upload_id FROM uploads WHERE initiated <= ?)
		SELECT (SELECT count(*) FROM exp), count(b.id), coalesce(sum(b.size), 0) FROM blobs b
		WHERE b.created_at <= ?
		  AND EXISTS (SELECT 1 FROM upload_parts u JOIN exp USING (upload_id) WHERE u.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id
		                  AND u.upload_id NOT IN (SELECT upload_id FROM exp))
		  AND `+notInObjects, cutoff(expiry), cutoff(grace)).Scan(&p.ExpiredUploads, &p.UploadBlobs, &p.UploadBlobBytes); err != nil {
		return p, fmt.Errorf("expired uploads: %w", mapErr(err))
	}
	return p, nil
}
