package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/protocol"
)

// dialect is this engine's part of the store protocol (protocol.Dialect):
// pooled transactions with advisory transaction locks.
type dialect struct{ e *Engine }

var _ protocol.Dialect = dialect{}

// Write implements protocol.Dialect: the locks are advisory transaction
// locks taken at the start of the transaction, released by its end.
func (d dialect) Write(ctx context.Context, keys []int64, fn func(protocol.Tx) error) error {
	return d.e.withTx(ctx, func(tx pgx.Tx) error {
		if len(keys) > 0 {
			if err := lockXact(ctx, tx, keys...); err != nil {
				return err
			}
		}
		return fn(&txn{q: tx, tx: tx, write: true, afterPinRows: d.e.afterPinRows})
	})
}

// Read implements protocol.Dialect.
func (d dialect) Read(ctx context.Context, fn func(protocol.Tx) error) error {
	return d.e.withTx(ctx, func(tx pgx.Tx) error { return fn(&txn{q: tx, tx: tx}) })
}

// Autocommit implements protocol.Dialect: statements on the pool.
func (d dialect) Autocommit() protocol.Tx { return &txn{q: d.e.pool, reads: d.e.reads} }

// OpenContent implements protocol.Dialect.
func (d dialect) OpenContent(ctx context.Context, b protocol.BlobLoc, off, n int64) (io.ReadCloser, error) {
	return d.e.openContent(ctx, b, off, n)
}

// txn runs the protocol's statements (protocol.Tx) on a transaction, or on
// the pool (tx nil).
type txn struct {
	q  content.Querier
	tx pgx.Tx
	// reads runs the resolving reads outside a transaction (nil: q).
	reads rowQuerier
	write bool // a write transaction: resolved rows are locked FOR SHARE
	// afterPinRows is the engine's test hook (Engine.afterPinRows).
	afterPinRows func(pgx.Tx) error
	// pre holds the statements a pipelined write sent early and the ones
	// it defers to COMMIT (nil: none; pipeline.go).
	pre *prefetch
}

// pgxTx is the transaction of a protocol.Tx of this engine, for the content
// engines' statements inside the joint transaction.
func pgxTx(t protocol.Tx) (pgx.Tx, error) {
	if t, ok := t.(*txn); ok && t.tx != nil {
		if t.pre.pending() {
			return nil, errors.New("pg: content statements after a deferred statement")
		}
		return t.tx, nil
	}
	return nil, fmt.Errorf("pg: content needs a transaction of this engine, got %T", t)
}

func (t *txn) BucketExists(ctx context.Context, bucket string) error {
	var ok bool
	if err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM buckets WHERE name = $1)`, bucket).Scan(&ok); err != nil {
		return fmt.Errorf("bucket %q: %w", bucket, mapErr(err))
	}
	if !ok {
		return fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchBucket)
	}
	return nil
}

func (t *txn) BlobExists(ctx context.Context, id int64) (bool, error) {
	var exists bool
	if err := t.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM blobs WHERE id = $1)`, id).Scan(&exists); err != nil {
		return false, fmt.Errorf("look up blob %d: %w", id, mapErr(err))
	}
	return exists, nil
}

// The two statements of UpsertBlob. The insert does nothing on a conflict
// (no new row version, no row lock held to COMMIT: writers of identical
// content do not queue on the row); the lookup is a separate statement, so
// that in READ COMMITTED it takes a new snapshot and sees a row committed
// after the insert's, and it takes FOR KEY SHARE, which conflicts with GC's
// DELETE (ADR 006): the row it returns cannot be deleted before this
// transaction ends. No row (GC deleted it in between) means insert again.
const (
	insertBlobSQL = `INSERT INTO blobs (id, sha256, size, tier, inline_data, lo_oid)
		VALUES (coalesce($1::bigint, nextval('blob_ids')), $2, $3, $4, $5, $6)
		ON CONFLICT (sha256) DO NOTHING RETURNING id`
	lockBlobSQL = `SELECT id FROM blobs WHERE sha256 = $1 FOR KEY SHARE`
)

// maxBlobAttempts bounds the inserts of one UpsertBlob: each retry follows a
// GC that deleted the row between the insert and the lookup.
const maxBlobAttempts = 5

// blobArgs are insertBlobSQL's arguments.
func blobArgs(b protocol.Blob) []any {
	inline := b.Inline
	if b.Tier == store.TierInline && inline == nil {
		inline = []byte{} // the CHECK wants non-NULL inline data for the inline tier
	}
	var id *int64
	if b.ID != 0 {
		id = &b.ID
	}
	return []any{id, b.Digests.SHA256[:], b.Digests.Size, b.Tier, inline, b.LargeObject}
}

// blobResult is what UpsertBlob's statements answered: the insert's (insErr
// pgx.ErrNoRows: it inserted nothing) and the lookup's.
type blobResult struct {
	insID, lockID   int64
	insErr, lockErr error
}

// decide returns UpsertBlob's answer; retry says the row was gone.
func (r blobResult) decide() (id int64, inserted, retry bool, err error) {
	switch {
	case r.insErr == nil:
		return r.insID, true, false, nil
	case !errors.Is(r.insErr, pgx.ErrNoRows):
		return 0, false, false, fmt.Errorf("insert blob: %w", mapErr(r.insErr))
	case errors.Is(r.lockErr, pgx.ErrNoRows):
		return 0, false, true, nil
	case r.lockErr != nil:
		return 0, false, false, fmt.Errorf("lock blob: %w", mapErr(r.lockErr))
	}
	return r.lockID, false, false, nil
}

// UpsertBlob inserts the blob row, or finds the existing row with the same
// sha256 and locks it FOR KEY SHARE, which orders us against a GC deleting
// that blob (ADR 006).
func (t *txn) UpsertBlob(ctx context.Context, b protocol.Blob) (int64, bool, error) {
	r, sent, err := t.pre.takeBlob(b)
	if err != nil {
		return 0, false, err
	}
	for attempt := 1; attempt <= maxBlobAttempts; attempt++ {
		if !sent {
			r = blobResult{}
			r.insErr = t.q.QueryRow(ctx, insertBlobSQL, blobArgs(b)...).Scan(&r.insID)
			if errors.Is(r.insErr, pgx.ErrNoRows) {
				r.lockErr = t.q.QueryRow(ctx, lockBlobSQL, b.Digests.SHA256[:]).Scan(&r.lockID)
			}
		}
		sent = false
		id, inserted, retry, err := r.decide()
		if !retry {
			return id, inserted, err
		}
	}
	return 0, false, fmt.Errorf("upsert blob: deleted by GC between insert and lookup %d times", maxBlobAttempts)
}

// currentSQL is CurrentObject's statement; it also reads the clock, which a
// pipelined write takes as the new row's last-modified time (pipeline.go).
const currentSQL = `WITH cur AS (
		SELECT etag, part_count, version_id, last_modified FROM objects WHERE bucket = $1 AND key = $2 FOR UPDATE)
	SELECT clock_timestamp(), coalesce((SELECT value FROM bucket_configs WHERE bucket = $1 AND name = $3), ''),
		cur.etag, cur.part_count, cur.version_id, cur.last_modified
	FROM (VALUES (1)) one LEFT JOIN cur ON true`

func currentArgs(bucket, key string) []any {
	return []any{bucket, key, store.BucketConfigVersioning}
}

// scanCurrent reads currentSQL's row.
func scanCurrent(row pgx.Row) (protocol.Current, time.Time, error) {
	var c protocol.Current
	var now time.Time
	var etag, versionID *string
	var parts *int
	var lm *time.Time
	if err := row.Scan(&now, &c.Versioning, &etag, &parts, &versionID, &lm); err != nil {
		return protocol.Current{}, time.Time{}, fmt.Errorf("read current object: %w", mapErr(err))
	}
	if etag != nil {
		c.Exists, c.ETag, c.PartCount, c.VersionID, c.LastModified = true, *etag, *parts, *versionID, *lm
	}
	return c, now, nil
}

// CurrentObject implements protocol.Tx: one statement locks the row and
// reads the bucket's versioning state.
func (t *txn) CurrentObject(ctx context.Context, bucket, key string) (protocol.Current, error) {
	if c, ok, err := t.pre.takeCurrent(bucket, key); ok || err != nil {
		return c, err
	}
	c, _, err := scanCurrent(t.q.QueryRow(ctx, currentSQL, currentArgs(bucket, key)...))
	return c, err
}

func (t *txn) DropManifest(ctx context.Context, bucket, key string) error {
	if _, err := t.q.Exec(ctx, `DELETE FROM object_parts WHERE bucket = $1 AND key = $2`, bucket, key); err != nil {
		return fmt.Errorf("drop old manifest: %w", mapErr(err))
	}
	return nil
}

// putObjectSQL writes the object row; last_modified is $10, or the clock
// when $10 is NULL.
const putObjectSQL = `INSERT INTO objects (bucket, key, blob_id, size, etag, meta, checksum, part_count, last_modified, version_id)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($10::timestamptz, clock_timestamp()), $9)
	ON CONFLICT (bucket, key) DO UPDATE SET blob_id = EXCLUDED.blob_id, size = EXCLUDED.size,
		etag = EXCLUDED.etag, meta = EXCLUDED.meta, checksum = EXCLUDED.checksum,
		part_count = EXCLUDED.part_count, last_modified = EXCLUDED.last_modified, version_id = EXCLUDED.version_id
	RETURNING last_modified`

func putObjectArgs(o protocol.ObjectRow, lm *time.Time) []any {
	return []any{o.Bucket, o.Key, o.BlobID, o.Size, o.ETag, o.Meta, checksumArg(o.Checksum), o.PartCount, o.VersionID, lm}
}

// objectRowErr maps a failure of putObjectSQL.
func objectRowErr(err error) error {
	if isFKViolation(err, "objects_bucket_fkey") {
		return store.ErrNoSuchBucket
	}
	return fmt.Errorf("write object row: %w", mapErr(err))
}

func (t *txn) PutObjectRow(ctx context.Context, o protocol.ObjectRow) (time.Time, error) {
	if lm, ok := t.pre.deferObjectRow(o); ok {
		return lm, nil
	}
	var lm time.Time
	if err := t.q.QueryRow(ctx, putObjectSQL, putObjectArgs(o, nil)...).Scan(&lm); err != nil {
		return time.Time{}, objectRowErr(err)
	}
	return lm, nil
}

func (t *txn) Upload(ctx context.Context, uploadID string, forUpdate bool) (store.Upload, bool, error) {
	u := store.Upload{UploadID: uploadID}
	sql := `SELECT bucket, key, meta, checksum_alg, checksum_type, initiated FROM uploads WHERE upload_id = $1`
	if forUpdate {
		sql += ` FOR UPDATE`
	}
	err := t.q.QueryRow(ctx, sql, uploadID).Scan(&u.Bucket, &u.Key, &u.Meta, &u.ChecksumAlgorithm, &u.ChecksumType, &u.Initiated)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Upload{}, false, nil
	}
	if err != nil {
		return store.Upload{}, false, mapErr(err)
	}
	return u, true, nil
}

func (t *txn) PutPart(ctx context.Context, uploadID string, pi *store.PartInfo, blobID int64) error {
	err := t.q.QueryRow(ctx, `INSERT INTO upload_parts (upload_id, part_number, blob_id, size, etag, checksum, last_modified)
		VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())
		ON CONFLICT (upload_id, part_number) DO UPDATE SET blob_id = EXCLUDED.blob_id, size = EXCLUDED.size,
			etag = EXCLUDED.etag, checksum = EXCLUDED.checksum, last_modified = EXCLUDED.last_modified
		RETURNING last_modified`,
		uploadID, pi.Number, blobID, pi.Size, pi.ETag, checksumArg(pi.Checksum)).Scan(&pi.LastModified)
	if isFKViolation(err, "upload_parts_upload_id_fkey") {
		return store.ErrNoSuchUpload // completed or aborted meanwhile
	}
	if err != nil {
		return fmt.Errorf("write part %d: %w", pi.Number, mapErr(err))
	}
	return nil
}

// Resolve implements protocol.Tx.
func (t *txn) Resolve(ctx context.Context, bucket, key string, withInline bool) (*protocol.Resolved, error) {
	return resolveObject(ctx, t.reader(), bucket, key, nil, withInline, t.write)
}

// reader is what runs the resolving reads: batched outside a transaction.
func (t *txn) reader() rowQuerier {
	if t.reads != nil {
		return t.reads
	}
	return t.q
}

func (t *txn) InlineData(ctx context.Context, id int64) ([]byte, bool, error) {
	var data []byte
	err := t.q.QueryRow(ctx, `SELECT inline_data FROM blobs WHERE id = $1`, id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, mapErr(err)
	}
	return data, true, nil
}

func (t *txn) UpdateObjectMeta(ctx context.Context, bucket, key string, meta store.ObjectMeta, ck store.Checksum) (time.Time, error) {
	var lm time.Time
	if err := t.q.QueryRow(ctx, `UPDATE objects SET meta = $3, checksum = $4, last_modified = clock_timestamp()
		WHERE bucket = $1 AND key = $2 RETURNING last_modified`, bucket, key, meta, checksumArg(ck)).Scan(&lm); err != nil {
		return time.Time{}, fmt.Errorf("update metadata: %w", mapErr(err))
	}
	return lm, nil
}

func (t *txn) CopyManifest(ctx context.Context, srcBucket, srcKey string, srcSeq int64, dstBucket, dstKey string) error {
	var err error
	if srcSeq == 0 {
		_, err = t.q.Exec(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
			SELECT $3, $4, part_number, blob_id, size, start_offset, etag, checksum
			FROM object_parts WHERE bucket = $1 AND key = $2`, srcBucket, srcKey, dstBucket, dstKey)
	} else {
		_, err = t.q.Exec(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
			SELECT $2, $3, part_number, blob_id, size, start_offset, etag, checksum
			FROM version_parts WHERE seq = $1`, srcSeq, dstBucket, dstKey)
	}
	if err != nil {
		return fmt.Errorf("copy manifest: %w", mapErr(err))
	}
	return nil
}

// DeleteObjects implements protocol.Tx; the manifest rows go with the
// objects (ON DELETE CASCADE).
func (t *txn) DeleteObjects(ctx context.Context, bucket string, keys []string) error {
	if _, err := t.q.Exec(ctx, `DELETE FROM objects WHERE bucket = $1 AND key = ANY($2)`, bucket, keys); err != nil {
		return mapErr(err)
	}
	return nil
}

// DeleteUnversioned implements protocol.Tx in one statement.
func (t *txn) DeleteUnversioned(ctx context.Context, bucket string, keys []string) (string, error) {
	var versioning string
	err := t.q.QueryRow(ctx, `WITH v AS (SELECT value FROM bucket_configs WHERE bucket = $1 AND name = $3),
		d AS (DELETE FROM objects WHERE bucket = $1 AND key = ANY($2) AND NOT EXISTS (SELECT 1 FROM v))
		SELECT coalesce((SELECT value FROM v), '')`, bucket, keys, store.BucketConfigVersioning).Scan(&versioning)
	if err != nil {
		return "", mapErr(err)
	}
	return versioning, nil
}

func (t *txn) CreateUpload(ctx context.Context, u *store.Upload) error {
	err := t.q.QueryRow(ctx, `INSERT INTO uploads (upload_id, bucket, key, meta, checksum_alg, checksum_type)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING initiated`,
		u.UploadID, u.Bucket, u.Key, u.Meta, u.ChecksumAlgorithm, u.ChecksumType).Scan(&u.Initiated)
	if isFKViolation(err, "uploads_bucket_fkey") {
		return store.ErrNoSuchBucket
	}
	return mapErr(err)
}

func (t *txn) ListParts(ctx context.Context, uploadID string, after, limit int) ([]protocol.PartRow, error) {
	var lim *int // NULL: no limit
	if limit >= 0 {
		lim = &limit
	}
	rows, err := t.q.Query(ctx, `SELECT part_number, size, etag, checksum, last_modified, blob_id FROM upload_parts
		WHERE upload_id = $1 AND part_number > $2 ORDER BY part_number LIMIT $3`, uploadID, after, lim)
	if err != nil {
		return nil, fmt.Errorf("read parts: %w", mapErr(err))
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (protocol.PartRow, error) {
		var p protocol.PartRow
		var ck *store.Checksum
		err := r.Scan(&p.Number, &p.Size, &p.ETag, &ck, &p.LastModified, &p.BlobID)
		if ck != nil {
			p.Checksum = *ck
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read parts: %w", mapErr(err))
	}
	return parts, nil
}

// WriteManifest copies the chosen part rows, by number, with their offsets.
func (t *txn) WriteManifest(ctx context.Context, bucket, key, uploadID string, parts []protocol.PartRow) error {
	nums := make([]int32, len(parts))
	starts := make([]int64, len(parts))
	for i, p := range parts {
		nums[i], starts[i] = int32(p.Number), p.Start
	}
	if _, err := t.q.Exec(ctx, `INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag, checksum)
		SELECT $1, $2, p.part_number, p.blob_id, p.size, x.start, p.etag, p.checksum
		FROM upload_parts p JOIN unnest($4::int[], $5::bigint[]) AS x (n, start) ON x.n = p.part_number
		WHERE p.upload_id = $3`, bucket, key, uploadID, nums, starts); err != nil {
		return fmt.Errorf("write manifest: %w", mapErr(err))
	}
	return nil
}

func (t *txn) DeleteUpload(ctx context.Context, bucket, key, uploadID string) (bool, error) {
	tag, err := t.q.Exec(ctx, `DELETE FROM uploads WHERE upload_id = $1 AND bucket = $2 AND key = $3`, uploadID, bucket, key)
	if err != nil {
		return false, fmt.Errorf("delete upload: %w", mapErr(err))
	}
	return tag.RowsAffected() > 0, nil
}

// checksumArg stores an empty checksum as NULL.
func checksumArg(c store.Checksum) any {
	if c.Algorithm == "" {
		return nil
	}
	return c
}
