package fleet

import "time"

// Clock tells the time for validity windows. Tests inject a fake one to make
// window expiry deterministic; durations are taken with Sub, so a real clock's
// monotonic reading is used.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// RealClock is the wall/monotonic clock of the process.
var RealClock Clock = realClock{}
