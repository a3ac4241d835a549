package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/fleet"
)

// MediaMarker is the shared-media marker recorded in the database by the first
// fleet instance on local media (migration 0005).
type MediaMarker struct {
	Marker    string
	WrittenBy string
	At        time.Time
}

// ProbeMediaMarker runs fn under the marker's advisory lock with the recorded
// marker (nil if none). If none is recorded, fn writes a marker into the media
// and returns it, and it is recorded in the same transaction; with one
// recorded, fn checks that the media holds it and returns nil. Instances
// starting at once are serialized by the lock: exactly one writes.
func (e *Engine) ProbeMediaMarker(ctx context.Context, by fleet.InstanceID, fn func(recorded *MediaMarker) (write string, err error)) error {
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, fleet.MediaMarkerLockKey()); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		var m MediaMarker
		err := tx.QueryRow(ctx, `SELECT marker, written_by, created_at FROM fleet_media`).Scan(&m.Marker, &m.WrittenBy, &m.At)
		var recorded *MediaMarker
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read: %w", err)
		default:
			recorded = &m
		}
		write, err := fn(recorded)
		if err != nil || write == "" {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO fleet_media (marker, written_by) VALUES ($1, $2)`, write, string(by)); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("shared media marker: %w", err)
	}
	return nil
}

// ReapInstances deletes at most limit registrations of the fleet whose last
// heartbeat is older than their TTL (in database time), oldest first, and
// returns how many went. A reaped instance that is alive after all inserts
// its row again at its next heartbeat.
func (g *GC) ReapInstances(ctx context.Context, limit int) (int64, error) {
	tag, err := g.db.Exec(ctx, `DELETE FROM instances WHERE id IN (
		SELECT id FROM instances WHERE heartbeat_at + ttl < clock_timestamp()
		ORDER BY heartbeat_at LIMIT $1 FOR UPDATE SKIP LOCKED)`, limit)
	if err != nil {
		return 0, fmt.Errorf("reap expired instances: %w", err)
	}
	return tag.RowsAffected(), nil
}
