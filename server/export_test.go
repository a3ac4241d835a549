package server

import "testing"

// WithoutClaim makes the servers on dsn take no writer claim for the rest of
// the test: for tests that stop or cut PostgreSQL under a gateway to watch its
// data path, which a claimed gateway answers by stopping (ADR 004).
func WithoutClaim(t testing.TB, dsn string) {
	unclaimed.Store(dsn, true)
	t.Cleanup(func() { unclaimed.Delete(dsn) })
}

// SetStepHook makes every shutdown step of s call hook with its name first.
// Set it before Serve.
func SetStepHook(s *Server, hook func(step string)) { s.stepHook = hook }
