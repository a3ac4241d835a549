package embedded

import (
	"context"
	"time"
)

// Now implements protocol.Tx: on the embedded engine the database is the
// process, so its clock is the process clock, the one its last-modified
// times come from too.
func (t txn) Now(context.Context) (time.Time, error) { return now(), nil }
