package embedded

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// pinRetries bounds how often GetObject resolves again when a blob it pinned
// vanished between resolution and pin (an overwrite and a sweep in between).
const pinRetries = 3

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

// GetObject implements store.ObjectStore. Metadata, conditions, range and
// inline content come from one read snapshot; file-backed blobs are then
// pinned and re-checked (see pins.go) before the reader is returned, which the
// governor (if any) paces. HEAD opens and pins nothing: local pins are never
// lost, so there is no protection to check for HEAD, 304 or 416 answers.
func (e *Engine) GetObject(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (store.ObjectInfo, *store.ByteRange, store.Reader, error) {
	for attempt := 1; ; attempt++ {
		var (
			r       *resolved
			rng     *store.ByteRange
			segs    []segment
			condErr error
		)
		err := e.withRead(ctx, func(tx *sql.Tx) error {
			var err error
			r, err = resolveObject(ctx, tx, bucket, key)
			if errors.Is(err, store.ErrNoSuchKey) {
				return missErr(ctx, tx, bucket)
			}
			if err != nil {
				return err
			}
			if condErr = store.EvalConditions(opts.Cond, r.info.ETag, r.info.LastModified); condErr != nil {
				return nil
			}
			if rng, condErr = selectRange(r, opts); condErr != nil || head {
				return nil
			}
			start, n := int64(0), r.info.Size
			if rng != nil {
				start, n = rng.Start, rng.End-rng.Start+1
			}
			segs = r.segments(start, n)
			if r.single == nil {
				return nil // inline parts are read when the stream reaches them
			}
			return loadInline(ctx, tx, segs)
		})
		if err != nil {
			return store.ObjectInfo{}, nil, nil, fmt.Errorf("get %s/%s: %w", bucket, key, err)
		}
		if condErr != nil {
			return r.info, nil, nil, condErr
		}
		if head {
			return r.info, rng, nil, nil
		}
		rd, ok, err := e.openSegments(ctx, segs)
		if err != nil {
			return r.info, nil, nil, fmt.Errorf("get %s/%s: %w", bucket, key, err)
		}
		if ok {
			return r.info, rng, rd, nil
		}
		if attempt == pinRetries {
			return r.info, nil, nil, fmt.Errorf("get %s/%s: %w: its content kept changing while it was opened", bucket, key, store.ErrUnavailable)
		}
	}
}

// openSegments returns the stream of segs: the first file-backed blob is
// pinned and re-checked now, each later one when the stream reaches it (one
// pin per stream however many parts it spans). ok=false means the first blob
// vanished: resolve again.
func (e *Engine) openSegments(ctx context.Context, segs []segment) (store.Reader, bool, error) {
	var first fleet.Pin
	firstID, needs := protocol.FirstPinned(segs, segBlob)
	if needs {
		var err error
		first, err = e.pinning().PinFirst(ctx, firstID)
		if errors.Is(err, protocol.ErrVanished) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	stream := protocol.NewPinnedSegments(ctx, "embedded", segs, segBlob, e.openSegment, e.pinning(), first, firstID)
	return e.newPacedReader(ctx, stream), true, nil
}

// segBlob says which blob a segment streams and whether it needs a pin
// (inline content is read from the blob row itself: exact bytes or no row).
func segBlob(s segment) (int64, bool) { return s.row.blobID, s.row.tier != store.TierInline }

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

// selectRange resolves partNumber and Range against the object (the same
// rules as store/pg).
func selectRange(r *resolved, opts store.GetOptions) (*store.ByteRange, error) {
	return protocol.SelectRange(r.info.Size, r.parts != nil, func(n int) (protocol.Part, bool) {
		for _, p := range r.parts {
			if p.number == n {
				return protocol.Part{Number: n, Start: p.start, Size: p.size}, true
			}
		}
		return protocol.Part{}, false
	}, opts)
}

// segment is a span of one blob.
type segment struct {
	row    *partRow
	off, n int64
}

// openSegment opens one blob span: inline bytes loaded with the metadata, or
// the blob's file.
func (e *Engine) openSegment(ctx context.Context, s segment) (io.ReadCloser, error) {
	switch s.row.tier {
	case store.TierInline:
		data := s.row.inline
		if data == nil {
			// A part's inline bytes, read only now (a fresh statement) so that
			// a manifest of many inline parts is never held in memory at once.
			one := []segment{{row: &partRow{blobID: s.row.blobID, tier: s.row.tier, size: s.row.size}}}
			if err := loadInline(ctx, e.rdb, one); err != nil {
				if errors.Is(err, sql.ErrNoRows) {
					return nil, fmt.Errorf("%w: inline blob %d: %w", store.ErrUnavailable, s.row.blobID, protocol.ErrVanished)
				}
				return nil, err
			}
			data = one[0].row.inline
		}
		if s.off+s.n > int64(len(data)) {
			return nil, fmt.Errorf("inline blob %d: span %d+%d beyond %d bytes", s.row.blobID, s.off, s.n, len(data))
		}
		return io.NopCloser(bytes.NewReader(data[s.off : s.off+s.n])), nil
	case store.TierLocal:
		rc, err := e.media.Open(ctx, s.row.blobID, s.off, s.n)
		if err != nil {
			return nil, fmt.Errorf("open blob %d: %w", s.row.blobID, err)
		}
		return rc, nil
	}
	return nil, fmt.Errorf("blob %d: unknown tier %q", s.row.blobID, s.row.tier)
}
