package embedded

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one versioned schema step.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. File names are
// NNNN_name.sql, as in store/pg.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration %q: want NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: bad version %q", name, num)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %q and %q share version %d", other, name, v)
		}
		seen[v] = name
		b, err := migrationFS.ReadFile("migrations/" + name)
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

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
		known = ms[len(ms)-1].version
	}
	if applied > known {
		return fmt.Errorf("migrate: schema version %d is newer than this binary's %d", applied, known)
	}
	for _, m := range ms {
		if m.version <= applied {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.name, mapErr(err))
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, toMicros(now())); err != nil {
			return fmt.Errorf("migrate: record %s: %w", m.name, mapErr(err))
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
		known = ms[len(ms)-1].version
	}
	if err := e.rdb.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return 0, known, fmt.Errorf("embedded: schema version: %w", mapErr(err))
	}
	return applied, known, nil
}
