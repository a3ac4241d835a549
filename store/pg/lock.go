package pg

import (
	"context"
	"fmt"
	"time"
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
