package embedded

import (
	"github.com/s3gate/s3gate/fleet"
)

// Content pins of the embedded engine are a fleet.LocalPins: in-process,
// reference-counted (many streams of one blob share one entry) and never lost,
// because one process owns the storage.
//
// The protocol with a sweeper (GC) that removes blob files: a reader resolves
// its blobs, pins them, then re-checks with a fresh statement that the blob
// rows still exist (a miss means: resolve again). A sweeper either deletes the
// blob row first (committed) and only then asks Pinned, leaving a pinned
// blob's file to a later sweep; or it takes LocalPins.TryExclusive before it
// checks references and deletes. Either the reader's re-check sees the
// deletion, or the sweeper sees the pin: the LocalPins mutex orders the two.

// Pinned reports whether an open reader streams blob id. A sweeper calls it
// only after the deletion of the blob row has committed (see above).
func (e *Engine) Pinned(id int64) bool { return e.pins.Pinned(id) }

// PinCount returns the number of distinct pinned blobs (for metrics and tests).
func (e *Engine) PinCount() int { return int(e.pins.Metrics().PinsHeld.Load()) }

// Pins returns the engine's pins, for a sweeper's TryExclusive and metrics.
func (e *Engine) Pins() *fleet.LocalPins { return e.pins }
