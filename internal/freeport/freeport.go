// Package freeport picks TCP ports for servers that tests start in other
// processes (a gateway, PostgreSQL, pgbouncer), which must be told their
// address before they bind it.
//
// A port the kernel handed to a probe listener on 127.0.0.1:0 comes from the
// ephemeral range, the same range it draws source ports of outgoing
// connections from: with test packages running side by side, one of their
// connections can take the port between the probe's close and the server's
// bind (CI saw "bind: address already in use" that way). The ports picked
// here lie below that range, where no outgoing connection lands; the probe
// bind still checks that no listener holds one now.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// floor is the lowest port picked: below it live well-known and registered
// services a developer's machine may run.
const floor = 20000

// Port returns a port on 127.0.0.1 that no listener holds now, below the
// ephemeral range when the range leaves room for it.
func Port() (int, error) { return pick(ephemeralLow()) }

// pick is Port for an ephemeral range that starts at top.
func pick(top int) (int, error) {
	if top-floor >= 1000 {
		for range 100 {
			p := floor + rand.IntN(top-floor)
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				continue // taken: try another
			}
			if err := l.Close(); err != nil {
				return 0, fmt.Errorf("close probe listener: %w", err)
			}
			return p, nil
		}
	}
	// No room below the range (or all tries taken): the kernel's pick.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("probe free port: %w", err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("close probe listener: %w", err)
	}
	return p, nil
}

// Addr is Port as a 127.0.0.1 address; it fails the test on error.
func Addr(t testing.TB) string {
	t.Helper()
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
