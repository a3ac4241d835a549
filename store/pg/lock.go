package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/s3gate/s3gate/store"
)

// Now implements protocol.Tx: the database's clock, which Object Lock
// judges retention by (clock_timestamp(), not the transaction's start, so a
// long transaction does not see time stand still).
func (t *txn) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := t.q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("database time: %w", mapErr(err))
	}
	return now.UTC(), nil
}

// VersionLock implements protocol.Tx in one statement.
func (t *txn) VersionLock(ctx context.Context, bucket, key, versionID string) (*store.ObjectLock, time.Time, error) {
	var now time.Time
	var l *store.ObjectLock
	err := t.q.QueryRow(ctx, `SELECT clock_timestamp(), (
			SELECT meta->'lock' FROM objects WHERE bucket = $1 AND key = $2 AND version_id = $3
			UNION ALL SELECT meta->'lock' FROM object_versions WHERE bucket = $1 AND key = $2 AND version_id = $3
			LIMIT 1)`, bucket, key, versionID).Scan(&now, &l)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("object lock of version %s: %w", versionID, mapErr(err))
	}
	return l, now.UTC(), nil
}
