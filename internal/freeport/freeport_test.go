package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The picked ports lie below the ephemeral range, are free, and a server can
// bind them.
func TestPortBelowEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low-floor < 1000 {
		t.Fatalf("ephemeral range starts at %d: no room below it on this machine", low)
	}
	seen := map[int]bool{}
	for range 50 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if p < floor || p >= low {
			t.Fatalf("port %d outside [%d, %d)", p, floor, low)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("bind the picked port %d: %v", p, err)
		}
		_ = l.Close()
	}
	if len(seen) < 40 {
		t.Fatalf("50 picks gave only %d distinct ports", len(seen))
	}
}

// A port held by a listener is never picked.
func TestPortSkipsHeld(t *testing.T) {
	held := map[int]bool{}
	for range 200 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if held[p] {
			t.Fatalf("port %d picked while a listener holds it", p)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("bind %d: %v", p, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		held[p] = true
	}
}
