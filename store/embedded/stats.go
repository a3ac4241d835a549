package embedded

import (
	"context"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

// Ready reports whether the engine can serve: the metadata database answers,
// its schema is at the version this binary needs, and the content media
// accepts durable writes. The error names the failing part first
// ("database:", "schema:", "storage:") so that /readyz can answer a short
// reason.
func (e *Engine) Ready(ctx context.Context) error {
	var one int
	if err := e.rq.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("database: %w", mapErr(err))
	}
	applied, known, err := e.SchemaVersion(ctx)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if applied != known {
		return fmt.Errorf("schema: version %d applied, this binary needs %d", applied, known)
	}
	if err := e.media.Writable(ctx); err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	return nil
}

// BlobStats counts blobs and bytes by tier and the logical and referenced
// bytes of objects, in one read snapshot (WAL) so that the figures agree.
// Every query scans its table: callers cache the result.
func (e *Engine) BlobStats(ctx context.Context) (store.BlobStats, error) {
	st := store.BlobStats{Tiers: map[string]store.TierStats{store.TierInline: {}, store.TierLocal: {}}}
	err := e.withRead(ctx, func(tx txQuerier) error {
		rows, err := tx.QueryContext(ctx, `SELECT tier, count(*), coalesce(sum(size), 0) FROM blobs GROUP BY tier`)
		if err != nil {
			return fmt.Errorf("blobs by tier: %w", mapErr(err))
		}
		defer rows.Close()
		for rows.Next() {
			var tier string
			var ts store.TierStats
			if err := rows.Scan(&tier, &ts.Blobs, &ts.Bytes); err != nil {
				return fmt.Errorf("blobs by tier: %w", mapErr(err))
			}
			st.Tiers[tier] = ts
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("blobs by tier: %w", mapErr(err))
		}
		if err := tx.QueryRowContext(ctx, `SELECT
			(SELECT coalesce(sum(b.size), 0) FROM blobs b
			  WHERE EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
			     OR EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)
			     OR EXISTS (SELECT 1 FROM object_versions v WHERE v.blob_id = b.id)
			     OR EXISTS (SELECT 1 FROM version_parts vp WHERE vp.blob_id = b.id))`,
		).Scan(&st.ReferencedBytes); err != nil {
			return fmt.Errorf("object bytes: %w", mapErr(err))
		}
		if st.Buckets, err = bucketUsage(ctx, tx, ""); err != nil {
			return fmt.Errorf("bucket usage: %w", err)
		}
		return nil
	})
	if err != nil {
		return store.BlobStats{}, fmt.Errorf("embedded: blob stats: %w", err)
	}
	st.LogicalBytes = store.LogicalBytesOf(st.Buckets)
	return st, nil
}
