package protocol

import (
	"context"
	"errors"
	"fmt"
	"io"

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
	// metadata; nil means the dialect reads it when the stream reaches it.
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

// ReadDialect is what a metadata engine contributes to GET and HEAD: its
// statements. It decides no step; Reads orders them.
type ReadDialect interface {
	// Resolve reads the object with its blob or manifest in one snapshot,
	// with the inline content of a single-blob object when withInline. A
	// missing object is store.ErrNoSuchKey.
	Resolve(ctx context.Context, bucket, key string, withInline bool) (*Resolved, error)
	// BucketExists is nil for an existing bucket, else store.ErrNoSuchBucket.
	BucketExists(ctx context.Context, bucket string) error
	// BlobExists reports, with a fresh statement (not a resolving snapshot),
	// whether the blob row still exists.
	BlobExists(ctx context.Context, id int64) (bool, error)
	// OpenBlob opens n bytes at off of a blob. An inline blob without its
	// bytes is read now from its row (no pin needed: exact bytes or no row;
	// no row wraps store.ErrUnavailable and ErrVanished).
	OpenBlob(ctx context.Context, b BlobLoc, off, n int64) (io.ReadCloser, error)
}

// Reads is the GET protocol of one engine: resolve → conditions → range →
// pin → re-check → guarded stream.
type Reads struct {
	// Engine names the engine in errors.
	Engine  string
	Dialect ReadDialect
	// Pin pins a blob for a stream; nil means no pinning (tools and tests
	// that run without GC). Its errors wrap store's sentinels (a full pin
	// table is store.ErrSlowDown).
	Pin func(ctx context.Context, id int64) (fleet.Pin, error)
	// PinsLosable says the pins can be lost (a pin session on PostgreSQL):
	// then answers that stream nothing (HEAD, 304, 412, 416) prove that the
	// content they describe can be protected, and streams check their pin
	// around every read even without a governor. In-process pins are never
	// lost.
	PinsLosable bool
	// Gov paces GET streams; nil means unpaced.
	Gov *throttle.BandwidthGovernor
}

// Get implements store.ObjectStore's GetObject. Metadata (with inline bytes)
// comes from one snapshot and needs no pin; the first blob the response
// streams is pinned and re-checked in a fresh statement before the headers
// go out; later blobs (the parts of a multipart object) are pinned and
// re-checked one at a time as the stream reaches them, so a stream holds one
// pin however many parts it spans. The reader is paced by the governor and
// guarded by its pin (before the first read, every quantum and at EOF);
// Close releases it.
func (g *Reads) Get(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (store.ObjectInfo, *store.ByteRange, store.Reader, error) {
	for attempt := 1; ; attempt++ {
		info, rng, rd, vanished, err := g.getOnce(ctx, bucket, key, opts, head)
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
func (g *Reads) getOnce(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (
	info store.ObjectInfo, rng *store.ByteRange, rd store.Reader, vanished bool, err error) {
	fail := func(err error) error {
		if head {
			return fmt.Errorf("head %s/%s: %w", bucket, key, err)
		}
		return fmt.Errorf("get %s/%s: %w", bucket, key, err)
	}
	r, err := g.Resolve(ctx, bucket, key, !head)
	if err != nil {
		return store.ObjectInfo{}, nil, nil, false, fail(err)
	}
	if cerr := store.EvalConditions(opts.Cond, r.Info.ETag, r.Info.LastModified); cerr != nil {
		if err := g.proveProtection(ctx, r.Segments(0, r.Info.Size)); err != nil {
			return r.Info, nil, nil, false, fail(err)
		}
		return r.Info, nil, nil, false, cerr
	}
	rng, err = r.SelectRange(opts)
	if err != nil {
		if errors.Is(err, store.ErrInvalidRange) {
			if perr := g.proveProtection(ctx, r.Segments(0, r.Info.Size)); perr != nil {
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
		if err := g.proveProtection(ctx, r.Segments(start, n)); err != nil {
			return r.Info, nil, nil, false, fail(err)
		}
		return r.Info, rng, nil, false, nil
	}
	rd, vanished, err = g.Open(ctx, r, start, n, g.Gov)
	if err != nil {
		return r.Info, nil, nil, false, fail(err)
	}
	if vanished {
		return r.Info, nil, nil, true, nil
	}
	return r.Info, rng, rd, false, nil
}

// Resolve resolves an object; a miss is store.ErrNoSuchBucket when the bucket
// is missing, else store.ErrNoSuchKey.
func (g *Reads) Resolve(ctx context.Context, bucket, key string, withInline bool) (*Resolved, error) {
	r, err := g.Dialect.Resolve(ctx, bucket, key, withInline)
	if errors.Is(err, store.ErrNoSuchKey) {
		if berr := g.Dialect.BucketExists(ctx, bucket); berr != nil {
			return nil, berr
		}
	}
	return r, err
}

// Open returns the guarded reader of n bytes from start of a resolved
// object, its first streamed blob pinned and re-checked (vanished: that blob
// is gone, resolve again). gov paces it if not nil (a server-side copy passes
// nil: it is not a client stream).
func (g *Reads) Open(ctx context.Context, r *Resolved, start, n int64, gov *throttle.BandwidthGovernor) (store.Reader, bool, error) {
	return g.OpenSegments(ctx, r.Segments(start, n), gov)
}

// OpenSegments is Open of the spans segs of a resolved object.
func (g *Reads) OpenSegments(ctx context.Context, segs []Segment, gov *throttle.BandwidthGovernor) (store.Reader, bool, error) {
	var first fleet.Pin
	firstID, needs := FirstPinned(segs, g.segBlob)
	if needs {
		var err error
		// The headers go out before the first read: a pin lost by now must
		// be a 503, not a truncated 200.
		first, err = g.pinning().PinFirst(ctx, firstID)
		if errors.Is(err, ErrVanished) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	stream := NewPinnedSegments(ctx, g.Engine, segs, g.segBlob, g.openSegment, g.pinning(), first, firstID)
	mode := GuardWithGovernor
	if g.PinsLosable {
		mode = GuardAlways
	}
	return GuardedStream(ctx, stream, gov, mode), false, nil
}

// segBlob says which blob a segment streams and whether it needs a pin:
// inline content is read in one statement from the blob row itself (exact
// bytes or no row), so only content outside the row is pinned.
func (g *Reads) segBlob(s Segment) (int64, bool) {
	return s.Blob.ID, g.Pin != nil && s.Blob.Tier != store.TierInline
}

func (g *Reads) openSegment(ctx context.Context, s Segment) (io.ReadCloser, error) {
	return g.Dialect.OpenBlob(ctx, s.Blob, s.Off, s.N)
}

// pinning is how this engine's streams pin and re-check blobs.
func (g *Reads) pinning() Pinning {
	return Pinning{Acquire: g.Pin, Exists: g.Dialect.BlobExists}
}

// proveProtection proves, for an answer that streams no content (HEAD, 304,
// 412, 416), that the content it describes could be protected now: it pins
// the first blob that a stream would pin, checks the pin and releases it. One
// pin proves the pin session valid without taking a lock per part. Pins that
// cannot be lost need no proof.
func (g *Reads) proveProtection(ctx context.Context, segs []Segment) error {
	if !g.PinsLosable {
		return nil
	}
	id, ok := FirstPinned(segs, g.segBlob)
	if !ok {
		return nil
	}
	p, err := g.Pin(ctx, id)
	if err != nil {
		return err
	}
	defer p.Release()
	return PinSet{p}.Check()
}
