package fleet

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// dialFunc returns a pgconn DialFunc with the session's keepalives and
// TCP_USER_TIMEOUT: pgx's default dialer keeps Go's keepalive defaults, under
// which a dead idle peer goes unnoticed for minutes.
func (c SessionConfig) dialFunc() func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{
		Timeout: c.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     c.KeepaliveIdle,
			Interval: c.KeepaliveInterval,
			Count:    c.KeepaliveCount,
		},
	}
	ctl := setUserTimeout(int(c.TCPUserTimeout.Milliseconds()))
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		dd := *d
		if strings.HasPrefix(network, "tcp") {
			dd.Control = ctl
		}
		conn, err := dd.DialContext(ctx, network, addr)
		if err != nil {
			return nil, fmt.Errorf("dial %s %s: %w", network, addr, err)
		}
		return conn, nil
	}
}
