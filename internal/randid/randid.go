// Package randid draws the random identifiers and secrets the gateway hands
// out (version ids, upload ids, secret keys) as base64url text that never
// starts with '-': a command line takes such an argument for an option (the
// aws cli's `--version-id ID` or `--upload-id ID` then fails to parse).
package randid

import (
	"crypto/rand"
	"encoding/base64"
)

// Base64URL fills b with random bytes and returns them as base64url text
// without padding, drawing again while the text would start with '-'
// (1 draw in 64).
func Base64URL(b []byte) string {
	for {
		_, _ = rand.Read(b) // crypto/rand.Read never fails (it aborts the process instead)
		// The first character is the top 6 bits of the first byte; 62 is '-'.
		if len(b) == 0 || b[0]>>2 != 62 {
			return base64.RawURLEncoding.EncodeToString(b)
		}
	}
}
