package fleet

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT on a socket before it connects.
func setUserTimeout(ms int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms)
		}); err != nil {
			return fmt.Errorf("socket control: %w", err)
		}
		if serr != nil {
			return fmt.Errorf("set TCP_USER_TIMEOUT: %w", serr)
		}
		return nil
	}
}
