package gc

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// TestRaceUploadPartCopy: UploadPartCopy races deletes and overwrites of
// its source and sweeps with no grace, on every engine. A copy that succeeds
// made a part of exactly one version of the source (its ETag says which),
// and that part is never lost: Complete makes an object of those bytes, it
// reads back byte-exact during the race and after GC settled, and nothing
// unreferenced is left. A copy may fail only because its source is gone.
func TestRaceUploadPartCopy(t *testing.T) {
	n := iterations(t) / 3
	for _, mode := range engines {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			var copied, gone atomic.Int64
			expect, swept := v.raceSweeps(t, 11, max(n/raceWorkers, 1), func(w, i int, rng *rand.Rand, expect map[string][]byte) error {
				src := fmt.Sprintf("w%d/src", w)
				old := content(uint64(w*1000 + i))
				if err := v.put(ctx, src, old); err != nil {
					return fmt.Errorf("put source: %w", err)
				}
				ok, err := v.copyRound(ctx, rng, src, fmt.Sprintf("w%d/dst%d", w, i%3), old, expect)
				if ok {
					copied.Add(1)
				} else if err == nil {
					gone.Add(1)
				}
				return err
			})
			t.Logf("%d copies made parts, %d found their source gone; swept %+v", copied.Load(), gone.Load(), swept)
			if copied.Load() == 0 {
				t.Fatal("no copy succeeded: the race was not exercised")
			}
			v.settle(t)
			v.assertNoOrphans(t)
			for w := range raceWorkers {
				for key, want := range expect[w] {
					if err := v.check(ctx, key, want); err != nil {
						t.Errorf("after GC settled: %v", err)
					}
				}
			}
		})
	}
}

// copyRound copies src (whose content is old) into a new upload's part 1
// while another goroutine deletes or overwrites src, then completes the
// upload as dst and checks it. ok is false if the copy found no source.
func (v *env) copyRound(ctx context.Context, rng *rand.Rand, src, dst string, old []byte, expect map[string][]byte) (bool, error) {
	u, err := v.eng.CreateMultipartUpload(ctx, v.bucket, dst, store.ObjectMeta{}, "", "")
	if err != nil {
		return false, fmt.Errorf("create upload: %w", err)
	}
	replacement := append(bytes.Clone(old), 'r')
	overwrite := rng.IntN(2) == 0
	mutated := make(chan error, 1)
	go func() {
		if overwrite {
			mutated <- v.put(ctx, src, replacement)
		} else {
			mutated <- v.eng.DeleteObject(ctx, v.bucket, src)
		}
	}()
	pi, err := v.eng.UploadPartCopy(ctx, store.CopySource{Bucket: v.bucket, Key: src}, v.bucket, dst, u.UploadID, 1)
	if merr := <-mutated; merr != nil {
		return false, fmt.Errorf("mutate source: %w", merr)
	}
	if errors.Is(err, store.ErrNoSuchKey) && !overwrite {
		return false, v.eng.AbortMultipartUpload(ctx, v.bucket, dst, u.UploadID)
	}
	if err != nil {
		return false, fmt.Errorf("upload part copy (overwrite %v): %w", overwrite, err)
	}
	var want []byte
	for _, c := range [][]byte{old, replacement} {
		if sum := md5.Sum(c); strings.Trim(pi.ETag, `"`) == hex.EncodeToString(sum[:]) {
			want = c
		}
	}
	if want == nil || (!overwrite && len(want) != len(old)) {
		return false, fmt.Errorf("part copy has ETag %s, of neither source version", pi.ETag)
	}
	// A sweep may run here: the part alone must keep its blob.
	if _, err := v.eng.CompleteMultipartUpload(ctx, v.bucket, dst, u.UploadID,
		[]store.CompletePart{{Number: 1, ETag: pi.ETag}}, store.PutOptions{}); err != nil {
		return false, fmt.Errorf("complete: %w", err)
	}
	expect[dst] = want
	if err := v.check(ctx, dst, want); err != nil {
		return false, fmt.Errorf("during the race: %w", err)
	}
	return true, nil
}
