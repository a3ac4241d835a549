package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// blobLoc is where a manifest entry's content lives, as the resolving query
// aggregates it.
type blobLoc struct {
	ID    int64   `json:"b"`
	Tier  string  `json:"t"`
	LOOID *uint32 `json:"o"`
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

func (b blobLoc) loc(size int64) protocol.BlobLoc {
	l := protocol.BlobLoc{ID: b.ID, Tier: b.Tier, Size: size}
	if b.LOOID != nil {
		l.Ref = int64(*b.LOOID)
	}
	return l
}

// resolveObject reads the object, its blob or its manifest with its part
// blobs, in one statement (one snapshot): the current object when versionID
// is nil, else that version, current or not. Inline bytes of a single-blob
// object come with it when withInline. forShare keeps the current row (and
// so its manifest) from changing until the caller's transaction ends.
func resolveObject(ctx context.Context, q rowQuerier, bucket, key string, versionID *string, withInline, forShare bool) (*protocol.Resolved, error) {
	if versionID != nil {
		return resolveRow(ctx, q, bucket, key, versionID, withInline, forShare, true)
	}
	// The current object is nearly always a single blob: its statement
	// leaves the manifest out, whose subplan PostgreSQL would initialize
	// (and whose tables it would lock) on every execution, run or not. A
	// multipart object is then resolved again, manifest included, so that
	// the answer still comes from one statement (one snapshot).
	r, partCnt, err := resolveRowCount(ctx, q, bucket, key, nil, withInline, forShare, false)
	if err != nil || partCnt == 0 {
		return r, err
	}
	return resolveRow(ctx, q, bucket, key, nil, withInline, forShare, true)
}

// rowQuerier runs a statement of one row: the pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// resolveRow is one resolving statement; withManifest aggregates a
// multipart object's manifest into it.
func resolveRow(ctx context.Context, q rowQuerier, bucket, key string, versionID *string, withInline, forShare, withManifest bool) (*protocol.Resolved, error) {
	r, _, err := resolveRowCount(ctx, q, bucket, key, versionID, withInline, forShare, withManifest)
	return r, err
}

// resolveSQL holds the resolving statement's texts, built once, by
// [versioned][forShare][withManifest]: a GET builds no SQL.
var resolveSQL = func() (t [2][2][2]string) {
	for v := range 2 {
		for f := range 2 {
			for m := range 2 {
				t[v][f][m] = resolveQuery(v == 1, f == 1, m == 1)
			}
		}
	}
	return t
}()

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// resolveQuery is the resolving statement: $1 bucket, $2 key, $3 whether to
// return inline bytes, $4 the version id when versioned.
func resolveQuery(versioned, forShare, withManifest bool) string {
	// A version is the current row when its id matches, else a noncurrent
	// row (seq > 0) with the manifest in version_parts.
	from := `objects o LEFT JOIN blobs b ON b.id = o.blob_id WHERE o.bucket = $1 AND o.key = $2`
	if forShare {
		from += ` FOR SHARE OF o`
	}
	cols := `o.version_id, false, 0::bigint`
	if versioned {
		from = `(SELECT bucket, key, blob_id, size, etag, meta, checksum, part_count, last_modified, version_id,
				false AS delete_marker, 0::bigint AS seq FROM objects WHERE bucket = $1 AND key = $2 AND version_id = $4
			UNION ALL SELECT bucket, key, blob_id, size, etag, meta, checksum, part_count, last_modified, version_id,
				delete_marker, seq FROM object_versions WHERE bucket = $1 AND key = $2 AND version_id = $4) o
			LEFT JOIN blobs b ON b.id = o.blob_id`
		cols = `o.version_id, o.delete_marker, o.seq`
	}
	const agg = `SELECT json_agg(json_build_object('n', p.part_number, 's', p.size, 'a', p.start_offset,
					'e', p.etag, 'c', p.checksum,
					'l', json_build_object('b', pb.id, 't', pb.tier, 'o', pb.lo_oid::bigint)) ORDER BY p.part_number)`
	manifest := `(` + agg + ` FROM object_parts p JOIN blobs pb ON pb.id = p.blob_id
				WHERE p.bucket = o.bucket AND p.key = o.key)`
	if versioned {
		manifest = `CASE WHEN o.seq = 0 THEN ` + manifest + ` ELSE (` + agg + ` FROM version_parts p
				JOIN blobs pb ON pb.id = p.blob_id WHERE p.seq = o.seq) END`
	}
	manifest = `CASE WHEN o.part_count > 0 THEN ` + manifest + ` END`
	if !withManifest {
		manifest = `NULL::json`
	}
	// The checksum's fields come as text: no JSON to decode per GET.
	return `SELECT o.size, o.etag, o.meta, coalesce(o.checksum->>'alg', ''), coalesce(o.checksum->>'val', ''),
			coalesce(o.checksum->>'type', ''), o.part_count, o.last_modified,
			o.blob_id, b.tier, b.lo_oid, CASE WHEN $3 THEN b.inline_data END,
			` + manifest + `, ` + cols + `
		FROM ` + from
}

// resolveRowCount is resolveRow that also returns the object's part count;
// without withManifest a multipart object's Resolved has no parts (the
// caller resolves it again).
func resolveRowCount(ctx context.Context, q rowQuerier, bucket, key string, versionID *string, withInline, forShare, withManifest bool) (*protocol.Resolved, int, error) {
	args := []any{bucket, key, withInline}
	if versionID != nil {
		args = append(args, *versionID)
	}
	var (
		r       protocol.Resolved
		blobID  *int64
		tier    *string
		oid     *uint32
		inline  []byte
		meta    []byte
		parts   []partRow
		partCnt int
		lm      time.Time
	)
	err := q.QueryRow(ctx, resolveSQL[btoi(versionID != nil)][btoi(forShare)][btoi(withManifest)], args...).Scan(
		&r.Info.Size, &r.Info.ETag, &meta, &r.Info.Checksum.Algorithm, &r.Info.Checksum.Value,
		&r.Info.Checksum.Type, &partCnt, &lm,
		&blobID, &tier, &oid, &inline, &parts, &r.Info.VersionID, &r.Info.DeleteMarker, &r.Seq)
	if errors.Is(err, pgx.ErrNoRows) {
		if versionID != nil {
			return nil, 0, store.ErrNoSuchVersion
		}
		return nil, 0, store.ErrNoSuchKey
	}
	if err != nil {
		return nil, 0, fmt.Errorf("resolve object: %w", mapErr(err))
	}
	// Most objects have no metadata: "{}" needs no decoding.
	if len(meta) > 0 && string(meta) != "{}" {
		if err := json.Unmarshal(meta, &r.Info.Meta); err != nil {
			return nil, 0, fmt.Errorf("resolve object: meta: %w", err)
		}
	}
	r.Info.Bucket, r.Info.Key, r.Info.LastModified = bucket, key, lm
	if r.Info.DeleteMarker {
		r.Info.Checksum = store.Checksum{} // a marker answers none
		return &r, 0, nil
	}
	if partCnt > 0 && !withManifest {
		return &r, partCnt, nil
	}
	if partCnt > 0 {
		if len(parts) != partCnt {
			return nil, 0, fmt.Errorf("resolve object: manifest has %d parts, object says %d", len(parts), partCnt)
		}
		r.Parts = make([]protocol.PartLoc, len(parts))
		r.Info.Parts = make([]store.PartInfo, len(parts))
		for i, p := range parts {
			r.Parts[i] = protocol.PartLoc{Number: p.Number, Start: p.Start, Size: p.Size, Blob: p.Blob.loc(p.Size)}
			pi := store.PartInfo{Number: p.Number, Size: p.Size, ETag: p.ETag, LastModified: lm}
			if p.Checksum != nil {
				pi.Checksum = *p.Checksum
			}
			r.Info.Parts[i] = pi
		}
		return &r, partCnt, nil
	}
	if blobID == nil || tier == nil {
		return nil, 0, errors.New("resolve object: object row without blob")
	}
	b := blobLoc{ID: *blobID, Tier: *tier, LOOID: oid}.loc(r.Info.Size)
	b.Inline = inline
	r.Blob = &b
	return &r, 0, nil
}

// openContent opens n bytes at off of a blob outside the row, with the
// content engine of its tier.
func (e *Engine) openContent(ctx context.Context, b protocol.BlobLoc, off, n int64) (io.ReadCloser, error) {
	switch b.Tier {
	case store.TierLocal:
		if e.media == nil {
			return nil, fmt.Errorf("%w: blob %d is on local media, which this instance has not configured", store.ErrUnavailable, b.ID)
		}
		return e.media.Open(ctx, b.ID, off, n)
	case store.TierPGLO, store.TierPGChunks:
		return contentFor(b.Tier).Open(ctx, e.pool, b.ID, b.Ref, off, n)
	}
	return nil, fmt.Errorf("blob %d: unknown tier %q", b.ID, b.Tier)
}
