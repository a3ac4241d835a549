package gc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
	"github.com/s3gate/s3gate/throttle"
)

// Settings of TestStreamsRaceSweeps.
const (
	// streamWorkers each own a few keys and run iterations concurrently.
	streamWorkers = 2
	// streamKeys is the number of keys per worker: few, so that the database
	// stays small however many iterations run (every put overwrites).
	streamKeys = 3
	// streamRate is the per-request cap of the governor: a 1–4 MiB stream
	// lasts a few quanta of sweeps.
	streamRate = 24 << 20
	// streamHang bounds every wait of the test; it only turns a hang into a
	// failure and asserts nothing about speed.
	streamHang = 2 * time.Minute
)

// streamEnv is an engine whose GETs take real session pins and stream
// through a governor with a per-request cap.
type streamEnv struct {
	*env
	metrics *fleet.Metrics
}

func newStreamEnv(t *testing.T, mode string) *streamEnv {
	t.Helper()
	gov, err := throttle.New(throttle.Config{PerRequest: streamRate})
	if err != nil {
		t.Fatalf("throttle.New: %v", err)
	}
	if mode == embeddedMode {
		// In-process pins, never lost; the governor checks them per quantum.
		m := new(fleet.Metrics)
		v := newEmbeddedEnv(t, embedded.Config{Pins: fleet.NewLocalPins(0, m), Governor: gov})
		return &streamEnv{env: v, metrics: m}
	}
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	m := new(fleet.Metrics)
	// As in store/pg's pin tests: a short check interval and a generous check
	// timeout, so that a loaded 2-core machine rarely loses the session. A
	// loss is still allowed here: it must turn into ErrUnavailable.
	pins, err := fleet.NewSessionPins(fleet.PinsConfig{
		Session: fleet.SessionConfig{DSN: dsn, Metrics: m, CheckInterval: 250 * time.Millisecond, CheckTimeout: 5 * time.Second},
	})
	if err != nil {
		t.Fatalf("NewSessionPins: %v", err)
	}
	cfg := pg.Config{DatabaseURL: dsn, InlineMax: inlineMax, Large: mode, Pins: pins, Governor: gov}
	var media *localfs.Media
	if mode == pg.LargeLocal {
		if media, err = localfs.Open(t.TempDir(), false); err != nil {
			t.Fatal(err)
		}
		cfg.Media = media
	}
	eng, err := pg.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("pg.Open: %v", err)
	}
	// Cleanups run last-in first-out: the engine closes before the pins.
	t.Cleanup(func() {
		if err := pins.Close(); err != nil {
			t.Errorf("pins.Close: %v", err)
		}
	})
	t.Cleanup(eng.Close)
	if err := EnsureSchema(ctx, pg.NewGC(eng.Pool())); err != nil {
		t.Fatal(err)
	}
	if err := eng.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	return &streamEnv{
		env:     &env{eng: eng, db: pg.NewGC(eng.Pool()), pool: eng.Pool(), media: media, mode: mode, bucket: "b"},
		metrics: m,
	}
}

// streamContent returns the bytes of one seed: 1–4 MiB (well above the knee),
// size and bytes both derived from the seed.
func streamContent(seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))
	b := make([]byte, 1<<20+r.IntN(3<<20+1))
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	_, _ = rand.NewChaCha8(key).Read(b) // ChaCha8.Read never fails
	return b
}

// loopSweeper runs Sweep with no grace in a loop and lets the test wait for a
// whole sweep that started after a given moment.
type loopSweeper struct {
	mu       sync.Mutex
	started  int64         // sweeps begun
	finished int64         // sweeps ended (they run one after another)
	tick     chan struct{} // closed and replaced when a sweep ends
	err      error         // the sweep error that stopped the loop
	total    Stats
	pinnedIn int64 // sweeps with SkippedPinned > 0
	done     chan struct{}
}

func startSweeper(v *env, stop <-chan struct{}) *loopSweeper {
	s := &loopSweeper{tick: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.mu.Lock()
			s.started++
			s.mu.Unlock()
			st, err := Sweep(context.Background(), v.db, v.opts())
			s.mu.Lock()
			s.finished++
			s.total.Add(st)
			if st.SkippedPinned > 0 {
				s.pinnedIn++
			}
			if err != nil {
				s.err = fmt.Errorf("sweep: %w", err)
			}
			close(s.tick)
			s.tick = make(chan struct{})
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// waitFullSweep returns once a sweep that started after the call has ended.
func (s *loopSweeper) waitFullSweep() error {
	s.mu.Lock()
	target := s.started + 1
	s.mu.Unlock()
	hang := time.NewTimer(streamHang)
	defer hang.Stop()
	for {
		s.mu.Lock()
		fin, tick, err := s.finished, s.tick, s.err
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if fin >= target {
			return nil
		}
		select {
		case <-tick:
		case <-s.done:
			return errors.New("the sweeper stopped")
		case <-hang.C:
			return fmt.Errorf("no whole sweep ended within %v", streamHang)
		}
	}
}

// verifier compares a stream with the bytes it must carry as they arrive, so
// that a wrong byte is caught even in a stream that later fails, and hashes
// them.
type verifier struct {
	want []byte
	off  int
	h    hash.Hash
	bad  error
}

func newVerifier(want []byte) *verifier { return &verifier{want: want, h: sha256.New()} }

func (v *verifier) Write(p []byte) (int, error) {
	switch {
	case v.off+len(p) > len(v.want):
		v.bad = fmt.Errorf("%d bytes past the object's %d", v.off+len(p)-len(v.want), len(v.want))
	case !bytes.Equal(p, v.want[v.off:v.off+len(p)]):
		v.bad = fmt.Errorf("wrong bytes in [%d, %d)", v.off, v.off+len(p))
	}
	if v.bad != nil {
		return 0, v.bad
	}
	v.h.Write(p)
	v.off += len(p)
	return len(p), nil
}

// streamCounts are the figures of one engine's run.
type streamCounts struct {
	streams     atomic.Int64 // streams opened before the mutation
	complete    atomic.Int64 // ... that read every byte
	unavailable atomic.Int64 // ... that failed with ErrUnavailable
	late        atomic.Int64 // GETs opened while the mutation ran
	lateOld     atomic.Int64 // ... that served the original content
	lateNew     atomic.Int64 // ... that served the replacement
	lateGone    atomic.Int64 // ... that found no key (after a delete)
	lateUnavail atomic.Int64 // ... that failed with ErrUnavailable
	paused      atomic.Int64 // iterations with streams held mid-read over a whole sweep
	pausedGone  atomic.Int64 // ... whose blob went because the pin session was lost
	reclaimed   atomic.Int64 // blobs gone already when their last stream closed
	afterSweep  atomic.Int64 // blobs reclaimed by the first whole sweep after that
}

// finishStream reads the rest of rd into ver and judges the result: every
// byte right, or an error wrapping store.ErrUnavailable. A stream that ends
// early without an error is a failure.
func finishStream(rd store.Reader, ver *verifier, readErr error) (unavailable bool, err error) {
	if readErr == nil {
		_, readErr = io.Copy(ver, rd)
	}
	if cerr := rd.Close(); cerr != nil {
		return false, fmt.Errorf("close: %w", cerr)
	}
	switch {
	case ver.bad != nil:
		return false, fmt.Errorf("after %d good bytes: %w", ver.off, ver.bad)
	case readErr == nil || errors.Is(readErr, io.EOF):
		if ver.off != len(ver.want) {
			return false, fmt.Errorf("ended without error after %d of %d bytes", ver.off, len(ver.want))
		}
		got, want := ver.h.Sum(nil), sha256.Sum256(ver.want)
		if !bytes.Equal(got, want[:]) {
			return false, fmt.Errorf("sha256 %x, want %x", got, want)
		}
		return false, nil
	case errors.Is(readErr, store.ErrUnavailable):
		return true, nil
	default:
		return false, fmt.Errorf("after %d bytes: %w (want success or ErrUnavailable)", ver.off, readErr)
	}
}

// TestStreamsRaceSweeps: DELETE and overwrite during paced GET streams with
// real session pins, racing sweeps with no grace. Each iteration puts an
// object of known bytes, opens 1–4 streams of it (some held mid-read across a
// whole sweep), deletes or overwrites it while more GETs open, and checks that
// every stream reads exactly the original bytes or fails with ErrUnavailable,
// that no sweep deletes a pinned blob, and that the blob goes with the first
// whole sweep after its last stream closed. Afterwards RunOnce settles GC, no
// orphan remains and every object reads back intact.
func TestStreamsRaceSweeps(t *testing.T) {
	n := max(iterations(t)/6, 2*streamWorkers) // each iteration moves ~10 MiB
	for _, mode := range engines {
		t.Run(mode, func(t *testing.T) {
			v := newStreamEnv(t, mode)
			ctx := context.Background()
			var c streamCounts
			stop := make(chan struct{})
			sw := startSweeper(v.env, stop)
			stopped := false
			stopSweeper := func() {
				if !stopped {
					stopped = true
					close(stop)
					<-sw.done
				}
			}
			defer stopSweeper()

			final := make([]map[string]uint64, streamWorkers) // key -> content seed; absent: deleted
			var wg sync.WaitGroup
			for w := range streamWorkers {
				final[w] = map[string]uint64{}
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 0x6a09e667))
					for i := w; i < n && !t.Failed(); i += streamWorkers {
						key := fmt.Sprintf("w%d/k%d", w, rng.IntN(streamKeys))
						if err := v.streamIteration(ctx, rng, sw, &c, key, uint64(i), final[w]); err != nil {
							t.Errorf("iteration %d (%s): %v", i, key, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			stopSweeper()
			if sw.err != nil {
				t.Fatal(sw.err)
			}
			t.Logf("%d iterations: %d streams (%d complete, %d ErrUnavailable); %d racing GETs (%d old, %d new, %d no key, %d ErrUnavailable)",
				n, c.streams.Load(), c.complete.Load(), c.unavailable.Load(),
				c.late.Load(), c.lateOld.Load(), c.lateNew.Load(), c.lateGone.Load(), c.lateUnavail.Load())
			t.Logf("%d sweeps, %d of them skipped pinned blobs: %+v", sw.finished, sw.pinnedIn, sw.total)
			t.Logf("%d iterations held streams over a whole sweep (%d blobs lost with the pin session); blobs gone at the last close %d, reclaimed by the next sweep %d",
				c.paused.Load(), c.pausedGone.Load(), c.reclaimed.Load(), c.afterSweep.Load())
			t.Logf("pin session: %d checks, %d failed, %d losses", v.metrics.Checks.Load(), v.metrics.CheckFailures.Load(), v.metrics.Losses.Load())
			if t.Failed() {
				return
			}
			if sw.total.SkippedPinned == 0 {
				t.Fatal("no sweep ever skipped a pinned blob: the race was not exercised")
			}
			if held, refs := v.metrics.PinsHeld.Load(), v.metrics.PinRefs.Load(); held != 0 || refs != 0 {
				t.Errorf("pins left after every stream closed: %d held, %d refs", held, refs)
			}

			opts := v.opts()
			opts.PinWindow = -1
			st, err := RunOnce(ctx, v.db, v.media, opts)
			if err != nil {
				t.Fatalf("RunOnce: %v (%+v)", err, st)
			}
			t.Logf("RunOnce: %+v", st)
			v.assertNoOrphans(t)
			if rows, refd := v.count(t, `SELECT count(*) FROM blobs`), v.count(t, `SELECT count(*) FROM (
				SELECT blob_id FROM objects WHERE blob_id IS NOT NULL
				UNION SELECT blob_id FROM object_parts
				UNION SELECT blob_id FROM upload_parts) r`); rows != refd {
				t.Errorf("%d blob rows, %d referenced blobs", rows, refd)
			}
			for w := range streamWorkers {
				for k := range streamKeys {
					key := fmt.Sprintf("w%d/k%d", w, k)
					var want []byte
					if seed, ok := final[w][key]; ok {
						want = streamContent(seed)
					}
					if err := v.check(ctx, key, want); err != nil {
						t.Errorf("after GC settled: %v", err)
					}
				}
			}
		})
	}
}

// streamIteration is one round on key: put, stream, delete or overwrite
// under racing GETs, then the checks described on TestStreamsRaceSweeps.
// final records the key's content seed after the round.
func (v *streamEnv) streamIteration(ctx context.Context, rng *rand.Rand, sw *loopSweeper, c *streamCounts,
	key string, iter uint64, final map[string]uint64) error {
	oldSeed, newSeed := iter<<1, iter<<1|1
	old := streamContent(oldSeed)
	oldInfo, err := v.eng.PutObject(ctx, v.bucket, key, bytes.NewReader(old), store.PutOptions{Size: int64(len(old))})
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	final[key] = oldSeed
	id, err := v.blobID(ctx, key)
	if err != nil {
		return err
	}
	// Half of the rounds hold every stream mid-read until a whole sweep ran
	// after the mutation: that sweep must skip the pinned blob.
	pause := rng.IntN(2) == 0
	type result struct {
		unavailable bool
		err         error
	}
	streams := 1 + rng.IntN(4)
	results := make(chan result, streams)
	reached := make(chan struct{}, streams)
	gate := make(chan struct{})
	// The gate opens on every path, or paused streams would hang.
	gateOpen := false
	openGate := func() {
		if !gateOpen {
			gateOpen = true
			close(gate)
		}
	}
	defer openGate()
	opened := 0
	for s := range streams {
		_, _, rd, err := v.eng.GetObject(ctx, v.bucket, key, store.GetOptions{}, false)
		if errors.Is(err, store.ErrUnavailable) {
			// The pin session is down: a 503 before any byte is allowed.
			c.unavailable.Add(1)
			continue
		}
		if err != nil {
			return fmt.Errorf("stream %d: open: %w", s, err)
		}
		opened++
		c.streams.Add(1)
		prefix := int64(-1)
		if pause {
			prefix = rng.Int64N(int64(len(old)))
		}
		go func() {
			ver := newVerifier(old)
			var rerr error
			if prefix >= 0 {
				_, rerr = io.CopyN(ver, rd, prefix)
				reached <- struct{}{}
				<-gate
			}
			u, err := finishStream(rd, ver, rerr)
			results <- result{u, err}
		}()
	}
	if pause {
		for range opened {
			<-reached // sent on every path of a paused stream
		}
	}

	// GETs that open while the mutation commits and sweeps run.
	overwrite := rng.IntN(2) == 0
	var newData []byte
	var newInfo store.ObjectInfo
	if overwrite {
		newData = streamContent(newSeed)
	}
	infoReady := make(chan struct{}) // newInfo is set (or the overwrite failed)
	// Racing GETs open at once, when the mutation is about to commit (the
	// replacement's body fully read, or just before the delete), or after it
	// committed (they must not see the original any more).
	nearCommit := make(chan struct{})
	lateN := rng.IntN(4)
	lateDone := make(chan error, lateN)
	for range lateN {
		c.late.Add(1)
		when := rng.IntN(3)
		go func() {
			switch when {
			case 1:
				<-nearCommit
			case 2:
				<-infoReady
			}
			lateDone <- v.lateGet(ctx, c, key, old, oldInfo.ETag, newData, when == 2, infoReady, &newInfo)
		}()
	}

	lossesBefore := v.metrics.Losses.Load()
	var mutErr error
	if overwrite {
		body := &endSignal{r: bytes.NewReader(newData), left: len(newData), end: nearCommit}
		newInfo, mutErr = v.eng.PutObject(ctx, v.bucket, key, body, store.PutOptions{Size: int64(len(newData))})
		body.signal()
		close(infoReady)
		if mutErr == nil {
			final[key] = newSeed
		} else {
			mutErr = fmt.Errorf("overwrite: %w", mutErr)
		}
	} else {
		close(nearCommit)
		mutErr = v.eng.DeleteObject(ctx, v.bucket, key)
		close(infoReady)
		if mutErr == nil {
			delete(final, key)
		} else {
			mutErr = fmt.Errorf("delete: %w", mutErr)
		}
	}

	if pause && mutErr == nil {
		c.paused.Add(1)
		// Every stream holds a pin on the now unreferenced blob: a whole sweep
		// must leave it, unless the pin session was lost (then the streams
		// must fail, which finishStream checks).
		if err := sw.waitFullSweep(); err != nil {
			mutErr = err
		} else if ok, err := v.blobPresent(ctx, id); err != nil {
			mutErr = err
		} else if !ok && opened > 0 {
			if v.metrics.Losses.Load() == lossesBefore {
				mutErr = fmt.Errorf("a sweep deleted blob %d while %d streams pinned it and the pin session was never lost", id, opened)
			}
			c.pausedGone.Add(1)
		}
	}
	openGate()

	errs := []error{mutErr}
	for range opened {
		r := <-results
		switch {
		case r.err != nil:
			errs = append(errs, fmt.Errorf("stream of the original: %w", r.err))
		case r.unavailable:
			c.unavailable.Add(1)
		default:
			c.complete.Add(1)
		}
	}
	for range lateN {
		if err := <-lateDone; err != nil {
			errs = append(errs, fmt.Errorf("racing GET: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}

	// Every stream is closed and the blob is unreferenced: the first whole
	// sweep from now on must reclaim it (a leaked pin would keep it).
	if ok, err := v.blobPresent(ctx, id); err != nil || !ok {
		if err == nil {
			c.reclaimed.Add(1)
		}
		return err
	}
	if err := sw.waitFullSweep(); err != nil {
		return err
	}
	if ok, err := v.blobPresent(ctx, id); err != nil || ok {
		if err == nil {
			err = fmt.Errorf("blob %d survived a whole sweep after its last stream closed (pins held %d, refs %d)",
				id, v.metrics.PinsHeld.Load(), v.metrics.PinRefs.Load())
		}
		return err
	}
	c.afterSweep.Add(1)
	return nil
}

// lateGet opens key while it is being deleted or overwritten (newData nil:
// deleted) and judges what it got: the original or the replacement, each with
// its own ETag and exact bytes, no key only after a delete, or ErrUnavailable.
// after means it opened once the mutation had committed: then the original
// is wrong (read-after-write).
func (v *streamEnv) lateGet(ctx context.Context, c *streamCounts, key string, old []byte, oldETag string,
	newData []byte, after bool, infoReady <-chan struct{}, newInfo *store.ObjectInfo) error {
	info, _, rd, err := v.eng.GetObject(ctx, v.bucket, key, store.GetOptions{}, false)
	<-infoReady
	switch {
	case errors.Is(err, store.ErrNoSuchKey):
		if newData != nil {
			return fmt.Errorf("no key while it was overwritten: %w", err)
		}
		c.lateGone.Add(1)
		return nil
	case errors.Is(err, store.ErrUnavailable):
		c.lateUnavail.Add(1)
		return nil
	case err != nil:
		return fmt.Errorf("open: %w", err)
	}
	var want []byte
	var served *atomic.Int64
	switch {
	case info.ETag == oldETag && !after:
		want, served = old, &c.lateOld
	case newData != nil && info.ETag == newInfo.ETag:
		want, served = newData, &c.lateNew
	default:
		return errors.Join(fmt.Errorf("ETag %s (opened after the commit: %v; original %s, replacement %q)",
			info.ETag, after, oldETag, newInfo.ETag), rd.Close())
	}
	if info.Size != int64(len(want)) {
		return errors.Join(fmt.Errorf("size %d, want %d", info.Size, len(want)), rd.Close())
	}
	unavailable, err := finishStream(rd, newVerifier(want), nil)
	switch {
	case err != nil:
		return err
	case unavailable:
		c.lateUnavail.Add(1)
	default:
		served.Add(1)
	}
	return nil
}

// endSignal is a put body that closes end once its last byte was read (or
// the put gave up: signal).
type endSignal struct {
	r    io.Reader
	left int
	end  chan struct{}
	once sync.Once
}

func (e *endSignal) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if e.left -= n; e.left <= 0 || err != nil {
		e.signal()
	}
	return n, err
}

func (e *endSignal) signal() { e.once.Do(func() { close(e.end) }) }

// blobID returns the blob of a single-put object.
func (v *streamEnv) blobID(ctx context.Context, key string) (int64, error) {
	id, err := v.scalar(ctx, `SELECT blob_id FROM objects WHERE bucket = $1 AND key = $2`, v.bucket, key)
	if err != nil {
		return 0, fmt.Errorf("blob of %s: %w", key, err)
	}
	return id, nil
}

func (v *streamEnv) blobPresent(ctx context.Context, id int64) (bool, error) {
	n, err := v.scalar(ctx, `SELECT count(*) FROM blobs WHERE id = $1`, id)
	if err != nil {
		return false, fmt.Errorf("blob %d exists: %w", id, err)
	}
	return n == 1, nil
}
