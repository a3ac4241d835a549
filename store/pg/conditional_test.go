package pg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// TestConditionalPutRace: concurrent If-None-Match: * puts of one key (inline
// and large bodies mixed) commit exactly one object; every other writer gets
// ErrPreconditionFailed, and the stored bytes are the winner's. Likewise for
// If-Match against the same ETag: one winner.
func TestConditionalPutRace(t *testing.T) {
	for _, mode := range []string{LargePGChunks, LargePGLO} {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			first := v.put(t, "match", []byte("first"))
			for _, tc := range []struct {
				key  string
				opts store.PutOptions
			}{
				{"fresh", store.PutOptions{IfNoneMatch: "*"}},
				{"match", store.PutOptions{IfMatch: `"` + first.ETag + `"`}},
			} {
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
					datas[i] = randBytes(uint64(300+i), size)
					wg.Go(func() {
						opts := tc.opts
						opts.Size = int64(len(datas[i]))
						<-start
						_, errs[i] = v.e.PutObject(ctx, "b", tc.key, bytes.NewReader(datas[i]), opts)
					})
				}
				close(start)
				wg.Wait()
				winner := -1
				for i, err := range errs {
					switch {
					case err == nil && winner >= 0:
						t.Fatalf("%s: writers %d and %d both succeeded", tc.key, winner, i)
					case err == nil:
						winner = i
					case !errors.Is(err, store.ErrPreconditionFailed):
						t.Fatalf("%s: writer %d: %v", tc.key, i, err)
					}
				}
				if winner < 0 {
					t.Fatalf("%s: no writer succeeded", tc.key)
				}
				_, _, got := v.get(t, tc.key, store.GetOptions{})
				sameBytes(t, fmt.Sprintf("%s winner %d", tc.key, winner), got, datas[winner])
			}
		})
	}
}
