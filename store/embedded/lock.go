package embedded

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/s3gate/s3gate/store"
)

// Now implements protocol.Tx: on the embedded engine the database is the
// process, so its clock is the process clock, the one its last-modified
// times come from too.
func (t txn) Now(context.Context) (time.Time, error) { return now(), nil }

// VersionLock implements protocol.Tx.
func (t txn) VersionLock(ctx context.Context, bucket, key, versionID string) (*store.ObjectLock, time.Time, error) {
	var doc sql.NullString
	err := t.q.QueryRowContext(ctx, `SELECT (
			SELECT json_extract(meta, '$.lock') FROM objects WHERE bucket = ? AND key = ? AND version_id = ?
			UNION ALL SELECT json_extract(meta, '$.lock') FROM object_versions WHERE bucket = ? AND key = ? AND version_id = ?
			LIMIT 1)`, bucket, key, versionID, bucket, key, versionID).Scan(&doc)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("object lock of version %s: %w", versionID, mapErr(err))
	}
	if !doc.Valid || doc.String == "" {
		return nil, now(), nil
	}
	var l store.ObjectLock
	if err := json.Unmarshal([]byte(doc.String), &l); err != nil {
		return nil, time.Time{}, fmt.Errorf("object lock of version %s: %w", versionID, err)
	}
	return &l, now(), nil
}
