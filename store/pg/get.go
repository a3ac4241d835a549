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

// proto is the protocol's view of a resolved object.
func (r *resolved) proto() *protocol.Resolved {
	p := &protocol.Resolved{Info: r.info}
	if r.blob != nil {
		b := r.blob.proto()
		b.Size = r.info.Size
		p.Blob = &b
		return p
	}
	p.Parts = make([]protocol.PartLoc, len(r.parts))
	for i, pr := range r.parts {
		p.Parts[i] = protocol.PartLoc{Number: pr.Number, Start: pr.Start, Size: pr.Size, Blob: pr.Blob.proto()}
		p.Parts[i].Blob.Size = pr.Size
	}
	return p
}

func (b blobLoc) proto() protocol.BlobLoc {
	l := protocol.BlobLoc{ID: b.ID, Tier: b.Tier, Inline: b.Inline}
	if b.LOOID != nil {
		l.Ref = int64(*b.LOOID)
	}
	return l
}

// pinAttempts bounds the resolutions of a copy source (see
// protocol.ResolveAttempts).
const pinAttempts = protocol.ResolveAttempts

// GetObject implements store.ObjectStore through the protocol's GET.
func (e *Engine) GetObject(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (store.ObjectInfo, *store.ByteRange, store.Reader, error) {
	return e.reads().Get(ctx, bucket, key, opts, head)
}

// reads is this engine's GET protocol: its pins are a pin session's
// advisory locks, which can be lost.
func (e *Engine) reads() *protocol.Reads {
	g := &protocol.Reads{Engine: "pg", Dialect: readDialect{e}, PinsLosable: true, Gov: e.gov}
	if e.pins != nil {
		g.Pin = func(ctx context.Context, id int64) (fleet.Pin, error) {
			p, err := e.pins.Acquire(ctx, id)
			if err != nil {
				return nil, mapPinErr(err)
			}
			return p, nil
		}
	}
	return g
}

// openStream returns the guarded reader of n bytes from start of a resolved
// object (see protocol.Reads.Open).
func (e *Engine) openStream(ctx context.Context, r *resolved, start, n int64, gov *throttle.BandwidthGovernor) (store.Reader, bool, error) {
	return e.reads().Open(ctx, r.proto(), start, n, gov)
}

// readDialect is the engine's statements for the GET protocol.
type readDialect struct{ e *Engine }

func (d readDialect) Resolve(ctx context.Context, bucket, key string, withInline bool) (*protocol.Resolved, error) {
	r, err := resolveObject(ctx, d.e.pool, bucket, key, withInline, false)
	if err != nil {
		return nil, err
	}
	return r.proto(), nil
}

func (d readDialect) BucketExists(ctx context.Context, bucket string) error {
	return d.e.bucketExists(ctx, d.e.pool, bucket)
}

func (d readDialect) BlobExists(ctx context.Context, id int64) (bool, error) {
	return d.e.blobsExist(ctx, []int64{id})
}

func (d readDialect) OpenBlob(ctx context.Context, b protocol.BlobLoc, off, n int64) (io.ReadCloser, error) {
	return d.e.openBlob(ctx, b, off, n)
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

// openBlob opens n bytes at off of one blob.
func (e *Engine) openBlob(ctx context.Context, b protocol.BlobLoc, off, n int64) (io.ReadCloser, error) {
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
		return ce.Open(ctx, e.pool, b.ID, b.Ref, off, n)
	}
	return nil, fmt.Errorf("blob %d: unknown tier %q", b.ID, b.Tier)
}
