package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
)

// Ready reports whether the engine can serve: the database answers, the schema
// is at the version this binary needs, and the local media (large = local)
// accepts durable writes. The error names the failing part first ("database:",
// "schema:", "storage:") so that /readyz can answer a short reason.
func (e *Engine) Ready(ctx context.Context) error {
	if err := e.Ping(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	applied, known, err := SchemaVersion(ctx, e.pool)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if applied < known {
		// Open refuses the same: an older schema lacks what this binary uses.
		return fmt.Errorf("schema: version %d applied, this binary needs %d", applied, known)
	}
	// A newer schema, migrated under this running instance, is ready:
	// migrations expand first and contract only once no older binary runs
	// (docs/operations.md), so what this instance uses is still there. Open
	// still refuses to start on it: that is where a contracted schema would
	// be met.
	if e.media != nil {
		if err := e.media.Writable(ctx); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
	}
	return nil
}

// BlobStats counts blobs and bytes by tier and the logical and referenced
// bytes of objects, in one read-only snapshot so that the figures agree. Every
// query scans its table: callers cache the result (the metrics collector does).
func (e *Engine) BlobStats(ctx context.Context) (st store.BlobStats, err error) {
	st.Tiers = map[string]store.TierStats{store.TierInline: {}, e.large: {}}
	err = pgx.BeginTxFunc(ctx, e.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT tier, count(*), coalesce(sum(size), 0)::bigint FROM blobs GROUP BY tier`)
		if err != nil {
			return fmt.Errorf("blobs by tier: %w", err)
		}
		var tier string
		var ts store.TierStats
		if _, err := pgx.ForEachRow(rows, []any{&tier, &ts.Blobs, &ts.Bytes}, func() error {
			st.Tiers[tier] = ts
			return nil
		}); err != nil {
			return fmt.Errorf("blobs by tier: %w", err)
		}
		if err := tx.QueryRow(ctx, `SELECT
			(SELECT coalesce(sum(b.size), 0) FROM blobs b
			  WHERE EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
			     OR EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)
			     OR EXISTS (SELECT 1 FROM object_versions v WHERE v.blob_id = b.id)
			     OR EXISTS (SELECT 1 FROM version_parts vp WHERE vp.blob_id = b.id))::bigint`,
		).Scan(&st.ReferencedBytes); err != nil {
			return fmt.Errorf("object bytes: %w", err)
		}
		if st.Buckets, err = bucketUsage(ctx, tx, ""); err != nil {
			return fmt.Errorf("bucket usage: %w", err)
		}
		st.LogicalBytes = store.LogicalBytesOf(st.Buckets)
		return nil
	})
	if err != nil {
		return store.BlobStats{}, fmt.Errorf("pg: blob stats: %w", err)
	}
	return st, nil
}
