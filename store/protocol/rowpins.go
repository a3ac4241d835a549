package protocol

import (
	"context"
	"time"

	"github.com/s3gate/s3gate/fleet"
)

// RowPins are pins as rows (fleet.RowPins, PostgreSQL only; ADR 010): with
// them on, every put that publishes a new reference to a blob commits a pin
// row of that blob in its joint transaction (Tx.PinRows), so that the entry,
// the referencing row and the pin land in one step.
type RowPins interface {
	// Owner is this instance's id in the rows.
	Owner() string
	// TTL is the expiry of a row.
	TTL() time.Duration
	// Now is the clock of Adopt's sent argument.
	Now() time.Duration
	// Adopt returns the guard of a row committed by a statement sent at sent.
	Adopt(blobID int64, sent time.Duration) fleet.Pin
}

// jointPins are the pin rows one joint transaction commits.
type jointPins struct {
	rp   RowPins
	ids  []int64
	sent time.Duration
}

// jointPins returns the pin rows of one joint transaction; nil (row pins
// off) pins nothing.
func (s *Store) jointPins() *jointPins {
	if s.rowPins == nil {
		return nil
	}
	return &jointPins{rp: s.rowPins}
}

// pin commits the pin rows of ids inside tx (the send time of its first
// statement is what the guards count their validity from).
func (j *jointPins) pin(ctx context.Context, tx Tx, ids ...int64) error {
	if j == nil || len(ids) == 0 {
		return nil
	}
	if j.ids == nil {
		j.sent = j.rp.Now()
	}
	j.ids = append(j.ids, ids...)
	return tx.PinRows(ctx, ids, j.rp.Owner(), j.rp.TTL())
}

// adopt returns the guards of the committed rows, released together.
func (j *jointPins) adopt() (release func()) {
	if j == nil {
		return func() {}
	}
	pins := make(PinSet, 0, len(j.ids))
	for _, id := range j.ids {
		pins = append(pins, j.rp.Adopt(id, j.sent))
	}
	return func() {
		for _, p := range pins {
			p.Release()
		}
	}
}
