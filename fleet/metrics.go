package fleet

import "sync/atomic"

// Metrics are the counters and gauges of sessions and pins, as plain atomics so
// that the caller can export them (e.g. with Prometheus CounterFunc/GaugeFunc)
// without this package depending on a metrics library. One Metrics may be shared
// by several sessions.
type Metrics struct {
	// PinsHeld is a gauge: distinct blobs whose lock is held (one advisory lock
	// each).
	PinsHeld atomic.Int64
	// PinRefs is a gauge: live Pin handles (streams), >= PinsHeld.
	PinRefs atomic.Int64
	// PinsRefused counts Acquire calls refused by the per-instance cap.
	PinsRefused atomic.Int64
	// Checks counts liveness checks sent; CheckFailures those that failed.
	Checks        atomic.Int64
	CheckFailures atomic.Int64
	// Losses counts sessions lost (failed check, expired window, broken
	// statement); a deliberate Close is not a loss.
	Losses atomic.Int64
	// SessionsOpened counts sessions opened successfully.
	SessionsOpened atomic.Int64
}
