package embedded

import (
	"context"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// The reads of fsck on the embedded engine (package fsck).

// TotalBlobBytes is the sum of every blob's size.
func (g *GC) TotalBlobBytes(ctx context.Context) (int64, error) {
	var n int64
	if err := g.e.rq.QueryRowContext(ctx, `SELECT coalesce(sum(size), 0) FROM blobs`).Scan(&n); err != nil {
		return 0, fmt.Errorf("total size: %w", mapErr(err))
	}
	return n, nil
}

// Blobs lists blob rows with ids above after, at most limit.
func (g *GC) Blobs(ctx context.Context, after int64, limit int) ([]store.StoredBlob, error) {
	rows, err := g.e.rq.QueryContext(ctx, `SELECT id, sha256, size, tier FROM blobs WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list blobs: %w", mapErr(err))
	}
	defer rows.Close()
	var out []store.StoredBlob
	for rows.Next() {
		var b store.StoredBlob
		if err := rows.Scan(&b.ID, &b.SHA256, &b.Size, &b.Tier); err != nil {
			return nil, fmt.Errorf("list blobs: %w", mapErr(err))
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list blobs: %w", mapErr(err))
	}
	return out, nil
}

// BlobExists reports whether blob id has a row.
func (g *GC) BlobExists(ctx context.Context, id int64) (bool, error) {
	return txn{q: g.e.rq}.BlobExists(ctx, id)
}

// Inline returns the inline bytes of blob id; ok is false if the row is gone.
func (g *GC) Inline(ctx context.Context, id int64) (data []byte, ok bool, err error) {
	return txn{q: g.e.rq}.InlineData(ctx, id)
}

// References finds references without their blob row (the foreign keys
// forbid them; a damaged database may still hold them) and objects whose
// size disagrees with their content.
func (g *GC) References(ctx context.Context) (missing, sizes []store.Finding, err error) {
	queries := []struct {
		out *[]store.Finding
		sql string
	}{
		{&missing, `SELECT 'object ' || o.bucket || '/' || o.key, printf('blob %d: no blob row', o.blob_id) FROM objects o
			WHERE o.blob_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = o.blob_id)`},
		{&missing, `SELECT 'object ' || p.bucket || '/' || p.key || ' part ' || p.part_number, printf('blob %d: no blob row', p.blob_id)
			FROM object_parts p WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = p.blob_id)`},
		{&missing, `SELECT 'version ' || v.bucket || '/' || v.key || ' ' || v.version_id, printf('blob %d: no blob row', v.blob_id)
			FROM object_versions v WHERE v.blob_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = v.blob_id)`},
		{&missing, `SELECT 'version ' || v.bucket || '/' || v.key || ' ' || v.version_id || ' part ' || p.part_number,
			printf('blob %d: no blob row', p.blob_id)
			FROM version_parts p JOIN object_versions v ON v.seq = p.seq WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = p.blob_id)`},
		{&missing, `SELECT 'upload ' || u.upload_id || ' part ' || u.part_number, printf('blob %d: no blob row', u.blob_id)
			FROM upload_parts u WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = u.blob_id)`},
		{&sizes, `SELECT 'object ' || o.bucket || '/' || o.key, printf('object size %d, blob size %d', o.size, b.size)
			FROM objects o JOIN blobs b ON b.id = o.blob_id WHERE o.size <> b.size`},
		{&sizes, `SELECT 'object ' || p.bucket || '/' || p.key || ' part ' || p.part_number, printf('part size %d, blob size %d', p.size, b.size)
			FROM object_parts p JOIN blobs b ON b.id = p.blob_id WHERE p.size <> b.size`},
		{&sizes, `SELECT 'object ' || o.bucket || '/' || o.key,
			printf('object size %d with %d parts, parts sum to %d in %d rows', o.size, o.part_count, coalesce(sum(p.size), 0), count(p.part_number))
			FROM objects o LEFT JOIN object_parts p ON p.bucket = o.bucket AND p.key = o.key
			WHERE o.part_count > 0 GROUP BY o.bucket, o.key, o.size, o.part_count
			HAVING coalesce(sum(p.size), 0) <> o.size OR count(p.part_number) <> o.part_count`},
	}
	for _, q := range queries {
		rows, err := g.e.rq.QueryContext(ctx, q.sql)
		if err != nil {
			return nil, nil, fmt.Errorf("references: %w", mapErr(err))
		}
		for rows.Next() {
			var f store.Finding
			if err := rows.Scan(&f.Where, &f.Detail); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("references: %w", mapErr(err))
			}
			*q.out = append(*q.out, f)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("references: %w", mapErr(err))
		}
	}
	return missing, sizes, nil
}
