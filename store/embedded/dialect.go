package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	sqlite3 "modernc.org/sqlite/lib"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// dialect is this engine's part of the store protocol (protocol.Dialect):
// write transactions on the single writer connection under in-process locks.
type dialect struct{ e *Engine }

var _ protocol.Dialect = dialect{}

// Write implements protocol.Dialect. The lock stripes are taken before BEGIN
// IMMEDIATE: the transaction holds the only writer connection, so waiting for
// a lock inside it would stall every writer.
func (d dialect) Write(ctx context.Context, keys []int64, fn func(protocol.Tx) error) error {
	stripes := make([]uint64, len(keys))
	for i, k := range keys {
		stripes[i] = uint64(k)
	}
	unlock, err := d.e.locks.lock(ctx, stripes...)
	if err != nil {
		return err
	}
	defer unlock()
	return d.e.withWrite(ctx, func(tx txQuerier) error { return fn(txn{q: tx}) })
}

// Read implements protocol.Dialect: a read transaction on the reader pool.
func (d dialect) Read(ctx context.Context, fn func(protocol.Tx) error) error {
	return d.e.withRead(ctx, func(tx txQuerier) error { return fn(txn{q: tx}) })
}

// Autocommit implements protocol.Dialect: statements on the reader pool.
func (d dialect) Autocommit() protocol.Tx { return txn{q: d.e.rq} }

// OpenContent implements protocol.Dialect.
func (d dialect) OpenContent(ctx context.Context, b protocol.BlobLoc, off, n int64) (io.ReadCloser, error) {
	return d.e.openContent(ctx, b, off, n)
}

// txn runs the protocol's statements (protocol.Tx) on a transaction or on the
// reader pool.
type txn struct{ q querier }

func (t txn) BucketExists(ctx context.Context, bucket string) error {
	return bucketExists(ctx, t.q, bucket)
}

func (t txn) BlobExists(ctx context.Context, id int64) (bool, error) {
	var exists bool
	if err := t.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM blobs WHERE id = ?)`, id).Scan(&exists); err != nil {
		return false, fmt.Errorf("look up blob %d: %w", id, mapErr(err))
	}
	return exists, nil
}

// UpsertBlob finds the blob with this content address or inserts a new row
// (the single writer orders it against GC). Inline content of length 0 is
// stored as an empty BLOB (the tier CHECK wants it non-NULL).
func (t txn) UpsertBlob(ctx context.Context, b protocol.Blob) (int64, bool, error) {
	var id int64
	err := t.q.QueryRowContext(ctx, `SELECT id FROM blobs WHERE sha256 = ?`, b.Digests.SHA256[:]).Scan(&id)
	if err == nil {
		return id, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("find blob: %w", mapErr(err))
	}
	var data any
	if b.Tier == store.TierInline {
		inline := b.Inline
		if len(inline) == 0 {
			inline = []byte{}
		}
		data = inline
	}
	err = t.q.QueryRowContext(ctx, `INSERT INTO blobs (sha256, size, tier, inline_data, created_at)
		VALUES (?, ?, ?, CASE WHEN ?3 = 'inline' THEN coalesce(?4, X'') END, ?) RETURNING id`,
		b.Digests.SHA256[:], b.Digests.Size, b.Tier, data, toMicros(now())).Scan(&id)
	if err != nil {
		return 0, false, fmt.Errorf("insert blob: %w", mapErr(err))
	}
	return id, true, nil
}

// CurrentObject implements protocol.Tx: one statement reads the row and the
// bucket's versioning state (the single writer keeps both as they are).
func (t txn) CurrentObject(ctx context.Context, bucket, key string) (protocol.Current, error) {
	var c protocol.Current
	var etag, versionID sql.NullString
	var parts, lm sql.NullInt64
	err := t.q.QueryRowContext(ctx, `SELECT coalesce((SELECT value FROM bucket_configs WHERE bucket = ?1 AND name = ?3), ''),
			o.etag, o.part_count, o.version_id, o.last_modified
		FROM (SELECT 1) one LEFT JOIN objects o ON o.bucket = ?1 AND o.key = ?2`, bucket, key, store.BucketConfigVersioning).Scan(
		&c.Versioning, &etag, &parts, &versionID, &lm)
	if err != nil {
		return protocol.Current{}, fmt.Errorf("read current object: %w", mapErr(err))
	}
	if etag.Valid {
		c.Exists, c.ETag, c.PartCount, c.VersionID, c.LastModified = true, etag.String, int(parts.Int64), versionID.String, fromMicros(lm.Int64)
	}
	return c, nil
}

func (t txn) DropManifest(ctx context.Context, bucket, key string) error {
	if _, err := t.q.ExecContext(ctx, `DELETE FROM object_parts WHERE bucket = ? AND key = ?`, bucket, key); err != nil {
		return fmt.Errorf("drop old manifest: %w", mapErr(err))
	}
	return nil
}

func (t txn) PutObjectRow(ctx context.Context, o protocol.ObjectRow) (time.Time, error) {
	meta, err := json.Marshal(o.Meta)
	if err != nil {
		return time.Time{}, fmt.Errorf("encode metadata: %w", err)
	}
	ck, err := checksumArg(o.Checksum)
	if err != nil {
		return time.Time{}, err
	}
	lm := now()
	_, err = t.q.ExecContext(ctx, `INSERT INTO objects (bucket, key, blob_id, size, etag, meta, checksum, part_count, last_modified, version_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (bucket, key) DO UPDATE SET blob_id = excluded.blob_id, size = excluded.size,
			etag = excluded.etag, meta = excluded.meta, checksum = excluded.checksum,
			part_count = excluded.part_count, last_modified = excluded.last_modified, version_id = excluded.version_id`,
		o.Bucket, o.Key, o.BlobID, o.Size, o.ETag, string(meta), ck, o.PartCount, toMicros(lm), o.VersionID)
	if err != nil {
		if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
			return time.Time{}, store.ErrNoSuchBucket
		}
		return time.Time{}, fmt.Errorf("write object row: %w", mapErr(err))
	}
	return lm, nil
}

func (t txn) Upload(ctx context.Context, uploadID string, _ bool) (store.Upload, bool, error) {
	u := store.Upload{UploadID: uploadID}
	var meta string
	var initiated int64
	err := t.q.QueryRowContext(ctx, `SELECT bucket, key, meta, checksum_alg, checksum_type, initiated FROM uploads WHERE upload_id = ?`,
		uploadID).Scan(&u.Bucket, &u.Key, &meta, &u.ChecksumAlgorithm, &u.ChecksumType, &initiated)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Upload{}, false, nil
	}
	if err != nil {
		return store.Upload{}, false, mapErr(err)
	}
	u.Initiated = fromMicros(initiated)
	if u.Meta, err = parseMeta(meta); err != nil {
		return store.Upload{}, false, err
	}
	return u, true, nil
}

func (t txn) PutPart(ctx context.Context, uploadID string, pi *store.PartInfo, blobID int64) error {
	ck, err := checksumArg(pi.Checksum)
	if err != nil {
		return err
	}
	pi.LastModified = now()
	_, err = t.q.ExecContext(ctx, `INSERT INTO upload_parts (upload_id, part_number, blob_id, size, etag, checksum, last_modified)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (upload_id, part_number) DO UPDATE SET blob_id = excluded.blob_id, size = excluded.size,
			etag = excluded.etag, checksum = excluded.checksum, last_modified = excluded.last_modified`,
		uploadID, pi.Number, blobID, pi.Size, pi.ETag, ck, toMicros(pi.LastModified))
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
		return store.ErrNoSuchUpload // completed or aborted meanwhile
	}
	if err != nil {
		return fmt.Errorf("write part %d: %w", pi.Number, mapErr(err))
	}
	return nil
}

// Resolve implements protocol.Tx. Object and manifest are two statements:
// in autocommit they run in a read transaction of their own (one snapshot);
// a write transaction holds the only writer, so nothing changes under it.
func (t txn) Resolve(ctx context.Context, bucket, key string, withInline bool) (*protocol.Resolved, error) {
	return t.resolve(ctx, bucket, key, nil, withInline)
}

// resolve is resolveObject in one snapshot: a read transaction of its own
// when t runs outside one.
func (t txn) resolve(ctx context.Context, bucket, key string, versionID *string, withInline bool) (*protocol.Resolved, error) {
	c, ok := t.q.(*stmtCache)
	if !ok {
		return resolveObject(ctx, t.q, bucket, key, versionID, withInline)
	}
	var r *protocol.Resolved
	err := c.readTx(ctx, &sql.TxOptions{ReadOnly: true}, func(tx txQuerier) (err error) {
		r, err = resolveObject(ctx, tx, bucket, key, versionID, withInline)
		return err
	})
	return r, err
}

func (t txn) InlineData(ctx context.Context, id int64) ([]byte, bool, error) {
	var data []byte
	err := t.q.QueryRowContext(ctx, `SELECT coalesce(inline_data, X'') FROM blobs WHERE id = ?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, mapErr(err)
	}
	return data, true, nil
}

func (t txn) UpdateObjectMeta(ctx context.Context, bucket, key string, meta store.ObjectMeta, ck store.Checksum) (time.Time, error) {
	m, err := json.Marshal(meta)
	if err != nil {
		return time.Time{}, fmt.Errorf("encode metadata: %w", err)
	}
	c, err := checksumArg(ck)
	if err != nil {
		return time.Time{}, err
	}
	lm := now()
	if _, err := t.q.ExecContext(ctx, `UPDATE objects SET meta = ?, checksum = ?, last_modified = ? WHERE bucket = ? AND key = ?`,
		string(m), c, toMicros(lm), bucket, key); err != nil {
		return time.Time{}, fmt.Errorf("update metadata: %w", mapErr(err))
	}
	return lm, nil
}

func (t txn) CopyManifest(ctx context.Context, srcBucket, srcKey string, srcSeq int64, dstBucket, dstKey string) error {
	var err error
	if srcSeq == 0 {
		_, err = t.q.ExecContext(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
			SELECT ?, ?, part_number, blob_id, size, start_offset, etag, checksum
			FROM object_parts WHERE bucket = ? AND key = ?`, dstBucket, dstKey, srcBucket, srcKey)
	} else {
		_, err = t.q.ExecContext(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
			SELECT ?, ?, part_number, blob_id, size, start_offset, etag, checksum
			FROM version_parts WHERE seq = ?`, dstBucket, dstKey, srcSeq)
	}
	if err != nil {
		return fmt.Errorf("copy manifest: %w", mapErr(err))
	}
	return nil
}

// DeleteObjects implements protocol.Tx; the manifest rows go with the
// objects (ON DELETE CASCADE).
func (t txn) DeleteObjects(ctx context.Context, bucket string, keys []string) error {
	for _, k := range keys {
		if _, err := t.q.ExecContext(ctx, `DELETE FROM objects WHERE bucket = ? AND key = ?`, bucket, k); err != nil {
			return mapErr(err)
		}
	}
	return nil
}

// DeleteUnversioned implements protocol.Tx (the single writer keeps the
// state read first as it is).
func (t txn) DeleteUnversioned(ctx context.Context, bucket string, keys []string) (string, error) {
	var versioning string
	if err := t.q.QueryRowContext(ctx, `SELECT coalesce((SELECT value FROM bucket_configs WHERE bucket = ? AND name = ?), '')`,
		bucket, store.BucketConfigVersioning).Scan(&versioning); err != nil {
		return "", mapErr(err)
	}
	if versioning != "" {
		return versioning, nil
	}
	return "", t.DeleteObjects(ctx, bucket, keys)
}

func (t txn) CreateUpload(ctx context.Context, u *store.Upload) error {
	mj, err := json.Marshal(u.Meta)
	if err != nil {
		return fmt.Errorf("encode metadata: %w", err)
	}
	u.Initiated = now()
	_, err = t.q.ExecContext(ctx, `INSERT INTO uploads (upload_id, bucket, key, meta, checksum_alg, checksum_type, initiated)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, u.UploadID, u.Bucket, u.Key, string(mj), u.ChecksumAlgorithm, u.ChecksumType, toMicros(u.Initiated))
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY) {
		return store.ErrNoSuchBucket
	}
	return mapErr(err)
}

func (t txn) ListParts(ctx context.Context, uploadID string, after, limit int) ([]protocol.PartRow, error) {
	rows, err := t.q.QueryContext(ctx, `SELECT part_number, size, etag, checksum, last_modified, blob_id FROM upload_parts
		WHERE upload_id = ? AND part_number > ? ORDER BY part_number LIMIT ?`, uploadID, after, limit) // negative: no limit
	if err != nil {
		return nil, fmt.Errorf("read parts: %w", mapErr(err))
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	var parts []protocol.PartRow
	for rows.Next() {
		var p protocol.PartRow
		var ck sql.NullString
		var lm int64
		if err := rows.Scan(&p.Number, &p.Size, &p.ETag, &ck, &lm, &p.BlobID); err != nil {
			return nil, fmt.Errorf("read parts: %w", err)
		}
		p.LastModified = fromMicros(lm)
		if p.Checksum, err = parseChecksum(ck); err != nil {
			return nil, fmt.Errorf("read parts: %w", err)
		}
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read parts: %w", mapErr(err))
	}
	return parts, nil
}

func (t txn) WriteManifest(ctx context.Context, bucket, key, _ string, parts []protocol.PartRow) error {
	for _, p := range parts {
		ck, err := checksumArg(p.Checksum)
		if err != nil {
			return err
		}
		if _, err := t.q.ExecContext(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, bucket, key, p.Number, p.BlobID, p.Size, p.Start, p.ETag, ck); err != nil {
			return fmt.Errorf("write manifest: %w", mapErr(err))
		}
	}
	return nil
}

func (t txn) DeleteUpload(ctx context.Context, bucket, key, uploadID string) (bool, error) {
	res, err := t.q.ExecContext(ctx, `DELETE FROM uploads WHERE upload_id = ? AND bucket = ? AND key = ?`, uploadID, bucket, key)
	if err != nil {
		return false, fmt.Errorf("delete upload: %w", mapErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete upload: %w", err)
	}
	return n > 0, nil
}

// errNoRowPins: row pins (ADR 010) need a database that several instances
// share; the embedded engine has one process and in-process pins.
var errNoRowPins = errors.New("embedded: row pins are PostgreSQL-only")

// PinRows implements protocol.Tx by refusing: the embedded engine never turns
// row pins on.
func (t txn) PinRows(context.Context, []int64, string, time.Duration) error { return errNoRowPins }

// PromoteBlob implements protocol.Tx by refusing (row pins only).
func (t txn) PromoteBlob(context.Context, int64, store.Digests) (int64, bool, error) {
	return 0, false, errNoRowPins
}

// DropBlob implements protocol.Tx by refusing (row pins only).
func (t txn) DropBlob(context.Context, int64, string) error { return errNoRowPins }
