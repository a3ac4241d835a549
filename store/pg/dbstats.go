package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AppName is the application_name of the engine's pool; the dedicated
// sessions' roles start with it too ("s3gate-pins", ...), so that
// pg_stat_activity tells the gateways' sessions apart.
const AppName = "s3gate"

// storeTables are the tables whose size and vacuum state the metrics
// export: the content tables first (pg_largeobject holds pglo's bytes).
var storeTables = []string{"blob_chunks", "pg_largeobject", "blobs", "objects", "object_parts", "object_versions", "version_parts", "upload_parts", "uploads"}

// TableStats is the size and vacuum state of one table.
type TableStats struct {
	Table                             string
	MainBytes, ToastBytes, IndexBytes int64
	LiveTuples, DeadTuples            int64
}

// DBStats is what PostgreSQL says about the store's health beside its
// content: how old the oldest open transaction of a gateway session is (it
// holds back vacuum everywhere) and each table's size and dead tuples.
type DBStats struct {
	OldestXactSeconds float64
	Tables            []TableStats
}

// DBStats reads pg_stat_activity, the relation sizes and
// pg_stat_all_tables: catalog lookups, no table scans.
func (e *Engine) DBStats(ctx context.Context) (DBStats, error) {
	var st DBStats
	if err := e.pool.QueryRow(ctx, `SELECT coalesce(extract(epoch FROM max(clock_timestamp() - xact_start)), 0)::float8
		FROM pg_stat_activity WHERE datname = current_database() AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
		  AND (application_name = $1 OR application_name LIKE $1 || '-%')`, AppName).Scan(&st.OldestXactSeconds); err != nil {
		return st, fmt.Errorf("pg: oldest transaction: %w", err)
	}
	rows, err := e.pool.Query(ctx, `SELECT t.name, pg_relation_size(c.oid), coalesce(pg_relation_size(nullif(c.reltoastrelid, 0)), 0),
			pg_indexes_size(c.oid), coalesce(s.n_live_tup, 0), coalesce(s.n_dead_tup, 0)
		FROM unnest($1::text[]) WITH ORDINALITY AS t(name, ord)
		JOIN pg_class c ON c.oid = to_regclass(t.name)
		LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid
		ORDER BY t.ord`, storeTables)
	if err != nil {
		return st, fmt.Errorf("pg: table stats: %w", err)
	}
	st.Tables, err = pgx.CollectRows(rows, pgx.RowToStructByPos[TableStats])
	if err != nil {
		return st, fmt.Errorf("pg: table stats: %w", err)
	}
	return st, nil
}
