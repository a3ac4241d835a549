package localfs

import "testing"

// ObserveReads counts, until the test ends, the bytes of blob content read
// by Read and those handed to a writer by SendTo (sendfile).
func ObserveReads(t *testing.T, fn func(sent bool, n int64)) {
	h := func(_ int64, sent bool, n int64) { fn(sent, n) }
	observe.Store(&h)
	t.Cleanup(func() { observe.Store(nil) })
}
