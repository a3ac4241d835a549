package pg

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store/schema"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLockKey is the transaction-level advisory lock that serializes
// schema changes across instances starting at once.
var migrationLockKey = fleet.MigrationLockKey()

// migrations returns the embedded migrations in version order.
func migrations() ([]schema.Migration, error) { return schema.Load(migrationFS, "migrations") }

// Migrate brings the schema of the database at databaseURL up to date. It is
// safe to call from several instances at once: everything happens in one
// transaction under a transaction-level advisory lock, so a second caller
// waits and then finds nothing left to do; a failed migration leaves the
// schema as it was.
func Migrate(ctx context.Context, databaseURL string) error {
	// The outcome is decided by COMMIT; a failed close only loses the socket.
	var merr error
	if err := withConn(ctx, databaseURL, func(conn *pgx.Conn) error { merr = migrateConn(ctx, conn); return nil }); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return merr
}

func migrateConn(ctx context.Context, conn *pgx.Conn) (err error) {
	ms, err := migrations()
	if err != nil {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, rollback(ctx, tx))
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    int PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		return fmt.Errorf("migrate: schema_migrations: %w", err)
	}
	rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("migrate: applied versions: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return fmt.Errorf("migrate: applied versions: %w", err)
	}
	done := map[int]bool{}
	latest := 0
	for _, v := range applied {
		done[v] = true
		latest = max(latest, v)
	}
	for _, m := range ms {
		if done[m.Version] {
			continue
		}
		if m.Version < latest {
			return fmt.Errorf("migrate: %s is older than applied version %d but was never applied", m.Name, latest)
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return fmt.Errorf("migrate: record %s: %w", m.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// knownVersion is the highest migration version this binary knows.
func knownVersion() (int, error) {
	ms, err := migrations()
	if err != nil {
		return 0, err
	}
	return ms[len(ms)-1].Version, nil
}

// SchemaVersion returns the highest applied migration version (0 if none),
// and the highest version this binary knows.
func SchemaVersion(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (applied, known int, err error) {
	if known, err = knownVersion(); err != nil {
		return 0, 0, err
	}
	if err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return 0, known, fmt.Errorf("schema version: %w", err)
	}
	return applied, known, nil
}

// AppliedMigration is a row of schema_migrations.
type AppliedMigration struct {
	Version   int
	Name      string
	AppliedAt time.Time
}

// MigrationState compares the database's applied migrations with the ones
// this binary knows (`s3gate migrate --status`).
type MigrationState struct {
	Applied []AppliedMigration
	Known   []schema.Migration
	// Pending are known and not applied: Migrate would apply them.
	Pending []schema.Migration
	// Unknown are applied and not known: the schema is newer than this
	// binary (a newer binary migrated it).
	Unknown []AppliedMigration
}

// MigrationStatus reads the state of the schema without changing anything;
// a database never migrated has no applied migration.
func MigrationStatus(ctx context.Context, databaseURL string) (MigrationState, error) {
	var st MigrationState
	known, err := migrations()
	if err != nil {
		return st, err
	}
	st.Known = known
	err = withConn(ctx, databaseURL, func(conn *pgx.Conn) error {
		var exists bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil || !exists {
			return err
		}
		rows, err := conn.Query(ctx, `SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
		if err != nil {
			return err
		}
		st.Applied, err = pgx.CollectRows(rows, pgx.RowToStructByPos[AppliedMigration])
		return err
	})
	if err != nil {
		return st, fmt.Errorf("migration status: %w", err)
	}
	applied, knownV := map[int]bool{}, map[int]bool{}
	for _, a := range st.Applied {
		applied[a.Version] = true
	}
	for _, m := range known {
		knownV[m.Version] = true
		if !applied[m.Version] {
			st.Pending = append(st.Pending, m)
		}
	}
	for _, a := range st.Applied {
		if !knownV[a.Version] {
			st.Unknown = append(st.Unknown, a)
		}
	}
	return st, nil
}
