package freeport

import (
	"net"
	"strconv"
	"testing"
)

// The picked ports lie below the ephemeral range when it leaves room, are
// free, and a server can bind them; with no room (a range starting near or
// below the floor, as some machines configure) the kernel's pick is taken and
// is just as bindable. The ranges are given, not read, so every path runs on
// any machine.
func TestPortBelowEphemeralRange(t *testing.T) {
	for _, tc := range []struct {
		name  string
		low   int
		below bool // picks must lie in [floor, low)
	}{
		{name: "linux default", low: 32768, below: true},
		{name: "this machine", low: ephemeralLow(), below: ephemeralLow()-floor >= 1000},
		{name: "just above the floor", low: floor + 999},
		{name: "below the floor", low: 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[int]bool{}
			for range 50 {
				p, err := pick(tc.low)
				if err != nil {
					t.Fatal(err)
				}
				if p <= 0 || p > 65535 {
					t.Fatalf("port %d is no port", p)
				}
				if tc.below && (p < floor || p >= tc.low) {
					t.Fatalf("port %d outside [%d, %d)", p, floor, tc.low)
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
		})
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
