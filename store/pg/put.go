package pg

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/protocol"
)

// blobRef is what a staged put published inside the joint transaction.
type blobRef struct {
	id      int64
	digests store.Digests
}

// publishFunc writes the rows that reference the new blob (object row, upload
// part row) inside the same joint transaction.
type publishFunc func(ctx context.Context, tx pgx.Tx, b blobRef) error

// stagedPut is the put path shared by PutObject, UploadPart and the byte-copy
// form of UploadPartCopy (design §2): hash the body while staging it (inline
// below the knee, else into the large engine's stage, outside any
// transaction), then publish blob and referencing rows in one short
// transaction. A bad digest, a failing body or any error after BEGIN rolls
// everything back and drops what was staged: no rows, no large object, no
// chunk rows, no file remain.
func (e *Engine) stagedPut(ctx context.Context, r io.Reader, opts store.PutOptions, publish publishFunc) (blobRef, error) {
	body := store.NewBody(r, opts)
	head, fits, err := store.ReadKnee(body, e.inlineMax)
	if err != nil {
		return blobRef{}, fmt.Errorf("read body: %w", err)
	}
	if fits {
		d, err := body.Finish()
		if err != nil {
			return blobRef{}, err
		}
		return e.publishBlob(ctx, d, publish, func(ctx context.Context, tx pgx.Tx) (blobRef, error) {
			id, _, err := upsertBlob(ctx, tx, nil, d, store.TierInline, head, nil)
			return blobRef{id: id, digests: d}, err
		})
	}
	rest := io.MultiReader(bytes.NewReader(head), body)
	if e.media != nil {
		return e.stagedPutLocal(ctx, body, rest, publish)
	}
	return e.stagedPutPG(ctx, body, rest, publish)
}

// stagedPutPG stages the content into PostgreSQL outside any transaction
// (ADR 007) and then publishes it in one short joint transaction: a slow
// client holds no transaction and no connection while it sends its body. The
// stage row owns the content until the transaction claims it; every failure
// unstages it, and a crash leaves a stage row for GC.
func (e *Engine) stagedPutPG(ctx context.Context, body *store.Body, rest io.Reader, publish publishFunc) (blobRef, error) {
	var id int64
	if err := e.pool.QueryRow(ctx, `SELECT nextval('blob_ids')`).Scan(&id); err != nil {
		return blobRef{}, fmt.Errorf("blob id: %w", mapErr(err))
	}
	if e.pins != nil {
		// The pin keeps GC's stage reaper off this stage for as long as the
		// put runs, however slow the client (without a pinner, only the stage
		// grace does). It is released after the publish or the unstage.
		pin, err := e.pins.Acquire(ctx, id)
		if err != nil {
			return blobRef{}, fmt.Errorf("pin staged blob %d: %w", id, err)
		}
		defer pin.Release()
	}
	cref, _, err := e.content.Stage(ctx, e.stager, id, rest)
	if err != nil {
		return blobRef{}, errors.Join(fmt.Errorf("stage content: %w", stageErr(err)), e.unstage(ctx, id))
	}
	d, err := body.Finish()
	if err != nil {
		return blobRef{}, errors.Join(err, e.unstage(ctx, id))
	}
	// The joint transaction also takes a staging slot: uploads that finish
	// together cannot take every pool connection either.
	release, err := e.stager.acquire(ctx)
	if err != nil {
		return blobRef{}, errors.Join(err, e.unstage(ctx, id))
	}
	defer release()
	ref, err := e.publishBlob(ctx, d, publish, func(ctx context.Context, tx pgx.Tx) (blobRef, error) {
		oid, err := content.Claim(ctx, tx, id)
		if err != nil {
			return blobRef{}, stageErr(err)
		}
		got, inserted, err := upsertBlob(ctx, tx, &id, d, e.content.Tier(), nil, oid)
		if err != nil {
			return blobRef{}, err
		}
		if !inserted {
			// Deduplicated: the existing blob (now locked by our upsert) serves;
			// drop the staged content in this same transaction.
			if err := e.content.Drop(ctx, tx, id, cref); err != nil {
				return blobRef{}, err
			}
		}
		return blobRef{id: got, digests: d}, nil
	})
	if err != nil {
		// A commit that failed but took effect deleted the stage row, so this
		// finds nothing to drop: published content is never unstaged.
		return blobRef{}, errors.Join(err, e.unstage(ctx, id))
	}
	return ref, nil
}

// stageErr maps a reaped stage to 503: the put can be retried.
func stageErr(err error) error {
	if errors.Is(err, content.ErrStageLost) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return mapErr(err)
}

// unstage drops what a failed put staged under blob id, in a short
// transaction on a fresh context (the request's may be the reason for the
// failure). If it cannot, the stage row stays for GC's stage reaper.
func (e *Engine) unstage(ctx context.Context, id int64) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	err := e.withTx(rctx, func(tx pgx.Tx) error {
		_, err := content.Unstage(rctx, tx, id, -1)
		return err
	})
	if err != nil {
		return fmt.Errorf("drop staged content of blob %d (left for GC): %w", id, err)
	}
	return nil
}

// stagedPutLocal stages the content in a file before BEGIN, and renames it into
// place under its new blob id inside the transaction, before COMMIT: a crash
// leaves at worst an unreferenced file (GC reaps it), never a row without its
// bytes.
func (e *Engine) stagedPutLocal(ctx context.Context, body *store.Body, rest io.Reader, publish publishFunc) (blobRef, error) {
	sf, err := e.media.Stage(ctx, rest)
	if err != nil {
		return blobRef{}, fmt.Errorf("stage content: %w", err)
	}
	d, err := body.Finish()
	if err != nil {
		return blobRef{}, errors.Join(err, discard(sf))
	}
	published := int64(0) // blob id whose file may be in place, if the transaction then fails
	ref, err := e.publishBlob(ctx, d, publish, func(ctx context.Context, tx pgx.Tx) (blobRef, error) {
		var id int64
		if err := tx.QueryRow(ctx, `SELECT nextval('blob_ids')`).Scan(&id); err != nil {
			return blobRef{}, fmt.Errorf("blob id: %w", mapErr(err))
		}
		got, inserted, err := upsertBlob(ctx, tx, &id, d, store.TierLocal, nil, nil)
		if err != nil {
			return blobRef{}, err
		}
		if !inserted {
			// Deduplicated: the existing blob serves.
			return blobRef{id: got, digests: d}, discard(sf)
		}
		if err := e.media.Publish(ctx, sf, id); err != nil {
			if !errors.Is(err, fs.ErrExist) {
				published = id // the rename may have happened before a later step failed
			}
			return blobRef{}, fmt.Errorf("publish content: %w", err)
		}
		published = id
		return blobRef{id: got, digests: d}, nil
	})
	if err != nil {
		// Discard is a no-op once published.
		err = errors.Join(err, discard(sf))
		if published != 0 {
			// The transaction did not commit: the published file is referenced by
			// nothing. Remove it on a fresh context (the request's may be gone).
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			if e.blobRowAbsent(rctx, err, published) {
				if rmErr := e.media.Remove(rctx, published); rmErr != nil {
					err = errors.Join(err, fmt.Errorf("remove unpublished blob %d: %w", published, rmErr))
				}
			}
		}
		return blobRef{}, err
	}
	return ref, nil
}

// blobRowAbsent reports whether it is certain that no committed blob row id
// exists after a failed transaction. A failed COMMIT may have committed on the
// server: then the row is looked up, and if that is impossible the file stays
// (an orphan for GC is harmless; a row without its file is not).
func (e *Engine) blobRowAbsent(ctx context.Context, txErr error, id int64) bool {
	var ce *commitError
	if !errors.As(txErr, &ce) {
		return true
	}
	var exists bool
	if err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM blobs WHERE id = $1)`, id).Scan(&exists); err != nil {
		return false
	}
	return !exists
}

func discard(sf *localfs.StageFile) error {
	if err := sf.Discard(); err != nil {
		return fmt.Errorf("discard staged content: %w", err)
	}
	return nil
}

// publishBlob runs the joint transaction for content that is already staged:
// blob (via mkBlob), then the referencing rows.
func (e *Engine) publishBlob(ctx context.Context, d store.Digests, publish publishFunc, mkBlob func(ctx context.Context, tx pgx.Tx) (blobRef, error)) (blobRef, error) {
	var ref blobRef
	err := e.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if ref, err = mkBlob(ctx, tx); err != nil {
			return err
		}
		return publish(ctx, tx, ref)
	})
	if err != nil {
		return blobRef{}, err
	}
	return ref, nil
}

// upsertBlob inserts the blob row, or finds and locks the existing row with the
// same sha256 (the no-op update takes the row lock, which orders us against a
// GC deleting that blob). It reports whether the row is new.
func upsertBlob(ctx context.Context, tx pgx.Tx, id *int64, d store.Digests, tier string, inline []byte, oid *uint32) (int64, bool, error) {
	if tier == store.TierInline && inline == nil {
		inline = []byte{} // the CHECK wants non-NULL inline data for the inline tier
	}
	var got int64
	var inserted bool
	err := tx.QueryRow(ctx, `INSERT INTO blobs (id, sha256, size, tier, inline_data, lo_oid)
		VALUES (coalesce($1::bigint, nextval('blob_ids')), $2, $3, $4, $5, $6)
		ON CONFLICT (sha256) DO UPDATE SET sha256 = EXCLUDED.sha256
		RETURNING id, (xmax = 0)`, id, d.SHA256[:], d.Size, tier, inline, oid).Scan(&got, &inserted)
	if err != nil {
		return 0, false, fmt.Errorf("upsert blob: %w", mapErr(err))
	}
	return got, inserted, nil
}

// PutObject implements store.ObjectStore.
func (e *Engine) PutObject(ctx context.Context, bucket, key string, body io.Reader, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := e.bucketExists(ctx, e.pool, bucket); err != nil {
		return store.ObjectInfo{}, err
	}
	info := store.ObjectInfo{Bucket: bucket, Key: key, Meta: opts.Meta}
	_, err := e.stagedPut(ctx, body, opts, func(ctx context.Context, tx pgx.Tx, b blobRef) error {
		info.Size = b.digests.Size
		info.ETag = hex.EncodeToString(b.digests.MD5[:])
		info.Checksum = b.digests.Checksum
		lm, err := writeObject(ctx, tx, objectRow{
			bucket: bucket, key: key, blobID: &b.id, size: info.Size, etag: info.ETag,
			meta: opts.Meta, checksum: info.Checksum,
		}, opts)
		info.LastModified = lm
		return err
	})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	return info, nil
}

// objectRow is a row of objects to write.
type objectRow struct {
	bucket, key string
	blobID      *int64 // nil for a multipart manifest
	size        int64
	etag        string
	meta        store.ObjectMeta
	checksum    store.Checksum
	partCount   int
}

// writeObject replaces the object row under the object's advisory lock, after
// checking conditional-write options against the current row. It drops the
// manifest rows of a previous multipart object. The caller writes the new
// manifest rows afterwards.
func writeObject(ctx context.Context, tx pgx.Tx, o objectRow, opts store.PutOptions) (time.Time, error) {
	if err := lockXact(ctx, tx, objectLockKey(o.bucket, o.key)); err != nil {
		return time.Time{}, err
	}
	var curETag string
	var curParts int
	err := tx.QueryRow(ctx, `SELECT etag, part_count FROM objects WHERE bucket = $1 AND key = $2 FOR UPDATE`,
		o.bucket, o.key).Scan(&curETag, &curParts)
	exists := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("read current object: %w", mapErr(err))
	}
	if err := protocol.CheckWriteConditions(opts, exists, curETag); err != nil {
		return time.Time{}, err
	}
	if curParts > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM object_parts WHERE bucket = $1 AND key = $2`, o.bucket, o.key); err != nil {
			return time.Time{}, fmt.Errorf("drop old manifest: %w", mapErr(err))
		}
	}
	var lm time.Time
	err = tx.QueryRow(ctx, `INSERT INTO objects (bucket, key, blob_id, size, etag, meta, checksum, part_count, last_modified)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, clock_timestamp())
		ON CONFLICT (bucket, key) DO UPDATE SET blob_id = EXCLUDED.blob_id, size = EXCLUDED.size,
			etag = EXCLUDED.etag, meta = EXCLUDED.meta, checksum = EXCLUDED.checksum,
			part_count = EXCLUDED.part_count, last_modified = EXCLUDED.last_modified
		RETURNING last_modified`,
		o.bucket, o.key, o.blobID, o.size, o.etag, o.meta, checksumArg(o.checksum), o.partCount).Scan(&lm)
	if err != nil {
		if isFKViolation(err, "objects_bucket_fkey") {
			return time.Time{}, store.ErrNoSuchBucket
		}
		return time.Time{}, fmt.Errorf("write object row: %w", mapErr(err))
	}
	return lm, nil
}

// checksumArg stores an empty checksum as NULL.
func checksumArg(c store.Checksum) any {
	if c.Algorithm == "" {
		return nil
	}
	return c
}
