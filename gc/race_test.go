package gc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
)

const raceWorkers = 4

// sweeper sweeps in a loop (no grace) until stop is closed and reports the
// total it deleted.
func (v *env) sweeper(t *testing.T, stop <-chan struct{}) <-chan Stats {
	out := make(chan Stats, 1)
	go func() {
		var total Stats
		defer func() { out <- total }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			st, err := Sweep(context.Background(), v.db, v.opts())
			total.Add(st)
			if err != nil {
				t.Errorf("sweep: %v", err)
				return
			}
		}
	}()
	return out
}

// raceSweeps runs raceWorkers workers, each calling round rounds times (i
// counts them; a failed test stops every worker), while sweeps with no grace
// run in a loop. It returns what each worker's keys must hold and what the
// sweeps deleted.
func (v *env) raceSweeps(t *testing.T, seed uint64, rounds int,
	round func(w, i int, rng *rand.Rand, expect map[string][]byte) error) ([]map[string][]byte, Stats) {
	stop := make(chan struct{})
	swept := v.sweeper(t, stop)
	expect := make([]map[string][]byte, raceWorkers)
	var wg sync.WaitGroup
	for w := range raceWorkers {
		expect[w] = map[string][]byte{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			for i := 0; i < rounds && !t.Failed(); i++ {
				if err := round(w, i, rng, expect[w]); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	return expect, <-swept
}

// TestRacePutsDeletesSweeps: dedup puts of a few shared contents, overwrites,
// deletes and copies race sweeps with no grace. Every acknowledged object
// reads back with the right SHA-256, during the race and after it, and once
// GC settles nothing unreferenced is left.
func TestRacePutsDeletesSweeps(t *testing.T) {
	n := iterations(t)
	for _, mode := range engines {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			expect, total := v.raceSweeps(t, 42, n/raceWorkers, func(w, _ int, rng *rand.Rand, expect map[string][]byte) error {
				keys := []string{fmt.Sprintf("w%d/a", w), fmt.Sprintf("w%d/b", w), fmt.Sprintf("w%d/c", w)}
				key := keys[rng.IntN(len(keys))]
				switch op := rng.IntN(10); {
				case op < 5: // put (dedup across workers: 6 shared contents)
					data := content(uint64(rng.IntN(6)))
					if err := v.put(ctx, key, data); err != nil {
						return fmt.Errorf("put %s: %w", key, err)
					}
					expect[key] = data
				case op < 7:
					if err := v.eng.DeleteObject(ctx, v.bucket, key); err != nil {
						return fmt.Errorf("delete %s: %w", key, err)
					}
					delete(expect, key)
				case op < 8: // copy: a new reference to an existing blob
					src := keys[rng.IntN(len(keys))]
					data, ok := expect[src]
					if !ok || src == key {
						return nil
					}
					if _, err := v.eng.CopyObject(ctx, store.CopySource{Bucket: v.bucket, Key: src}, v.bucket, key, store.CopyOptions{}); err != nil {
						return fmt.Errorf("copy %s -> %s: %w", src, key, err)
					}
					expect[key] = data
				}
				// Our own keys change only here: reading one back must
				// always succeed with the acknowledged content.
				if err := v.check(ctx, key, expect[key]); err != nil {
					return fmt.Errorf("during the race: %w", err)
				}
				return nil
			})
			t.Logf("%d ops, swept %+v", n, total)
			verify := func(when string) {
				for w := range raceWorkers {
					for _, k := range []string{"a", "b", "c"} {
						key := fmt.Sprintf("w%d/%s", w, k)
						if err := v.check(ctx, key, expect[w][key]); err != nil {
							t.Errorf("%s: %v", when, err)
						}
					}
				}
			}
			verify("after the race")
			v.settle(t)
			v.assertNoOrphans(t)
			verify("after GC settled")
		})
	}
}

// TestRaceIdenticalPutsSweeps: every worker puts the same small content
// (one blob row for all) under its own key and deletes it again, so that
// the blob is unreferenced most of the time, while sweeps with no grace
// delete it whenever it is. A put that dedups against the row must hold it
// (FOR KEY SHARE, ADR 006) from its lookup to COMMIT: no put may fail and
// every acknowledged object reads back. The content is inline, the same on
// every PostgreSQL large engine, so one of them runs it (the embedded
// engine's single writer orders its puts and deletes: the other race tests).
func TestRaceIdenticalPutsSweeps(t *testing.T) {
	n := iterations(t)
	for _, mode := range []string{pg.LargePGChunks} {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			data := content(1) // 300 bytes: inline
			// The race must happen: a sweep that finds the row unreferenced
			// and deletes it between puts. On a loaded machine the sweeper
			// may get few turns in n puts, so rounds of n go on (at most
			// maxRounds) until one did.
			const maxRounds = 10
			var total Stats
			puts := 0
			for r := 0; r < maxRounds && total.BlobsDeleted == 0 && !t.Failed(); r++ {
				_, st := v.raceSweeps(t, 7+uint64(r), n/raceWorkers, func(w, _ int, _ *rand.Rand, _ map[string][]byte) error {
					key := fmt.Sprintf("w%d", w)
					if err := v.put(ctx, key, data); err != nil {
						return fmt.Errorf("put %s: %w", key, err)
					}
					if err := v.check(ctx, key, data); err != nil {
						return fmt.Errorf("during the race: %w", err)
					}
					if err := v.eng.DeleteObject(ctx, v.bucket, key); err != nil {
						return fmt.Errorf("delete %s: %w", key, err)
					}
					return nil
				})
				total.Add(st)
				puts += n
			}
			t.Logf("%d puts, swept %+v", puts, total)
			if total.BlobsDeleted == 0 {
				t.Errorf("no sweep deleted the blob in %d puts: the race did not happen", puts)
			}
			v.settle(t)
			v.assertNoOrphans(t)
		})
	}
}

// TestRaceMultipart: UploadPart (with part re-uploads), Complete and Abort
// race sweeps with no grace.
func TestRaceMultipart(t *testing.T) {
	n := iterations(t) / 4 // each iteration is a whole upload
	for _, mode := range engines {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			expect, swept := v.raceSweeps(t, 7, max(n/raceWorkers, 1), func(w, _ int, rng *rand.Rand, expect map[string][]byte) error {
				key := fmt.Sprintf("w%d/mp%d", w, rng.IntN(2))
				if err := v.multipartRound(ctx, rng, key, expect); err != nil {
					return err
				}
				if err := v.check(ctx, key, expect[key]); err != nil {
					return fmt.Errorf("during the race: %w", err)
				}
				return nil
			})
			t.Logf("%d uploads, swept %+v", n, swept)
			v.settle(t)
			v.assertNoOrphans(t)
			for w := range raceWorkers {
				for k := range 2 {
					key := fmt.Sprintf("w%d/mp%d", w, k)
					if err := v.check(ctx, key, expect[w][key]); err != nil {
						t.Errorf("after GC settled: %v", err)
					}
				}
			}
			// Uploads left open keep their parts; expired, they go with them.
			v.ageUploads(t)
			v.settle(t)
			if left := v.count(t, `SELECT count(*) FROM uploads`); left != 0 {
				t.Fatalf("%d expired uploads left", left)
			}
			v.assertNoOrphans(t)
		})
	}
}

// multipartRound runs one upload: up to three small parts (shared contents,
// some uploaded twice), then Complete with one of them, Abort, or neither.
func (v *env) multipartRound(ctx context.Context, rng *rand.Rand, key string, expect map[string][]byte) error {
	u, err := v.eng.CreateMultipartUpload(ctx, v.bucket, key, store.ObjectMeta{}, "", "")
	if err != nil {
		return fmt.Errorf("create upload: %w", err)
	}
	parts := map[int][]byte{}
	etags := map[int]string{}
	for range 1 + rng.IntN(4) {
		num := 1 + rng.IntN(3)
		data := content(uint64(rng.IntN(6)))
		pi, err := v.eng.UploadPart(ctx, v.bucket, key, u.UploadID, num, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
		if err != nil {
			return fmt.Errorf("upload part %d: %w", num, err)
		}
		parts[num], etags[num] = data, pi.ETag
	}
	switch rng.IntN(4) {
	case 0:
		if err := v.eng.AbortMultipartUpload(ctx, v.bucket, key, u.UploadID); err != nil {
			return fmt.Errorf("abort: %w", err)
		}
	case 1: // left open
	default:
		// A single part may be small (it is the last one): complete with one.
		var num int
		for num = range parts {
			break
		}
		if _, err := v.eng.CompleteMultipartUpload(ctx, v.bucket, key, u.UploadID,
			[]store.CompletePart{{Number: num, ETag: etags[num]}}, store.PutOptions{}); err != nil {
			return fmt.Errorf("complete with part %d: %w", num, err)
		}
		expect[key] = parts[num]
	}
	return nil
}

// TestRunnersRace: two runners race for the lease while garbage is made; at
// most one collects at a time, both get turns, and the result is clean.
func TestRunnersRace(t *testing.T) {
	v := newEnv(t, "pgchunks")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var active, maxActive, runs atomic.Int64
	hook := func(d int) {
		a := active.Add(int64(d))
		for {
			m := maxActive.Load()
			if a <= m || maxActive.CompareAndSwap(m, a) {
				break
			}
		}
		if d > 0 {
			runs.Add(1)
		}
	}
	opts := v.opts()
	// Puts run during the race on an engine without a pinner: only the
	// stage grace keeps the stage reaper off their staged content.
	opts.StageGrace = time.Hour
	opts.PinWindow = time.Millisecond
	opts.Interval = time.Millisecond
	opts.Lease.RenewInterval = 20 * time.Millisecond
	var wg sync.WaitGroup
	holders := []string{"r1", "r2"}
	perHolder := make([]atomic.Int64, len(holders))
	for i, h := range holders {
		o := opts
		o.Holder = h
		r, err := NewRunner(ctx, v.db, nil, o)
		if err != nil {
			t.Fatal(err)
		}
		r.active = func(d int) {
			hook(d)
			if d > 0 {
				perHolder[i].Add(1)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	n := iterations(t)
	for i := 0; i < n && !t.Failed(); i++ {
		key := fmt.Sprintf("k%d", i%5)
		data := content(uint64(i % 6))
		if err := v.put(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		if err := v.check(ctx, key, data); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := v.eng.DeleteObject(ctx, v.bucket, key); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Let both runners have turns (hang guard only, not a timing assertion).
	deadline := time.Now().Add(60 * time.Second)
	for perHolder[0].Load() == 0 || perHolder[1].Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("runs per holder: %d, %d", perHolder[0].Load(), perHolder[1].Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if m := maxActive.Load(); m != 1 {
		t.Fatalf("%d runners collected at once, want 1", m)
	}
	t.Logf("%d runs (%d, %d)", runs.Load(), perHolder[0].Load(), perHolder[1].Load())
	// A runner cancelled inside lease.Acquire may have committed its grant
	// without learning of it: that row is released by nobody and holds until
	// its SQL expiry. And a runner cancelled mid-sweep returns before
	// PostgreSQL has rolled its transaction back: until then its blob row
	// locks make a sweep skip those rows as busy (SKIP LOCKED), to be
	// retried next time. The final run goes on until it skipped nothing
	// (the bound is a hang guard).
	var st Stats
	var err error
	for deadline := time.Now().Add(2 * time.Minute); ; {
		st, err = RunOnce(context.Background(), v.db, nil, opts)
		held := errors.Is(err, lease.ErrHeld) || (err == nil && st.SkippedBusy+st.SkippedPinned > 0)
		if !held || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("RunOnce: %v (%+v)", err, st)
	}
	v.assertNoOrphans(t)
	for i := range 5 {
		key := fmt.Sprintf("k%d", i)
		var want []byte
		for j := n - 1; j >= 0; j-- {
			if j%5 == i {
				if j%3 != 0 {
					want = content(uint64(j % 6))
				}
				break
			}
		}
		if err := v.check(context.Background(), key, want); err != nil {
			t.Error(err)
		}
	}
}

// TestRunOnceLeaseHeld: RunOnce refuses to collect while another holder has
// the lease, and counts a run only when its lease held to the end.
func TestRunOnceLeaseHeld(t *testing.T) {
	v := newEnv(t, "pglo")
	ctx := context.Background()
	opts := v.opts()
	opts.PinWindow = -1
	opts.Holder = "other"
	r, err := NewRunner(ctx, v.db, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.store.Acquire(ctx, LeaseKind, "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	id := v.garbage(t, "k", content(4))
	opts.Holder = "me"
	if _, err := RunOnce(ctx, v.db, nil, opts); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("RunOnce with the lease held: %v", err)
	}
	if !v.blobExists(t, id) {
		t.Fatal("collected without the lease")
	}
	if _, err := v.pool.Exec(ctx, `UPDATE leases SET expires_at = clock_timestamp() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	st, err := RunOnce(ctx, v.db, nil, opts)
	if err != nil || st.BlobsDeleted != 1 {
		t.Fatalf("RunOnce after expiry: %+v, %v", st, err)
	}
	v.assertNoOrphans(t)
}

// failingRelease is a lease store whose Release fails, as when the database
// went away mid-run.
type failingRelease struct{ lease.Store }

func (failingRelease) Release(context.Context, string, string, int64) (bool, error) {
	return false, errors.New("connection refused")
}

// TestRunInterruptedLeaseNotReleased: a run that shutdown interrupts and
// whose lease cannot be released says so, once, at warn level: the next
// holder waits for the expiry, and an operator should know why.
func TestRunInterruptedLeaseNotReleased(t *testing.T) {
	v := newEnv(t, "pgchunks")
	v.garbage(t, "k", content(4))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recs := make(records, 64)
	opts := v.opts()
	opts.PinWindow, opts.Interval, opts.Logger = -1, time.Hour, slog.New(recs)
	r, err := NewRunner(ctx, v.db, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.store = failingRelease{r.store}
	r.active = func(d int) {
		if d > 0 {
			cancel() // shutdown as the run starts deleting
		}
	}
	if err := r.Run(ctx); err != nil {
		t.Fatalf("Run after shutdown: %v", err)
	}
	close(recs)
	var warned int
	for rec := range recs {
		if rec.Message == "gc: run interrupted, its lease not released (it expires by itself)" {
			warned++
			if rec.Level != slog.LevelWarn {
				t.Errorf("logged at %s, want WARN", rec.Level)
			}
		}
	}
	if warned != 1 {
		t.Fatalf("%d warnings of the unreleased lease, want 1", warned)
	}
}
