package gc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// TestRaceBatchDeletion: one batch (one deleting transaction, with the
// one-by-one fallback for what it leaves) is given every blob of a round as
// candidates, while some of them are re-referenced by dedup puts of their
// content, some are pinned by open GETs, some are copied as their source is
// deleted, and some stay referenced. Many rounds, on every engine. Nothing
// referenced or pinned is ever deleted (every object and every open stream
// reads back byte-exact, a pinned blob's row outlives the batch), and every
// blob that nothing touched is deleted by that batch.
func TestRaceBatchDeletion(t *testing.T) {
	rounds := max(iterations(t)/25, 4)
	for _, mode := range engines {
		t.Run(mode, func(t *testing.T) {
			v := newStreamEnv(t, mode)
			ctx := context.Background()
			live := map[string][]byte{} // every object that must read back
			var total Stats
			lost := 0
			for r := range rounds {
				losses := v.metrics.Losses.Load()
				st, err := v.batchRound(ctx, rand.New(rand.NewPCG(uint64(r), 16)), r, live)
				if err != nil && v.metrics.Losses.Load() != losses {
					// A lost pin session drops every pin at once: the round
					// proves nothing about pins, but the objects must hold.
					t.Logf("round %d: the pin session was lost: %v", r, err)
					lost++
					continue
				}
				if err != nil {
					t.Fatalf("round %d: %v", r, err)
				}
				total.Add(st)
			}
			t.Logf("%d rounds (%d lost the pin session), batches decided %+v", rounds, lost, total)
			if total.SkippedPinned == 0 || total.SkippedReferenced == 0 || total.BlobsDeleted == 0 {
				t.Fatalf("the race was not exercised: %+v", total)
			}
			v.settle(t)
			v.assertNoOrphans(t)
			for key, want := range live {
				if err := v.check(ctx, key, want); err != nil {
					t.Errorf("after GC settled: %v", err)
				}
			}
		})
	}
}

// batchGroup is the size of each group of a round's candidates.
const batchGroup = 5

// batchRound sets up the groups of one round, runs the batch while the
// dedup puts and copies race it, and checks what the batch left. The
// round's objects join live.
func (v *streamEnv) batchRound(ctx context.Context, rng *rand.Rand, r int, live map[string][]byte) (Stats, error) {
	var st Stats
	seed := uint64(r) << 20
	data := func(large bool) []byte {
		seed++
		n := 300 + rng.IntN(inlineMax-300) // inline
		if large {
			n = inlineMax + 1 + rng.IntN(4000) // pglo, pgchunks or a file
		}
		b := make([]byte, n)
		_, _ = rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)}).Read(b)
		return b
	}
	var ids []int64
	object := func(key string, large bool) ([]byte, int64, error) {
		b := data(large)
		if err := v.put(ctx, key, b); err != nil {
			return nil, 0, fmt.Errorf("put %s: %w", key, err)
		}
		id, err := v.scalar(ctx, `SELECT blob_id FROM objects WHERE bucket = $1 AND key = $2`, v.bucket, key)
		ids = append(ids, id)
		return b, id, err
	}
	garbage := func(key string, large bool) ([]byte, int64, error) {
		b, id, err := object(key, large)
		if err == nil {
			err = v.eng.DeleteObject(ctx, v.bucket, key)
		}
		return b, id, err
	}
	type stream struct {
		rd   io.ReadCloser
		want []byte
		blob int64
	}
	var (
		untouched, kept []int64 // blobs the batch must delete, must keep
		streams         []stream
		race            []func() error
		mu              sync.Mutex
		copied          = map[string][]byte{}
		fresh           = map[string][]byte{} // this round's objects
	)
	defer func() {
		for _, s := range streams {
			_ = s.rd.Close()
		}
	}()
	for i := range batchGroup {
		k := fmt.Sprintf("r%d/%d", r, i)
		// Nothing touches it: the batch deletes it.
		_, id, err := garbage(k+"/garbage", rng.IntN(2) == 0)
		if err != nil {
			return st, err
		}
		untouched = append(untouched, id)
		// Referenced all along: the batch keeps it.
		b, id, err := object(k+"/kept", rng.IntN(2) == 0)
		if err != nil {
			return st, err
		}
		fresh[k+"/kept"] = b
		kept = append(kept, id)
		// Pinned by an open GET, then unreferenced: the batch keeps it.
		b, id, err = object(k+"/pinned", true)
		if err != nil {
			return st, err
		}
		_, _, rd, err := v.eng.GetObject(ctx, v.bucket, k+"/pinned", store.GetOptions{}, false)
		if err != nil {
			return st, fmt.Errorf("get %s/pinned: %w", k, err)
		}
		streams = append(streams, stream{rd, b, id})
		if err := v.eng.DeleteObject(ctx, v.bucket, k+"/pinned"); err != nil {
			return st, err
		}
		// Unreferenced, re-put during the batch: dedup finds the blob or,
		// if the batch got it first, makes a new one.
		b, _, err = garbage(k+"/dedup", rng.IntN(2) == 0)
		if err != nil {
			return st, err
		}
		key, again := k+"/dedup-again", b
		fresh[key] = again
		race = append(race, func() error { return v.put(ctx, key, again) })
		// Copied as its source is deleted, during the batch: a copy that
		// succeeded keeps the blob.
		b, _, err = object(k+"/src", rng.IntN(2) == 0)
		if err != nil {
			return st, err
		}
		src, dst, cb := k+"/src", k+"/copy", b
		race = append(race, func() error {
			_, err := v.eng.CopyObject(ctx, store.CopySource{Bucket: v.bucket, Key: src}, v.bucket, dst, store.CopyOptions{})
			if errors.Is(err, store.ErrNoSuchKey) {
				return nil // the delete came first
			}
			if err == nil {
				mu.Lock()
				copied[dst] = cb
				mu.Unlock()
			}
			return err
		}, func() error { return v.eng.DeleteObject(ctx, v.bucket, src) })
	}
	rng.Shuffle(len(race), func(i, j int) { race[i], race[j] = race[j], race[i] })
	slices.Sort(ids)

	start := make(chan struct{})
	errs := make(chan error, len(race))
	for _, op := range race {
		go func() {
			<-start
			errs <- op()
		}()
	}
	close(start)
	berr := deleteBlobs(ctx, v.db, ids, v.opts(), &st)
	var rerr error
	for range race {
		rerr = errors.Join(rerr, <-errs)
	}
	if err := errors.Join(berr, rerr); err != nil {
		return st, err
	}

	for _, s := range streams {
		kept = append(kept, s.blob)
	}
	for _, c := range []struct {
		ids  []int64
		want bool
		why  string
	}{
		{untouched, false, "nothing referenced or pinned it, and the batch kept it"},
		{kept, true, "referenced or pinned, and the batch deleted it"},
	} {
		for _, id := range c.ids {
			n, err := v.scalar(ctx, `SELECT count(*) FROM blobs WHERE id = $1`, id)
			if err != nil {
				return st, err
			}
			if (n == 1) != c.want {
				return st, fmt.Errorf("blob %d: %s (%+v)", id, c.why, st)
			}
		}
	}
	for _, s := range streams {
		got, err := io.ReadAll(s.rd)
		if err != nil {
			return st, fmt.Errorf("pinned stream of blob %d: %w", s.blob, err)
		}
		if sha256.Sum256(got) != sha256.Sum256(s.want) || !bytes.Equal(got, s.want) {
			return st, fmt.Errorf("pinned stream of blob %d: wrong bytes", s.blob)
		}
	}
	for key, b := range copied {
		fresh[key] = b
	}
	for key, want := range fresh {
		if err := v.check(ctx, key, want); err != nil {
			return st, err
		}
		live[key] = want
	}
	return st, nil
}

// TestBatchForeignKeyBackstop: a table GC's predicates do not know, with a
// foreign key to blobs, references one blob of a batch. The batch statement
// fails on the key and is rolled back; its blobs are then decided one by one,
// so the referenced blob is kept (skipped as referenced) and the others go.
func TestBatchForeignKeyBackstop(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			if _, err := v.pool.Exec(ctx, `CREATE TABLE later_refs (blob_id bigint NOT NULL REFERENCES blobs (id))`); err != nil {
				t.Fatal(err)
			}
			var ids []int64
			for i := range 6 {
				ids = append(ids, v.garbage(t, fmt.Sprintf("k%d", i), content(uint64(3+i))))
			}
			if _, err := v.pool.Exec(ctx, `INSERT INTO later_refs VALUES ($1)`, ids[2]); err != nil {
				t.Fatal(err)
			}
			st, err := Sweep(ctx, v.db, v.opts())
			if err != nil {
				t.Fatal(err)
			}
			if st.BlobsDeleted != 5 || st.SkippedReferenced != 1 {
				t.Fatalf("swept %+v, want 5 deleted and 1 referenced", st)
			}
			for i, id := range ids {
				if got, want := v.blobExists(t, id), i == 2; got != want {
					t.Errorf("blob %d (k%d): exists %v, want %v", id, i, got, want)
				}
			}
		})
	}
}
