package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/throttle"
)

// ResolveAttempts bounds how often a read resolves an object whose first
// pinned blob vanished between resolution and pin (an overwrite or delete
// followed by a GC sweep in that gap: GC's grace period makes even one retry
// rare).
const ResolveAttempts = 3

// BlobLoc says where a blob's content lives.
type BlobLoc struct {
	ID   int64
	Tier string
	Size int64
	// Ref is the content engine's reference: a large object's OID for pglo,
	// 0 where the blob id is the reference.
	Ref int64
	// Inline is the content of an inline blob when it was read with the
	// metadata; nil means it is read when the stream reaches it.
	Inline []byte
}

// PartLoc is one manifest entry of a multipart object.
type PartLoc struct {
	Number      int
	Start, Size int64
	Blob        BlobLoc
}

// Resolved is an object's metadata and content locations, read in one
// snapshot: exactly one of Blob (a single-blob object) and Parts (a multipart
// object, in part order, with Info.Parts filled) is set.
type Resolved struct {
	Info  store.ObjectInfo
	Blob  *BlobLoc
	Parts []PartLoc
	// Seq is the noncurrent version row it was resolved from, 0 for the
	// current object.
	Seq int64
}

// Segment is a span of one blob.
type Segment struct {
	Blob   BlobLoc
	Off, N int64
}

// Segments lists the blob spans that make up n bytes from start, in order.
// Nothing is opened: content is opened lazily, one blob at a time, as a
// stream reaches it.
func (r *Resolved) Segments(start, n int64) []Segment {
	if r.Blob != nil {
		if n == 0 {
			return nil
		}
		return []Segment{{Blob: *r.Blob, Off: start, N: n}}
	}
	var segs []Segment
	for _, p := range r.Parts {
		if off, cnt, ok := Overlap(start, n, p.Start, p.Size); ok {
			segs = append(segs, Segment{Blob: p.Blob, Off: off, N: cnt})
		}
	}
	return segs
}

// BlobIDs lists the blobs the object references (with repeats).
func (r *Resolved) BlobIDs() []int64 {
	if r.Blob != nil {
		return []int64{r.Blob.ID}
	}
	ids := make([]int64, len(r.Parts))
	for i, p := range r.Parts {
		ids[i] = p.Blob.ID
	}
	return ids
}

// SelectRange resolves partNumber and Range against the object.
func (r *Resolved) SelectRange(opts store.GetOptions) (*store.ByteRange, error) {
	return SelectRange(r.Info.Size, r.Parts != nil, func(n int) (Part, bool) {
		for _, p := range r.Parts {
			if p.Number == n {
				return Part{Number: n, Start: p.Start, Size: p.Size}, true
			}
		}
		return Part{}, false
	}, opts)
}

// PinErr wraps a pin error with the store sentinel that s3api answers: a
// full pin table is 503 SlowDown, a lost or closed pin session 503.
func PinErr(err error) error {
	switch {
	case errors.Is(err, fleet.ErrTooManyPins):
		return fmt.Errorf("%w: %w", store.ErrSlowDown, err)
	case errors.Is(err, fleet.ErrSessionLost), errors.Is(err, fleet.ErrPinLost),
		errors.Is(err, fleet.ErrWindowExpired), errors.Is(err, fleet.ErrPinsClosed), errors.Is(err, fleet.ErrBlobGone):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// pin pins a blob for a stream (with ReadPins, if set).
func (s *Store) pin(ctx context.Context, id int64) (fleet.Pin, error) {
	p, err := s.readPins.Acquire(ctx, id)
	if err != nil {
		return nil, PinErr(err)
	}
	return p, nil
}

// GetObject implements store.ObjectStore. Metadata (with inline bytes)
// comes from one snapshot and needs no pin; the first blob the response
// streams is pinned and re-checked in a fresh statement before the headers
// go out; later blobs (the parts of a multipart object) are pinned and
// re-checked one at a time as the stream reaches them, so a stream holds one
// pin however many parts it spans. The reader is paced by the governor and
// guarded by its pin (before the first read, every quantum and at EOF);
// Close releases it.
func (s *Store) GetObject(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (store.ObjectInfo, *store.ByteRange, store.Reader, error) {
	for attempt := 1; ; attempt++ {
		info, rng, rd, vanished, err := s.getOnce(ctx, bucket, key, opts, head)
		if !vanished {
			return info, rng, rd, err
		}
		if attempt == ResolveAttempts {
			return info, nil, nil, fmt.Errorf("get %s/%s: %w: its content was reclaimed %d times while it was opened",
				bucket, key, store.ErrUnavailable, attempt)
		}
	}
}

// getOnce is one resolution of Get. vanished reports that the first pinned
// blob no longer exists: the object changed since the snapshot, resolve
// again. The answers about the object as resolved (304, 412, 416, a missing
// part) are returned as they are, failures with the request's context.
func (s *Store) getOnce(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (
	info store.ObjectInfo, rng *store.ByteRange, rd store.Reader, vanished bool, err error) {
	fail := func(err error) error {
		if head {
			return fmt.Errorf("head %s/%s: %w", bucket, key, err)
		}
		return fmt.Errorf("get %s/%s: %w", bucket, key, err)
	}
	r, err := resolve(ctx, s.dialect.Autocommit(), bucket, key, opts.VersionID, !head)
	if err != nil {
		var marker store.ObjectInfo // a delete marker names itself in the answer
		if r != nil {
			marker = r.Info
		}
		return marker, nil, nil, false, fail(err)
	}
	if cerr := store.EvalConditions(opts.Cond, r.Info.ETag, r.Info.LastModified); cerr != nil {
		if err := s.proveProtection(ctx, r.Segments(0, r.Info.Size)); err != nil {
			return r.Info, nil, nil, false, fail(err)
		}
		return r.Info, nil, nil, false, cerr
	}
	rng, err = r.SelectRange(opts)
	if err != nil {
		if errors.Is(err, store.ErrInvalidRange) {
			if perr := s.proveProtection(ctx, r.Segments(0, r.Info.Size)); perr != nil {
				return r.Info, nil, nil, false, fail(perr)
			}
		}
		return r.Info, nil, nil, false, err
	}
	start, n := int64(0), r.Info.Size
	if rng != nil {
		start, n = rng.Start, rng.End-rng.Start+1
	}
	if head {
		if err := s.proveProtection(ctx, r.Segments(start, n)); err != nil {
			return r.Info, nil, nil, false, fail(err)
		}
		return r.Info, rng, nil, false, nil
	}
	rd, vanished, err = s.Open(ctx, r, start, n, s.gov)
	if err != nil {
		return r.Info, nil, nil, false, fail(err)
	}
	if vanished {
		return r.Info, nil, nil, true, nil
	}
	return r.Info, rng, rd, false, nil
}

// Resolve resolves an object in autocommit; a miss is store.ErrNoSuchBucket
// when the bucket is missing, else store.ErrNoSuchKey.
func (s *Store) Resolve(ctx context.Context, bucket, key string, withInline bool) (*Resolved, error) {
	r, err := resolve(ctx, s.dialect.Autocommit(), bucket, key, "", withInline)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Open returns the guarded reader of n bytes from start of a resolved
// object, its first streamed blob pinned and re-checked (vanished: that blob
// is gone, resolve again). gov paces it if not nil (a server-side copy passes
// nil: it is not a client stream).
func (s *Store) Open(ctx context.Context, r *Resolved, start, n int64, gov *throttle.BandwidthGovernor) (store.Reader, bool, error) {
	return s.OpenSegments(ctx, r.Segments(start, n), gov)
}

// OpenSegments is Open of the spans segs of a resolved object.
func (s *Store) OpenSegments(ctx context.Context, segs []Segment, gov *throttle.BandwidthGovernor) (store.Reader, bool, error) {
	var first fleet.Pin
	firstID, needs := FirstPinned(segs, s.segBlob)
	if needs {
		var err error
		// The headers go out before the first read: a pin lost by now must
		// be a 503, not a truncated 200.
		first, err = s.pinning().PinFirst(ctx, firstID)
		if errors.Is(err, ErrVanished) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	stream := NewPinnedSegments(ctx, s.engine, segs, s.segBlob, s.openSegment, s.pinning(), first, firstID)
	mode := GuardWithGovernor
	if s.pinsLosable {
		mode = GuardAlways
	}
	return GuardedStream(ctx, stream, gov, mode, anyFile(segs)), false, nil
}

// anyFile reports whether a segment's content is a file (sendfile may serve it).
func anyFile(segs []Segment) bool {
	return slices.ContainsFunc(segs, func(s Segment) bool { return s.Blob.Tier == store.TierLocal })
}

// segBlob says which blob a segment streams and whether it needs a pin:
// inline content is read in one statement from the blob row itself (exact
// bytes or no row), so only content outside the row is pinned.
func (s *Store) segBlob(seg Segment) (int64, bool) {
	return seg.Blob.ID, s.readPins != nil && seg.Blob.Tier != store.TierInline
}

// openSegment opens one blob span: inline bytes read with the metadata, or
// read now from the blob row (a fresh statement, so that a manifest of many
// inline parts is never held in memory at once; no pin needed: the row has
// exactly these bytes, or is gone), or content outside the row.
func (s *Store) openSegment(ctx context.Context, seg Segment) (io.ReadCloser, error) {
	b := seg.Blob
	if b.Tier != store.TierInline {
		return s.dialect.OpenContent(ctx, b, seg.Off, seg.N)
	}
	data := b.Inline
	if data == nil {
		var found bool
		var err error
		if data, found, err = s.dialect.Autocommit().InlineData(ctx, b.ID); err != nil {
			return nil, fmt.Errorf("read inline blob %d: %w", b.ID, err)
		}
		if !found {
			return nil, fmt.Errorf("%w: inline blob %d: %w", store.ErrUnavailable, b.ID, ErrVanished)
		}
	}
	if int64(len(data)) != b.Size || seg.Off+seg.N > b.Size {
		return nil, fmt.Errorf("inline blob %d: %d bytes, expected %d (span %d+%d)", b.ID, len(data), b.Size, seg.Off, seg.N)
	}
	return io.NopCloser(bytes.NewReader(data[seg.Off : seg.Off+seg.N])), nil
}

// pinning is how this engine's streams pin and re-check blobs.
func (s *Store) pinning() Pinning {
	return Pinning{Acquire: s.pin, Exists: s.dialect.Autocommit().BlobExists}
}

// proveProtection proves, for an answer that streams no content (HEAD, 304,
// 412, 416), that the content it describes could be protected now: it pins
// the first blob that a stream would pin, checks the pin and releases it. One
// pin proves the pin session valid without taking a lock per part. Pins that
// cannot be lost need no proof.
func (s *Store) proveProtection(ctx context.Context, segs []Segment) error {
	if !s.pinsLosable {
		return nil
	}
	id, ok := FirstPinned(segs, s.segBlob)
	if !ok {
		return nil
	}
	p, err := s.pin(ctx, id)
	if err != nil {
		return err
	}
	defer p.Release()
	return PinSet{p}.Check()
}

// resolve resolves the version versionID of an object ("" the latest)
// through tx. A miss is store.ErrNoSuchBucket when the bucket is missing,
// store.ErrNoSuchVersion for an unknown version, else store.ErrNoSuchKey. A
// delete marker is store.ErrNoSuchKey when it is the latest and no version
// was named, store.ErrDeleteMarker when it was named: then the marker's
// Resolved (Info only) comes back beside the error.
func resolve(ctx context.Context, tx Tx, bucket, key, versionID string, withInline bool) (*Resolved, error) {
	if versionID == "" {
		r, err := tx.Resolve(ctx, bucket, key, withInline)
		if !errors.Is(err, store.ErrNoSuchKey) {
			return r, err
		}
		// One statement on a miss, as before versioning: the bucket's
		// existence and the latest delete marker.
		m, merr := tx.LatestMarker(ctx, bucket, key)
		if merr != nil {
			return nil, merr
		}
		if m != nil {
			return &Resolved{Info: *m}, err
		}
		return nil, err
	}
	if err := store.CheckVersionID(versionID); err != nil {
		return nil, err
	}
	r, err := tx.ResolveVersion(ctx, bucket, key, versionID, withInline)
	if errors.Is(err, store.ErrNoSuchVersion) {
		if berr := tx.BucketExists(ctx, bucket); berr != nil {
			return nil, berr
		}
	}
	if err == nil && r.Info.DeleteMarker {
		return r, fmt.Errorf("version %s: %w", versionID, store.ErrDeleteMarker)
	}
	return r, err
}
