package pg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
	"github.com/s3gate/s3gate/throttle"
)

// blobLoc says where a blob's content lives.
type blobLoc struct {
	ID     int64   `json:"b"`
	Tier   string  `json:"t"`
	LOOID  *uint32 `json:"o"`
	Inline []byte  `json:"-"` // only for single-blob objects, read with the metadata
}

// partRow is one manifest entry of a multipart object.
type partRow struct {
	Number   int             `json:"n"`
	Size     int64           `json:"s"`
	Start    int64           `json:"a"`
	ETag     string          `json:"e"`
	Checksum *store.Checksum `json:"c"`
	Blob     blobLoc         `json:"l"`
}

// resolved is an object's metadata and content locations from one snapshot.
type resolved struct {
	info  store.ObjectInfo
	blob  *blobLoc  // single-blob object
	parts []partRow // multipart object
}

// resolveObject reads the object, its blob or its manifest with its part
// blobs, in one statement (one snapshot). Inline bytes come with it unless
// withInline is false (HEAD).
func resolveObject(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, bucket, key string, withInline, forShare bool) (*resolved, error) {
	lockClause := ""
	if forShare {
		// Copy sources: keep the row (and so its manifest) from changing until
		// our transaction ends.
		lockClause = " FOR SHARE OF o"
	}
	var (
		r        resolved
		blobID   *int64
		tier     *string
		oid      *uint32
		inline   []byte
		checksum *store.Checksum
		parts    []partRow
		partCnt  int
		lm       time.Time
	)
	err := q.QueryRow(ctx, `SELECT o.size, o.etag, o.meta, o.checksum, o.part_count, o.last_modified,
			o.blob_id, b.tier, b.lo_oid, CASE WHEN $3 THEN b.inline_data END,
			CASE WHEN o.part_count > 0 THEN (
				SELECT json_agg(json_build_object('n', p.part_number, 's', p.size, 'a', p.start_offset,
					'e', p.etag, 'c', p.checksum,
					'l', json_build_object('b', pb.id, 't', pb.tier, 'o', pb.lo_oid::bigint)) ORDER BY p.part_number)
				FROM object_parts p JOIN blobs pb ON pb.id = p.blob_id
				WHERE p.bucket = o.bucket AND p.key = o.key) END
		FROM objects o LEFT JOIN blobs b ON b.id = o.blob_id
		WHERE o.bucket = $1 AND o.key = $2`+lockClause, bucket, key, withInline).Scan(
		&r.info.Size, &r.info.ETag, &r.info.Meta, &checksum, &partCnt, &lm,
		&blobID, &tier, &oid, &inline, &parts)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNoSuchKey
	}
	if err != nil {
		return nil, fmt.Errorf("resolve object: %w", mapErr(err))
	}
	r.info.Bucket, r.info.Key, r.info.LastModified = bucket, key, lm
	if checksum != nil {
		r.info.Checksum = *checksum
	}
	if partCnt > 0 {
		if len(parts) != partCnt {
			return nil, fmt.Errorf("resolve object: manifest has %d parts, object says %d", len(parts), partCnt)
		}
		r.parts = parts
		r.info.Parts = make([]store.PartInfo, len(parts))
		for i, p := range parts {
			pi := store.PartInfo{Number: p.Number, Size: p.Size, ETag: p.ETag, LastModified: lm}
			if p.Checksum != nil {
				pi.Checksum = *p.Checksum
			}
			r.info.Parts[i] = pi
		}
		return &r, nil
	}
	if blobID == nil || tier == nil {
		return nil, errors.New("resolve object: object row without blob")
	}
	r.blob = &blobLoc{ID: *blobID, Tier: *tier, LOOID: oid, Inline: inline}
	return &r, nil
}

// bucketMissing distinguishes NoSuchBucket from NoSuchKey after a miss.
func (e *Engine) missErr(ctx context.Context, bucket string) error {
	if err := e.bucketExists(ctx, e.pool, bucket); err != nil {
		return err
	}
	return store.ErrNoSuchKey
}

// pinAttempts bounds how often GetObject resolves an object whose blob
// vanished between resolution and pin (an overwrite or delete followed by a GC
// sweep in that gap: GC's grace period makes even one retry rare).
const pinAttempts = 2

// GetObject implements store.ObjectStore. It follows the GET contract of
// package fleet: resolve the metadata in one snapshot (inline bytes with it,
// needing no pin), then pin the first blob the response will stream, re-check
// in a fresh statement that its row still exists and check the pin before
// answering. HEAD, 304/412 and 416 answers are checked too: they hold a pin
// only for the check. Later blobs (the parts of a multipart object) are pinned
// and re-checked one at a time as the stream reaches them, so a stream holds
// one pin however many parts it spans. The returned reader is paced by the
// governor and guarded by the pin it holds (before the first read, every
// quantum and at EOF); Close releases it.
func (e *Engine) GetObject(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (store.ObjectInfo, *store.ByteRange, store.Reader, error) {
	for attempt := 1; ; attempt++ {
		info, rng, rd, vanished, err := e.getOnce(ctx, bucket, key, opts, head)
		if !vanished {
			return info, rng, rd, err
		}
		if attempt == pinAttempts {
			return info, nil, nil, fmt.Errorf("get %s/%s: %w: its content was reclaimed %d times while it was opened",
				bucket, key, store.ErrUnavailable, attempt)
		}
	}
}

// getOnce is one resolution of GetObject. vanished reports that the first
// pinned blob no longer exists: the object changed since the snapshot,
// resolve again.
func (e *Engine) getOnce(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (
	info store.ObjectInfo, rng *store.ByteRange, rd store.Reader, vanished bool, err error) {
	r, err := resolveObject(ctx, e.pool, bucket, key, !head, false)
	if errors.Is(err, store.ErrNoSuchKey) {
		err = e.missErr(ctx, bucket)
	}
	if err != nil {
		return store.ObjectInfo{}, nil, nil, false, fmt.Errorf("get %s/%s: %w", bucket, key, err)
	}
	if cerr := store.EvalConditions(opts.Cond, r.info.ETag, r.info.LastModified); cerr != nil {
		if err := e.checkProtection(ctx, e.spanSegments(r, 0, r.info.Size)); err != nil {
			return r.info, nil, nil, false, fmt.Errorf("get %s/%s: %w", bucket, key, err)
		}
		return r.info, nil, nil, false, cerr
	}
	rng, err = selectRange(r, opts)
	if err != nil {
		if errors.Is(err, store.ErrInvalidRange) {
			if perr := e.checkProtection(ctx, e.spanSegments(r, 0, r.info.Size)); perr != nil {
				return r.info, nil, nil, false, fmt.Errorf("get %s/%s: %w", bucket, key, perr)
			}
		}
		return r.info, nil, nil, false, err
	}
	start, n := int64(0), r.info.Size
	if rng != nil {
		start, n = rng.Start, rng.End-rng.Start+1
	}
	if head {
		if err := e.checkProtection(ctx, e.spanSegments(r, start, n)); err != nil {
			return r.info, nil, nil, false, fmt.Errorf("head %s/%s: %w", bucket, key, err)
		}
		return r.info, rng, nil, false, nil
	}
	rd, vanished, err = e.openStream(ctx, r, start, n, e.gov)
	if err != nil || vanished {
		return r.info, nil, nil, vanished, err
	}
	return r.info, rng, rd, false, nil
}

// openStream returns the guarded reader of n bytes from start of a resolved
// object, its first streamed blob pinned and re-checked (vanished: that blob
// is gone, resolve again). gov paces it if not nil.
func (e *Engine) openStream(ctx context.Context, r *resolved, start, n int64, gov *throttle.BandwidthGovernor) (store.Reader, bool, error) {
	segs := e.spanSegments(r, start, n)
	var first fleet.Pin
	firstID, needs := protocol.FirstPinned(segs, e.segBlob)
	if needs {
		var err error
		// The headers go out before the first read: a pin lost by now must
		// be a 503, not a truncated 200.
		first, err = e.pinning().PinFirst(ctx, firstID)
		if errors.Is(err, protocol.ErrVanished) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	stream := protocol.NewPinnedSegments(ctx, "pg", segs, e.segBlob, e.openSegment, e.pinning(), first, firstID)
	return protocol.GuardedStream(ctx, stream, gov, protocol.GuardAlways), false, nil
}

// segBlob says which blob a segment streams and whether it needs a pin:
// inline content is read in one statement from the blob row itself (exact
// bytes or no row), so only content outside the row is pinned.
func (e *Engine) segBlob(s segment) (int64, bool) {
	return s.blob.ID, e.pins != nil && s.blob.Tier != store.TierInline
}

// pinning is how this engine's streams pin and re-check blobs.
func (e *Engine) pinning() protocol.Pinning {
	return protocol.Pinning{
		Acquire: func(ctx context.Context, id int64) (fleet.Pin, error) {
			p, err := e.pins.Acquire(ctx, id)
			if err != nil {
				return nil, mapPinErr(err)
			}
			return p, nil
		},
		Exists: func(ctx context.Context, id int64) (bool, error) {
			return e.blobsExist(ctx, []int64{id})
		},
	}
}

// checkProtection proves, for an answer that streams no content (HEAD, 304,
// 412, 416), that the content it describes could be protected now: it pins
// the first blob that a stream would pin, checks the pin and releases it. One
// pin proves the pin session valid without taking a lock per part.
func (e *Engine) checkProtection(ctx context.Context, segs []segment) error {
	id, ok := protocol.FirstPinned(segs, e.segBlob)
	if !ok {
		return nil
	}
	p, err := e.pinning().Acquire(ctx, id)
	if err != nil {
		return err
	}
	defer p.Release()
	return pinSet{p}.Check()
}

// mapPinErr wraps a pin error with the store sentinel that s3api answers.
func mapPinErr(err error) error {
	switch {
	case errors.Is(err, fleet.ErrTooManyPins):
		return fmt.Errorf("%w: %w", store.ErrSlowDown, err)
	case errors.Is(err, fleet.ErrSessionLost), errors.Is(err, fleet.ErrPinLost),
		errors.Is(err, fleet.ErrWindowExpired), errors.Is(err, fleet.ErrPinsClosed):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// blobsExist reports, with a fresh statement (not the resolving snapshot),
// whether every blob row of ids still exists.
func (e *Engine) blobsExist(ctx context.Context, ids []int64) (bool, error) {
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM blobs WHERE id = ANY($1::bigint[])`, ids).Scan(&n); err != nil {
		return false, fmt.Errorf("re-check pinned blobs: %w", mapErr(err))
	}
	return n == len(ids), nil
}

// pinSet is the pins of one response.
type pinSet = protocol.PinSet

// guardedReader wraps the content reader of a response: paced by the governor
// (if any) and guarded by the pins (if any), which can be lost; Close releases
// the pins once.
func (e *Engine) guardedReader(ctx context.Context, src io.ReadCloser, pins pinSet) store.Reader {
	return protocol.GuardedReader(ctx, src, pins, e.gov, protocol.GuardAlways)
}

// selectRange resolves partNumber and Range against the object.
func selectRange(r *resolved, opts store.GetOptions) (*store.ByteRange, error) {
	return protocol.SelectRange(r.info.Size, r.parts != nil, func(n int) (protocol.Part, bool) {
		for _, p := range r.parts {
			if p.Number == n {
				return protocol.Part{Number: n, Start: p.Start, Size: p.Size}, true
			}
		}
		return protocol.Part{}, false
	}, opts)
}

// spanSegments lists the blob spans that make up n bytes from start of a
// resolved object, in order. Nothing is opened: parts and large content are
// opened lazily, one at a time, as the stream reaches them.
func (e *Engine) spanSegments(r *resolved, start, n int64) []segment {
	if r.blob != nil {
		if n == 0 {
			return nil
		}
		return []segment{{blob: *r.blob, off: start, n: n}}
	}
	var segs []segment
	for _, p := range r.parts {
		if off, cnt, ok := protocol.Overlap(start, n, p.Start, p.Size); ok {
			segs = append(segs, segment{blob: p.Blob, off: off, n: cnt})
		}
	}
	return segs
}

// openSegment opens one blob span.
func (e *Engine) openSegment(ctx context.Context, s segment) (io.ReadCloser, error) {
	return e.openBlob(ctx, s.blob, s.off, s.n)
}

// openBlob opens n bytes at off of one blob.
func (e *Engine) openBlob(ctx context.Context, b blobLoc, off, n int64) (io.ReadCloser, error) {
	switch b.Tier {
	case store.TierInline:
		if b.Inline == nil {
			// Parts of multipart objects carry no inline bytes in the manifest
			// query; fetch them now, from the row itself (no pin needed: the
			// row has exactly these bytes, or is gone).
			err := e.pool.QueryRow(ctx, `SELECT inline_data FROM blobs WHERE id = $1`, b.ID).Scan(&b.Inline)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, fmt.Errorf("%w: inline blob %d: %w", store.ErrUnavailable, b.ID, protocol.ErrVanished)
			}
			if err != nil {
				return nil, fmt.Errorf("read inline blob %d: %w", b.ID, mapErr(err))
			}
		}
		if off+n > int64(len(b.Inline)) {
			return nil, fmt.Errorf("inline blob %d: span %d+%d beyond %d bytes", b.ID, off, n, len(b.Inline))
		}
		return io.NopCloser(bytes.NewReader(b.Inline[off : off+n])), nil
	case store.TierLocal:
		if e.media == nil {
			return nil, fmt.Errorf("%w: blob %d is on local media, which this instance has not configured", store.ErrUnavailable, b.ID)
		}
		return e.media.Open(ctx, b.ID, off, n)
	case store.TierPGLO, store.TierPGChunks:
		ce := contentFor(b.Tier)
		var ref int64
		if b.LOOID != nil {
			ref = int64(*b.LOOID)
		}
		return ce.Open(ctx, e.pool, b.ID, ref, off, n)
	}
	return nil, fmt.Errorf("blob %d: unknown tier %q", b.ID, b.Tier)
}

// segment is a span of one blob.
type segment struct {
	blob   blobLoc
	off, n int64
}
