package pg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
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
// needing no pin), pin every blob the response will stream, re-check in a
// fresh statement that those blob rows still exist, and check the pins again
// before answering. HEAD, 304/412 and 416 answers are checked too: they hold a
// pin only for the check. The returned reader is paced by the governor and
// guarded by the pins (before the first read, every quantum and at EOF); Close
// releases the pins.
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

// getOnce is one resolution of GetObject. vanished reports that a pinned blob
// no longer exists: the object changed since the snapshot, resolve again.
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
		if err := e.checkProtection(ctx, streamedBlobs(r, 0, r.info.Size)); err != nil {
			return r.info, nil, nil, false, fmt.Errorf("get %s/%s: %w", bucket, key, err)
		}
		return r.info, nil, nil, false, cerr
	}
	rng, err = selectRange(r, opts)
	if err != nil {
		if errors.Is(err, store.ErrInvalidRange) {
			if perr := e.checkProtection(ctx, streamedBlobs(r, 0, r.info.Size)); perr != nil {
				return r.info, nil, nil, false, fmt.Errorf("get %s/%s: %w", bucket, key, perr)
			}
		}
		return r.info, nil, nil, false, err
	}
	start, n := int64(0), r.info.Size
	if rng != nil {
		start, n = rng.Start, rng.End-rng.Start+1
	}
	ids := streamedBlobs(r, start, n)
	if head {
		if err := e.checkProtection(ctx, ids); err != nil {
			return r.info, nil, nil, false, fmt.Errorf("head %s/%s: %w", bucket, key, err)
		}
		return r.info, rng, nil, false, nil
	}
	pins, err := e.pinBlobs(ctx, ids)
	if err != nil {
		return r.info, nil, nil, false, fmt.Errorf("get %s/%s: %w", bucket, key, err)
	}
	if len(pins) > 0 {
		ok, err := e.blobsExist(ctx, ids)
		if err == nil && ok {
			// The headers go out before the first read: a pin lost by now
			// must be a 503, not a truncated 200.
			err = pins.check()
		}
		if err != nil || !ok {
			pins.release()
			if err != nil {
				return r.info, nil, nil, false, fmt.Errorf("get %s/%s: %w", bucket, key, err)
			}
			return r.info, nil, nil, true, nil
		}
	}
	src, err := e.openSpan(ctx, r, start, n)
	if err != nil {
		pins.release()
		return r.info, nil, nil, false, fmt.Errorf("get %s/%s: %w", bucket, key, err)
	}
	return r.info, rng, e.guardedReader(ctx, src, pins), false, nil
}

// streamedBlobs lists, sorted and without duplicates, the blobs whose content
// a read of n bytes from start would fetch after the metadata snapshot: the
// single blob unless it is inline, or every part blob in the span (inline
// parts included, since their bytes are fetched only when the reader reaches
// them).
func streamedBlobs(r *resolved, start, n int64) []int64 {
	if r.blob != nil {
		if r.blob.Tier == store.TierInline {
			return nil
		}
		return []int64{r.blob.ID}
	}
	var ids []int64
	end := start + n
	for _, p := range r.parts {
		if p.Start+p.Size <= start || p.Start >= end || p.Size == 0 {
			continue
		}
		ids = append(ids, p.Blob.ID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// checkProtection proves, for an answer that streams no content (HEAD, 304,
// 412, 416), that the content it describes could be protected now: it pins
// one of the blobs, checks the pin and releases it. One pin proves the pin
// session valid without taking a lock per part of a large multipart object.
func (e *Engine) checkProtection(ctx context.Context, ids []int64) error {
	if e.pins == nil || len(ids) == 0 {
		return nil
	}
	pins, err := e.pinBlobs(ctx, ids[:1])
	if err != nil {
		return err
	}
	defer pins.release()
	return pins.check()
}

// pinBlobs acquires a pin on every blob of ids; on failure it releases what it
// took. Errors map the pin errors to store's: a full pin table is
// store.ErrSlowDown, a lost pin session store.ErrUnavailable.
func (e *Engine) pinBlobs(ctx context.Context, ids []int64) (pinSet, error) {
	if e.pins == nil || len(ids) == 0 {
		return nil, nil
	}
	pins := make(pinSet, 0, len(ids))
	for _, id := range ids {
		p, err := e.pins.Acquire(ctx, id)
		if err != nil {
			pins.release()
			return nil, mapPinErr(err)
		}
		pins = append(pins, p)
	}
	return pins, nil
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
type pinSet []fleet.Pin

func (s pinSet) release() {
	for _, p := range s {
		p.Release()
	}
}

// check is the guard of a stream: nil while every pin is valid, afterwards an
// error wrapping store.ErrUnavailable and fleet.ErrPinLost.
func (s pinSet) check() error {
	for _, p := range s {
		if !p.Valid() {
			return fmt.Errorf("content pin: %w: %w", store.ErrUnavailable, fleet.ErrPinLost)
		}
	}
	return nil
}

// guardedReader wraps the content reader of a response: paced by the governor
// (if any) and guarded by the pins (if any); Close releases the pins once.
func (e *Engine) guardedReader(ctx context.Context, src io.ReadCloser, pins pinSet) store.Reader {
	var guard func() error
	if len(pins) > 0 {
		guard = pins.check
	}
	rd := &pinnedReader{src: src, r: src, pins: pins}
	switch {
	case e.gov != nil:
		rd.r = e.gov.NewReader(ctx, src, guard)
	case guard != nil:
		rd.r = &checkedReader{src: src, guard: guard}
	}
	return rd
}

// pinnedReader is the store.Reader that GetObject returns.
type pinnedReader struct {
	src  io.ReadCloser // the content
	r    io.Reader     // src as the caller reads it (paced, guarded)
	pins pinSet
	once sync.Once
}

func (p *pinnedReader) Read(b []byte) (int, error) { return p.r.Read(b) }

// Close stops reading the content and then releases the pins, exactly once;
// later calls do nothing.
func (p *pinnedReader) Close() error {
	var err error
	p.once.Do(func() {
		err = p.src.Close()
		p.pins.release()
	})
	if err != nil {
		return fmt.Errorf("close object reader: %w", err)
	}
	return nil
}

// checkedReader is the guard without a governor: it checks before the first
// read and after every read, before handing the bytes over, which covers EOF.
// Its error is sticky.
type checkedReader struct {
	src     io.Reader
	guard   func() error
	started bool
	err     error
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if !c.started {
		c.started = true
		if err := c.guard(); err != nil {
			c.err = err
			return 0, err
		}
	}
	n, err := c.src.Read(p)
	if gerr := c.guard(); gerr != nil {
		// Bytes read after the loss are withheld: the caller gets a prefix.
		c.err = gerr
		return 0, gerr
	}
	if err != nil {
		c.err = err
	}
	return n, err
}

// selectRange resolves partNumber and Range against the object.
func selectRange(r *resolved, opts store.GetOptions) (*store.ByteRange, error) {
	size := r.info.Size
	if opts.PartNumber > 0 {
		if opts.RangeSpec != "" || opts.Range != nil {
			return nil, fmt.Errorf("%w: Range and partNumber cannot both be specified", store.ErrInvalidRequest)
		}
		if r.parts == nil {
			if opts.PartNumber != 1 {
				return nil, fmt.Errorf("%w: part %d of a single-part object", store.ErrInvalidRange, opts.PartNumber)
			}
			return nil, nil
		}
		for _, p := range r.parts {
			if p.Number == opts.PartNumber {
				if p.Size == 0 {
					return nil, nil
				}
				return &store.ByteRange{Start: p.Start, End: p.Start + p.Size - 1}, nil
			}
		}
		return nil, fmt.Errorf("%w: the object has no part %d", store.ErrInvalidRange, opts.PartNumber)
	}
	if opts.RangeSpec != "" {
		return store.ParseRange(opts.RangeSpec, size)
	}
	if br := opts.Range; br != nil {
		if br.Start >= size || br.Start < 0 || br.End < br.Start {
			return nil, fmt.Errorf("%w: bytes=%d-%d of a %d-byte object", store.ErrInvalidRange, br.Start, br.End, size)
		}
		return &store.ByteRange{Start: br.Start, End: min(br.End, size-1)}, nil
	}
	return nil, nil
}

// openSpan returns a reader of n bytes from start of a resolved object. Parts
// and large content are opened lazily, one at a time, as the reader reaches
// them: nothing is buffered beyond a chunk.
func (e *Engine) openSpan(ctx context.Context, r *resolved, start, n int64) (store.Reader, error) {
	if r.blob != nil {
		return e.openBlob(ctx, *r.blob, start, n)
	}
	var segs []segment
	end := start + n
	for _, p := range r.parts {
		pEnd := p.Start + p.Size
		if pEnd <= start || p.Start >= end || p.Size == 0 {
			continue
		}
		off := max(start, p.Start) - p.Start
		segs = append(segs, segment{blob: p.Blob, off: off, n: min(end, pEnd) - p.Start - off})
	}
	return &multiReader{ctx: ctx, e: e, segs: segs}, nil
}

// openBlob opens n bytes at off of one blob.
func (e *Engine) openBlob(ctx context.Context, b blobLoc, off, n int64) (io.ReadCloser, error) {
	switch b.Tier {
	case store.TierInline:
		if b.Inline == nil {
			// Parts of multipart objects carry no inline bytes in the manifest
			// query; fetch them now.
			if err := e.pool.QueryRow(ctx, `SELECT inline_data FROM blobs WHERE id = $1`, b.ID).Scan(&b.Inline); err != nil {
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

// multiReader reads segments in order, opening each when it is reached.
type multiReader struct {
	ctx  context.Context
	e    *Engine
	segs []segment
	cur  io.ReadCloser
	err  error
}

func (m *multiReader) Read(p []byte) (int, error) {
	for {
		if m.err != nil {
			return 0, m.err
		}
		if m.cur == nil {
			if len(m.segs) == 0 {
				return 0, io.EOF
			}
			s := m.segs[0]
			m.segs = m.segs[1:]
			rc, err := m.e.openBlob(m.ctx, s.blob, s.off, s.n)
			if err != nil {
				m.err = err
				return 0, err
			}
			m.cur = rc
		}
		n, err := m.cur.Read(p)
		if errors.Is(err, io.EOF) {
			cerr := m.cur.Close()
			m.cur = nil
			if cerr != nil {
				m.err = fmt.Errorf("close part reader: %w", cerr)
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			m.err = err
		}
		return n, err
	}
}

func (m *multiReader) Close() error {
	m.segs = nil
	if m.err == nil {
		m.err = errors.New("pg: read after close")
	}
	if m.cur != nil {
		err := m.cur.Close()
		m.cur = nil
		if err != nil {
			return fmt.Errorf("close part reader: %w", err)
		}
	}
	return nil
}
