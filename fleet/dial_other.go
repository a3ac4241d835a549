//go:build !linux

package fleet

import "syscall"

// setUserTimeout is a no-op where TCP_USER_TIMEOUT does not exist; keepalives
// and the check deadline still bound how long a dead peer goes unnoticed.
func setUserTimeout(int) func(network, address string, c syscall.RawConn) error {
	return nil
}
