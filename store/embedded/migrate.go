package embedded

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/s3gate/s3gate/store/schema"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
func migrations() ([]schema.Migration, error) { return schema.Load(migrationFS, "migrations") }

// migrate applies pending migrations in one write transaction (BEGIN
// IMMEDIATE holds SQLite's write lock, so a second process opening the same
// directory waits and then finds nothing left to do; a failed step leaves the
// schema as it was). A database newer than this binary is refused.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", mapErr(err))
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: version table: %w", mapErr(err))
	}
	var applied int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return fmt.Errorf("migrate: read version: %w", mapErr(err))
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].Version
	}
	if applied > known {
		return fmt.Errorf("migrate: schema version %d is newer than this binary's %d", applied, known)
	}
	for _, m := range ms {
		if m.Version <= applied {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, mapErr(err))
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, toMicros(now())); err != nil {
			return fmt.Errorf("migrate: record %s: %w", m.Name, mapErr(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", mapErr(err))
	}
	return nil
}

// SchemaVersion returns the applied schema version and the newest version this
// binary knows (for /readyz).
func (e *Engine) SchemaVersion(ctx context.Context) (applied, known int, err error) {
	ms, err := migrations()
	if err != nil {
		return 0, 0, err
	}
	if len(ms) > 0 {
		known = ms[len(ms)-1].Version
	}
	if err := e.rq.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return 0, known, fmt.Errorf("embedded: schema version: %w", mapErr(err))
	}
	return applied, known, nil
}
