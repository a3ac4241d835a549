//go:build !race

package conformance

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
