package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// What a read-only instance (a read replica, ADR 013) checks at start-up
// instead of migrating: it never writes, so it must find the schema exactly
// at the version it knows, and content it can serve.

// InRecovery reports whether the server at databaseURL is a hot standby
// (pg_is_in_recovery()): an instance on it can only be read-only.
func InRecovery(ctx context.Context, databaseURL string) (bool, error) {
	var in bool
	err := withConn(ctx, databaseURL, func(conn *pgx.Conn) error {
		// Simple protocol: asked at start-up of every instance, also through
		// a transaction pooler (PIN_MODE=rows), where a prepared statement
		// may already exist on the server connection it lends.
		return conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`, pgx.QueryExecModeSimpleProtocol).Scan(&in)
	})
	if err != nil {
		return false, fmt.Errorf("pg: recovery state: %w", err)
	}
	return in, nil
}

// CheckReplica refuses a database that a read-only instance cannot serve:
// a schema at another version than this binary's (older lacks what it
// reads, newer may have changed it; a replica cannot migrate), or a logical
// replication subscriber holding pglo blobs: large objects live in the
// system catalog pg_largeobject, which logical replication does not carry,
// so their rows arrive without their bytes.
func CheckReplica(ctx context.Context, databaseURL string) error {
	return withConn(ctx, databaseURL, func(conn *pgx.Conn) error {
		var migrated bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&migrated); err != nil {
			return fmt.Errorf("pg: schema version: %w", err)
		}
		applied, known, err := 0, 0, error(nil)
		if migrated {
			applied, known, err = SchemaVersion(ctx, conn)
		} else {
			known, err = knownVersion()
		}
		if err != nil {
			return fmt.Errorf("pg: %w", err)
		}
		if applied != known {
			return fmt.Errorf("pg: schema version %d, this binary knows %d: a read-only instance never migrates; "+
				"run the binary that matches the primary's schema (or migrate the primary)", applied, known)
		}
		var subscriber, pglo bool
		if err := conn.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM pg_subscription s JOIN pg_database d ON d.oid = s.subdbid WHERE d.datname = current_database()),
			EXISTS (SELECT 1 FROM blobs WHERE tier = 'pglo')`).Scan(&subscriber, &pglo); err != nil {
			return fmt.Errorf("pg: replication check: %w", err)
		}
		if subscriber && pglo {
			return fmt.Errorf("pg: this database is a logical replication subscriber and holds pglo blobs: " +
				"large objects do not replicate logically, so their bytes are not here; serve pglo content from a " +
				"physical (streaming) standby, or replicate a pgchunks store")
		}
		return nil
	})
}

// withConn runs fn on a connection of its own, closed afterwards.
func withConn(ctx context.Context, databaseURL string, fn func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx) // read-only work: its outcome is already decided
	}()
	return fn(conn)
}
