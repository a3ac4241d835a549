package localfs

import "testing"

// ObserveReads passes fn, until the test ends, the bytes of blob content read
// by Read ("read"), handed to a writer by SendTo ("sent") and, of those, read
// by the writer rather than sent by sendfile ("copied").
func ObserveReads(t *testing.T, fn func(ev string, n int64)) {
	h := func(_ int64, ev string, n int64) { fn(ev, n) }
	observe.Store(&h)
	t.Cleanup(func() { observe.Store(nil) })
}
