package embedded

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/protocol"
)

// cleanupTimeout bounds the removal of a published file after a failed
// transaction; it runs on a fresh context because the request's may be the
// reason for the failure.
const cleanupTimeout = 5 * time.Second

// blobRef is what a staged put published inside the joint transaction.
type blobRef struct {
	id      int64
	digests store.Digests
}

// publishFunc writes the rows that reference the new blob (object row, upload
// part row) inside the same write transaction.
type publishFunc func(ctx context.Context, tx *sql.Tx, b blobRef) error

// stagedPut is the put path shared by PutObject, UploadPart and the byte-copy
// form of UploadPartCopy: hash the body while staging it (in memory up to the
// knee, else into a fsynced stage file), verify every digest (Body.Finish),
// then, under the locks of lockKeys, publish blob and referencing rows in one
// write transaction. Large content is renamed into place under its new blob id
// before COMMIT, so no committed row ever lacks its file; on dedup or any
// failure the stage file is discarded and a published file removed.
func (e *Engine) stagedPut(ctx context.Context, r io.Reader, opts store.PutOptions, lockKeys []uint64, publish publishFunc) (blobRef, error) {
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
		return e.publishBlob(ctx, lockKeys, d, publish, func(tx *sql.Tx) (int64, error) {
			id, found, err := findBlob(ctx, tx, d.SHA256)
			if err != nil || found {
				return id, err
			}
			return insertBlob(ctx, tx, d, store.TierInline, head)
		})
	}

	sf, err := e.media.Stage(ctx, io.MultiReader(bytes.NewReader(head), body))
	if err != nil {
		return blobRef{}, fmt.Errorf("stage content: %w", err)
	}
	d, err := body.Finish()
	if err != nil {
		return blobRef{}, errors.Join(err, discard(sf))
	}
	var published int64 // blob id whose file is in place, should the transaction then fail
	ref, err := e.publishBlob(ctx, lockKeys, d, publish, func(tx *sql.Tx) (int64, error) {
		id, found, err := findBlob(ctx, tx, d.SHA256)
		if err != nil {
			return 0, err
		}
		if found {
			// Deduplicated: the existing blob serves.
			return id, discard(sf)
		}
		if id, err = insertBlob(ctx, tx, d, store.TierLocal, nil); err != nil {
			return 0, err
		}
		if err := e.publishFile(ctx, sf, id); err != nil {
			return 0, err
		}
		published = id
		return id, nil
	})
	if err != nil {
		err = errors.Join(err, discard(sf)) // a no-op once published
		if published != 0 {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
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

// publishFile renames the stage file into place for blob id. It runs inside
// the write transaction that inserted the blob row, so id belongs to this
// transaction alone: a file already there is the orphan of a transaction that
// published and then rolled back or crashed before COMMIT (SQLite hands a
// rolled-back id out again), and is replaced.
func (e *Engine) publishFile(ctx context.Context, sf *localfs.StageFile, id int64) error {
	err := e.media.Publish(ctx, sf, id)
	if errors.Is(err, fs.ErrExist) {
		if rmErr := e.media.Remove(ctx, id); rmErr != nil {
			return fmt.Errorf("publish content: replace orphan file of blob %d: %w", id, rmErr)
		}
		err = e.media.Publish(ctx, sf, id)
	}
	if err != nil {
		return fmt.Errorf("publish content: %w", err)
	}
	return nil
}

// blobRowAbsent reports whether it is certain that no committed blob row id
// exists after a failed transaction. After a failed COMMIT the row is looked
// up; if even that fails the file stays (an orphan is harmless, a row without
// its file is not).
func (e *Engine) blobRowAbsent(ctx context.Context, txErr error, id int64) bool {
	var ce *commitError
	if !errors.As(txErr, &ce) {
		return true
	}
	var exists bool
	if err := e.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM blobs WHERE id = ?)`, id).Scan(&exists); err != nil {
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

// publishBlob runs the joint transaction for content that is already staged
// and verified: blob (via mkBlob), then the referencing rows, under the
// in-process locks of lockKeys (taken before BEGIN: the transaction holds the
// only writer connection).
func (e *Engine) publishBlob(ctx context.Context, lockKeys []uint64, d store.Digests, publish publishFunc, mkBlob func(tx *sql.Tx) (int64, error)) (blobRef, error) {
	unlock, err := e.locks.lock(ctx, lockKeys...)
	if err != nil {
		return blobRef{}, err
	}
	defer unlock()
	var ref blobRef
	err = e.withWrite(ctx, func(tx *sql.Tx) error {
		id, err := mkBlob(tx)
		if err != nil {
			return err
		}
		ref = blobRef{id: id, digests: d}
		return publish(ctx, tx, ref)
	})
	if err != nil {
		return blobRef{}, err
	}
	return ref, nil
}

// findBlob looks up the blob with this content address.
func findBlob(ctx context.Context, tx *sql.Tx, sha [32]byte) (int64, bool, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `SELECT id FROM blobs WHERE sha256 = ?`, sha[:]).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("find blob: %w", mapErr(err))
	}
	return id, true, nil
}

// insertBlob inserts a new blob row and returns its id. Inline content of
// length 0 is stored as an empty BLOB (the tier CHECK wants it non-NULL).
func insertBlob(ctx context.Context, tx *sql.Tx, d store.Digests, tier string, inline []byte) (int64, error) {
	var data any
	if tier == store.TierInline {
		if len(inline) == 0 {
			inline = []byte{}
		}
		data = inline
	}
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO blobs (sha256, size, tier, inline_data, created_at)
		VALUES (?, ?, ?, CASE WHEN ?3 = 'inline' THEN coalesce(?4, X'') END, ?) RETURNING id`,
		d.SHA256[:], d.Size, tier, data, toMicros(now())).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert blob: %w", mapErr(err))
	}
	return id, nil
}

// PutObject implements store.ObjectStore.
func (e *Engine) PutObject(ctx context.Context, bucket, key string, body io.Reader, opts store.PutOptions) (store.ObjectInfo, error) {
	if err := bucketExists(ctx, e.rdb, bucket); err != nil {
		return store.ObjectInfo{}, fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	info := store.ObjectInfo{Bucket: bucket, Key: key, Meta: opts.Meta}
	_, err := e.stagedPut(ctx, body, opts, []uint64{objectLockKey(bucket, key)}, func(ctx context.Context, tx *sql.Tx, b blobRef) error {
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

// writeObject replaces the object row (the caller holds the object's lock),
// after checking conditional-write options against the current row. It drops
// the manifest rows of a previous multipart object; the caller writes the new
// manifest rows afterwards.
func writeObject(ctx context.Context, tx *sql.Tx, o objectRow, opts store.PutOptions) (time.Time, error) {
	var curETag string
	var curParts int
	err := tx.QueryRowContext(ctx, `SELECT etag, part_count FROM objects WHERE bucket = ? AND key = ?`,
		o.bucket, o.key).Scan(&curETag, &curParts)
	exists := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("read current object: %w", mapErr(err))
	}
	if err := protocol.CheckWriteConditions(opts, exists, curETag); err != nil {
		return time.Time{}, err
	}
	if curParts > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM object_parts WHERE bucket = ? AND key = ?`, o.bucket, o.key); err != nil {
			return time.Time{}, fmt.Errorf("drop old manifest: %w", mapErr(err))
		}
	}
	meta, err := json.Marshal(o.meta)
	if err != nil {
		return time.Time{}, fmt.Errorf("encode metadata: %w", err)
	}
	ck, err := checksumArg(o.checksum)
	if err != nil {
		return time.Time{}, err
	}
	lm := now()
	_, err = tx.ExecContext(ctx, `INSERT INTO objects (bucket, key, blob_id, size, etag, meta, checksum, part_count, last_modified)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (bucket, key) DO UPDATE SET blob_id = excluded.blob_id, size = excluded.size,
			etag = excluded.etag, meta = excluded.meta, checksum = excluded.checksum,
			part_count = excluded.part_count, last_modified = excluded.last_modified`,
		o.bucket, o.key, o.blobID, o.size, o.etag, string(meta), ck, o.partCount, toMicros(lm))
	if err != nil {
		if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
			return time.Time{}, store.ErrNoSuchBucket
		}
		return time.Time{}, fmt.Errorf("write object row: %w", mapErr(err))
	}
	return lm, nil
}

// checksumArg stores an empty checksum as NULL, others as JSON.
func checksumArg(c store.Checksum) (any, error) {
	if c.Algorithm == "" {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode checksum: %w", err)
	}
	return string(b), nil
}

// parseChecksum decodes a checksum column.
func parseChecksum(s sql.NullString) (store.Checksum, error) {
	var c store.Checksum
	if !s.Valid || s.String == "" {
		return c, nil
	}
	if err := json.Unmarshal([]byte(s.String), &c); err != nil {
		return c, fmt.Errorf("decode checksum: %w", err)
	}
	return c, nil
}

// parseMeta decodes a meta column.
func parseMeta(s string) (store.ObjectMeta, error) {
	var m store.ObjectMeta
	if s == "" {
		return m, nil
	}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return m, fmt.Errorf("decode metadata: %w", err)
	}
	return m, nil
}
