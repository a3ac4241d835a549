package gc

import "github.com/s3gate/s3gate/fleet"

// BlobLockKey is the key of the advisory lock that pins blob id: a streaming
// GET holds it shared on its pin session; a deleting transaction try-locks it
// exclusively and skips the blob if that fails. It is fleet's key, so that
// pins and GC can never disagree.
func BlobLockKey(id int64) int64 { return fleet.BlobLockKey(id) }
