package embedded

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// TestConditionalPutRace: concurrent If-None-Match: * puts of one key commit
// exactly one object; the others get ErrPreconditionFailed and the stored
// bytes are the winner's.
func TestConditionalPutRace(t *testing.T) {
	e := newEngine(t)
	mkBucket(t, e, "b")
	const n = 8
	datas := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		size := 100 + i
		if i%2 == 0 {
			size = 1<<20 + i // above the knee
		}
		datas[i] = content(uint64(300+i), size)
		wg.Go(func() {
			<-start
			_, errs[i] = e.PutObject(context.Background(), "b", "k", bytes.NewReader(datas[i]),
				store.PutOptions{Size: int64(len(datas[i])), IfNoneMatch: "*"})
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrPreconditionFailed):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer succeeded")
	}
	_, _, got := get(t, e, "b", "k", store.GetOptions{})
	if !bytes.Equal(got, datas[winner]) {
		t.Fatalf("stored %d bytes, not the winner's %d", len(got), len(datas[winner]))
	}
}
