// Package testreq decides what a test does when something it needs from the
// machine (PostgreSQL binaries, a client program, a Python module) is missing:
// on a developer's machine it skips, saying what to install; where
// S3GATE_TEST_REQUIRE is set (CI sets it) it fails, so that a missing tool can
// never turn into a green run that tested nothing.
package testreq

import (
	"os"
	"testing"
)

// EnvRequire names the variable that turns missing-tool skips into failures.
const EnvRequire = "S3GATE_TEST_REQUIRE"

// Required reports whether missing tools fail tests instead of skipping them.
func Required() bool { return os.Getenv(EnvRequire) != "" }

// Missing skips t with msg, or fails it when Required.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if Required() {
		t.Fatalf("%s (%s is set: every tool the tests need must be installed)", msg, EnvRequire)
	}
	t.Skip(msg)
}
