//go:build race

package conformance

// raceEnabled reports whether the race detector is on: the 1 GiB memory test
// runs only in the non-race pass.
const raceEnabled = true
