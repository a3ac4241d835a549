package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
)

// The reads of fsck on PostgreSQL (package fsck): blob rows, inline bytes,
// references, and content kept in the database (large objects, chunk rows),
// each read in short statements (no transaction held across a blob).

// TotalBlobBytes is the sum of every blob's size.
func (g *GC) TotalBlobBytes(ctx context.Context) (int64, error) {
	var n int64
	if err := g.db.QueryRow(ctx, `SELECT coalesce(sum(size), 0)::bigint FROM blobs`).Scan(&n); err != nil {
		return 0, fmt.Errorf("total size: %w", err)
	}
	return n, nil
}

// Blobs lists blob rows with ids above after, at most limit.
func (g *GC) Blobs(ctx context.Context, after int64, limit int) ([]store.StoredBlob, error) {
	rows, err := g.db.Query(ctx, `SELECT id, sha256, size, tier, lo_oid FROM blobs WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	bs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.StoredBlob, error) {
		var b store.StoredBlob
		err := row.Scan(&b.ID, &b.SHA256, &b.Size, &b.Tier, &b.LargeObject)
		return b, err
	})
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", err)
	}
	return bs, nil
}

// BlobExists reports whether blob id has a row.
func (g *GC) BlobExists(ctx context.Context, id int64) (bool, error) {
	return (&txn{q: g.db}).BlobExists(ctx, id)
}

// Inline returns the inline bytes of blob id; ok is false if the row is gone.
func (g *GC) Inline(ctx context.Context, id int64) (data []byte, ok bool, err error) {
	return (&txn{q: g.db}).InlineData(ctx, id)
}

// References finds references without their blob row (the foreign keys
// forbid them; a damaged or hand-edited database may still have them) and
// objects whose size disagrees with their content.
func (g *GC) References(ctx context.Context) (missing, sizes []store.Finding, err error) {
	queries := []struct {
		out *[]store.Finding
		sql string
	}{
		{&missing, `SELECT 'object ' || o.bucket || '/' || o.key, format('blob %s: no blob row', o.blob_id) FROM objects o
			WHERE o.blob_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = o.blob_id)`},
		{&missing, `SELECT 'object ' || p.bucket || '/' || p.key || ' part ' || p.part_number, format('blob %s: no blob row', p.blob_id)
			FROM object_parts p WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = p.blob_id)`},
		{&missing, `SELECT 'version ' || v.bucket || '/' || v.key || ' ' || v.version_id, format('blob %s: no blob row', v.blob_id)
			FROM object_versions v WHERE v.blob_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = v.blob_id)`},
		{&missing, `SELECT 'version ' || v.bucket || '/' || v.key || ' ' || v.version_id || ' part ' || p.part_number,
			format('blob %s: no blob row', p.blob_id)
			FROM version_parts p JOIN object_versions v ON v.seq = p.seq WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = p.blob_id)`},
		{&missing, `SELECT 'upload ' || u.upload_id || ' part ' || u.part_number, format('blob %s: no blob row', u.blob_id)
			FROM upload_parts u WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = u.blob_id)`},
		{&sizes, `SELECT 'object ' || o.bucket || '/' || o.key, format('object size %s, blob size %s', o.size, b.size)
			FROM objects o JOIN blobs b ON b.id = o.blob_id WHERE o.size <> b.size`},
		{&sizes, `SELECT 'object ' || p.bucket || '/' || p.key || ' part ' || p.part_number, format('part size %s, blob size %s', p.size, b.size)
			FROM object_parts p JOIN blobs b ON b.id = p.blob_id WHERE p.size <> b.size`},
		{&sizes, `SELECT 'object ' || o.bucket || '/' || o.key,
			format('object size %s with %s parts, parts sum to %s in %s rows', o.size, o.part_count,
			       coalesce(sum(p.size), 0), count(p.part_number))
			FROM objects o LEFT JOIN object_parts p ON p.bucket = o.bucket AND p.key = o.key
			WHERE o.part_count > 0 GROUP BY o.bucket, o.key, o.size, o.part_count
			HAVING coalesce(sum(p.size), 0) <> o.size OR count(p.part_number) <> o.part_count`},
	}
	for _, q := range queries {
		rows, err := g.db.Query(ctx, q.sql)
		if err != nil {
			return nil, nil, fmt.Errorf("references: %w", err)
		}
		fs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Finding, error) {
			var f store.Finding
			err := row.Scan(&f.Where, &f.Detail)
			return f, err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("references: %w", err)
		}
		*q.out = append(*q.out, fs...)
	}
	return missing, sizes, nil
}

// LargeObjectExists reports whether large object oid exists.
func (g *GC) LargeObjectExists(ctx context.Context, oid uint32) (bool, error) {
	var ok bool
	if err := g.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_largeobject_metadata WHERE oid = $1)`, oid).Scan(&ok); err != nil {
		return false, fmt.Errorf("look up large object: %w", err)
	}
	return ok, nil
}

// ReadLargeObject reads up to n bytes of large object oid at off (lo_get, in
// autocommit).
func (g *GC) ReadLargeObject(ctx context.Context, oid uint32, off int64, n int32) ([]byte, error) {
	var got []byte
	if err := g.db.QueryRow(ctx, `SELECT lo_get($1, $2, $3)`, oid, off, n).Scan(&got); err != nil {
		return nil, fmt.Errorf("lo_get %d at %d: %w", oid, off, err)
	}
	return got, nil
}

// ChunkSizes lists the chunk rows of blob id: their seq and length, by seq.
func (g *GC) ChunkSizes(ctx context.Context, id int64) (seqs []int32, sizes []int64, err error) {
	rows, err := g.db.Query(ctx, `SELECT seq, octet_length(data) FROM blob_chunks WHERE blob_id = $1 ORDER BY seq`, id)
	if err != nil {
		return nil, nil, fmt.Errorf("list chunks: %w", err)
	}
	var seq int32
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&seq, &n}, func() error {
		seqs, sizes = append(seqs, seq), append(sizes, n)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list chunks: %w", err)
	}
	return seqs, sizes, nil
}

// Chunk reads chunk seq of blob id; ok is false if the row is gone.
func (g *GC) Chunk(ctx context.Context, id int64, seq int32) (data []byte, ok bool, err error) {
	err = g.db.QueryRow(ctx, `SELECT data FROM blob_chunks WHERE blob_id = $1 AND seq = $2`, id, seq).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read chunk %d: %w", seq, err)
	}
	return data, true, nil
}
