package embedded

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// partRow is one manifest entry of a multipart object.
type partRow struct {
	number   int
	size     int64
	start    int64
	etag     string
	checksum store.Checksum
	blobID   int64
	tier     string
	inline   []byte // loaded only when a read needs it
}

// resolved is an object's metadata and content locations from one snapshot.
type resolved struct {
	info   store.ObjectInfo
	single *partRow  // single-blob object: the whole object as one segment
	parts  []partRow // multipart object
}

// segments returns the blob spans that make up n bytes from start, with a
// pointer to the row each comes from.
func (r *resolved) segments(start, n int64) []segment {
	rows := r.parts
	if r.single != nil {
		rows = []partRow{*r.single}
		rows[0].start = 0
		rows[0].size = r.info.Size
	}
	var segs []segment
	for i := range rows {
		p := &rows[i]
		if off, cnt, ok := protocol.Overlap(start, n, p.start, p.size); ok {
			segs = append(segs, segment{row: p, off: off, n: cnt})
		}
	}
	return segs
}

// resolveObject reads the object and its blob or manifest. It does not read
// inline content (see loadInline).
func resolveObject(ctx context.Context, q querier, bucket, key string) (*resolved, error) {
	var (
		r        resolved
		meta     string
		checksum sql.NullString
		partCnt  int
		lm       int64
		blobID   sql.NullInt64
		tier     sql.NullString
	)
	err := q.QueryRowContext(ctx, `SELECT o.size, o.etag, o.meta, o.checksum, o.part_count, o.last_modified, o.blob_id, b.tier
		FROM objects o LEFT JOIN blobs b ON b.id = o.blob_id
		WHERE o.bucket = ? AND o.key = ?`, bucket, key).Scan(
		&r.info.Size, &r.info.ETag, &meta, &checksum, &partCnt, &lm, &blobID, &tier)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNoSuchKey
	}
	if err != nil {
		return nil, fmt.Errorf("resolve object: %w", mapErr(err))
	}
	r.info.Bucket, r.info.Key, r.info.LastModified = bucket, key, fromMicros(lm)
	if r.info.Meta, err = parseMeta(meta); err != nil {
		return nil, fmt.Errorf("resolve object: %w", err)
	}
	if r.info.Checksum, err = parseChecksum(checksum); err != nil {
		return nil, fmt.Errorf("resolve object: %w", err)
	}
	if partCnt == 0 {
		if !blobID.Valid || !tier.Valid {
			return nil, errors.New("resolve object: object row without blob")
		}
		r.single = &partRow{number: 1, size: r.info.Size, blobID: blobID.Int64, tier: tier.String}
		return &r, nil
	}
	rows, err := q.QueryContext(ctx, `SELECT p.part_number, p.size, p.start_offset, p.etag, p.checksum, p.blob_id, b.tier
		FROM object_parts p JOIN blobs b ON b.id = p.blob_id
		WHERE p.bucket = ? AND p.key = ? ORDER BY p.part_number`, bucket, key)
	if err != nil {
		return nil, fmt.Errorf("resolve manifest: %w", mapErr(err))
	}
	defer func() { _ = rows.Close() }() // rows.Err reports what matters
	for rows.Next() {
		var p partRow
		var ck sql.NullString
		if err := rows.Scan(&p.number, &p.size, &p.start, &p.etag, &ck, &p.blobID, &p.tier); err != nil {
			return nil, fmt.Errorf("resolve manifest: %w", err)
		}
		if p.checksum, err = parseChecksum(ck); err != nil {
			return nil, fmt.Errorf("resolve manifest: %w", err)
		}
		r.parts = append(r.parts, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("resolve manifest: %w", mapErr(err))
	}
	if len(r.parts) != partCnt {
		return nil, fmt.Errorf("resolve object: manifest has %d parts, object says %d", len(r.parts), partCnt)
	}
	r.info.Parts = make([]store.PartInfo, len(r.parts))
	for i, p := range r.parts {
		r.info.Parts[i] = store.PartInfo{Number: p.number, Size: p.size, ETag: p.etag, Checksum: p.checksum, LastModified: r.info.LastModified}
	}
	return &r, nil
}

// loadInline reads the inline content of the segments that need it, in the
// caller's snapshot: inline content needs no pin.
func loadInline(ctx context.Context, q querier, segs []segment) error {
	for _, s := range segs {
		if s.row.tier != store.TierInline || s.row.inline != nil {
			continue
		}
		var data []byte
		if err := q.QueryRowContext(ctx, `SELECT inline_data FROM blobs WHERE id = ?`, s.row.blobID).Scan(&data); err != nil {
			return fmt.Errorf("read inline blob %d: %w", s.row.blobID, mapErr(err))
		}
		if data == nil {
			data = []byte{}
		}
		if int64(len(data)) != s.row.size {
			return fmt.Errorf("inline blob %d: %d bytes, expected %d", s.row.blobID, len(data), s.row.size)
		}
		s.row.inline = data
	}
	return nil
}

// missErr distinguishes NoSuchBucket from NoSuchKey after a miss.
func missErr(ctx context.Context, q querier, bucket string) error {
	if err := bucketExists(ctx, q, bucket); err != nil {
		return err
	}
	return store.ErrNoSuchKey
}

// pinRetries bounds the resolutions of a copy source (see
// protocol.ResolveAttempts).
const pinRetries = protocol.ResolveAttempts

// GetObject implements store.ObjectStore through the protocol's GET.
func (e *Engine) GetObject(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (store.ObjectInfo, *store.ByteRange, store.Reader, error) {
	return e.reads().Get(ctx, bucket, key, opts, head)
}

// reads is this engine's GET protocol: its pins are in process and never
// lost (see pins.go).
func (e *Engine) reads() *protocol.Reads {
	return &protocol.Reads{Engine: "embedded", Dialect: readDialect{e}, Pin: e.pin, Gov: e.gov}
}

// openSegments returns the stream of segs resolved in a caller's snapshot
// (see protocol.Reads.OpenSegments); ok=false means the first blob vanished:
// resolve again.
func (e *Engine) openSegments(ctx context.Context, segs []segment) (store.Reader, bool, error) {
	ps := make([]protocol.Segment, len(segs))
	for i, s := range segs {
		ps[i] = protocol.Segment{Blob: s.row.loc(), Off: s.off, N: s.n}
	}
	rd, vanished, err := e.reads().OpenSegments(ctx, ps, nil)
	return rd, !vanished, err
}

// loc is the protocol's view of a blob a row references.
func (p *partRow) loc() protocol.BlobLoc {
	return protocol.BlobLoc{ID: p.blobID, Tier: p.tier, Size: p.size, Inline: p.inline}
}

// proto is the protocol's view of a resolved object.
func (r *resolved) proto() *protocol.Resolved {
	p := &protocol.Resolved{Info: r.info}
	if r.single != nil {
		b := r.single.loc()
		b.Size = r.info.Size
		p.Blob = &b
		return p
	}
	p.Parts = make([]protocol.PartLoc, len(r.parts))
	for i := range r.parts {
		pr := &r.parts[i]
		p.Parts[i] = protocol.PartLoc{Number: pr.number, Start: pr.start, Size: pr.size, Blob: pr.loc()}
	}
	return p
}

// readDialect is the engine's statements for the GET protocol.
type readDialect struct{ e *Engine }

// Resolve reads object and manifest, and the inline content of a
// single-blob object, in one read snapshot.
func (d readDialect) Resolve(ctx context.Context, bucket, key string, withInline bool) (*protocol.Resolved, error) {
	var r *resolved
	err := d.e.withRead(ctx, func(tx *sql.Tx) error {
		var err error
		if r, err = resolveObject(ctx, tx, bucket, key); err != nil {
			return err
		}
		if !withInline || r.single == nil {
			return nil // inline parts are read when the stream reaches them
		}
		return loadInline(ctx, tx, r.segments(0, r.info.Size))
	})
	if err != nil {
		return nil, err
	}
	return r.proto(), nil
}

func (d readDialect) BucketExists(ctx context.Context, bucket string) error {
	return bucketExists(ctx, d.e.rdb, bucket)
}

func (d readDialect) BlobExists(ctx context.Context, id int64) (bool, error) {
	return d.e.blobsExist(ctx, []int64{id})
}

// OpenBlob opens one blob span: inline bytes loaded with the metadata (or
// read now from the row), or the blob's file.
func (d readDialect) OpenBlob(ctx context.Context, b protocol.BlobLoc, off, n int64) (io.ReadCloser, error) {
	switch b.Tier {
	case store.TierInline:
		data := b.Inline
		if data == nil {
			// A part's inline bytes, read only now (a fresh statement) so that
			// a manifest of many inline parts is never held in memory at once.
			row := &partRow{blobID: b.ID, tier: b.Tier, size: b.Size}
			if err := loadInline(ctx, d.e.rdb, []segment{{row: row}}); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return nil, fmt.Errorf("%w: inline blob %d: %w", store.ErrUnavailable, b.ID, protocol.ErrVanished)
				}
				return nil, err
			}
			data = row.inline
		}
		if off+n > int64(len(data)) {
			return nil, fmt.Errorf("inline blob %d: span %d+%d beyond %d bytes", b.ID, off, n, len(data))
		}
		return io.NopCloser(bytes.NewReader(data[off : off+n])), nil
	case store.TierLocal:
		rc, err := d.e.media.Open(ctx, b.ID, off, n)
		if err != nil {
			return nil, fmt.Errorf("open blob %d: %w", b.ID, err)
		}
		return rc, nil
	}
	return nil, fmt.Errorf("blob %d: unknown tier %q", b.ID, b.Tier)
}

// blobsExist reports whether every blob row of ids exists, with a fresh
// statement (not the resolving snapshot).
func (e *Engine) blobsExist(ctx context.Context, ids []int64) (bool, error) {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	var n int
	q := `SELECT count(*) FROM blobs WHERE id IN (?` + strings.Repeat(",?", len(ids)-1) + `)`
	if err := e.rdb.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return false, fmt.Errorf("re-check pinned blobs: %w", mapErr(err))
	}
	return n == len(ids), nil
}

// segment is a span of one blob.
type segment struct {
	row    *partRow
	off, n int64
}
