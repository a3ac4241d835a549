package pg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/protocol"
	"github.com/s3gate/s3gate/throttle"
)

// pinEnv is an engine with real session pins (and optionally a governor) on a
// fresh database.
type pinEnv struct {
	*env
	pins    *fleet.SessionPins
	metrics *fleet.Metrics
}

// newPinEnv opens an engine whose GETs pin on a fleet.SessionPins with the
// production validity window (8 s). The check interval is shorter, so that a
// terminated backend is noticed quickly, and the check timeout longer: on a
// loaded 2-core test machine a 2 s check can time out, which is a (correct)
// loss that these tests are not about.
func newPinEnv(t *testing.T, mode string, maxPins int, gov *throttle.BandwidthGovernor) *pinEnv {
	t.Helper()
	return newPinEnvWith(t, mode, maxPins, gov, nil)
}

// newPinEnvWith is newPinEnv with a wrapper around the engine's Pinner.
func newPinEnvWith(t *testing.T, mode string, maxPins int, gov *throttle.BandwidthGovernor, wrap func(fleet.Pinner) fleet.Pinner) *pinEnv {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	m := new(fleet.Metrics)
	pins, err := fleet.NewSessionPins(fleet.PinsConfig{
		Session: fleet.SessionConfig{DSN: dsn, Metrics: m, CheckInterval: 250 * time.Millisecond, CheckTimeout: 5 * time.Second},
		MaxPins: maxPins,
	})
	if err != nil {
		t.Fatalf("NewSessionPins: %v", err)
	}
	var pinner fleet.Pinner = pins
	if wrap != nil {
		pinner = wrap(pins)
	}
	cfg := Config{DatabaseURL: dsn, InlineMax: testKnee, Large: mode, Region: "us-east-1", Pins: pinner, Governor: gov}
	v := &pinEnv{env: &env{dsn: dsn}, pins: pins, metrics: m}
	if mode == LargeLocal {
		v.dir = t.TempDir()
		media, err := localfs.Open(v.dir, false)
		if err != nil {
			t.Fatalf("localfs.Open: %v", err)
		}
		cfg.Media, v.media = media, media
	}
	e, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	// Cleanups run last-in first-out: the engine closes before the pins.
	t.Cleanup(func() {
		if err := pins.Close(); err != nil {
			t.Errorf("pins.Close: %v", err)
		}
	})
	t.Cleanup(e.Close)
	v.e = e
	if err := e.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	return v
}

func pacer(t *testing.T, perRequest int64) *throttle.BandwidthGovernor {
	t.Helper()
	g, err := throttle.New(throttle.Config{PerRequest: perRequest})
	if err != nil {
		t.Fatalf("throttle.New: %v", err)
	}
	return g
}

func (v *pinEnv) blobOf(t *testing.T, key string) int64 {
	t.Helper()
	var id int64
	if err := v.e.pool.QueryRow(context.Background(), `SELECT blob_id FROM objects WHERE bucket = 'b' AND key = $1`, key).Scan(&id); err != nil {
		t.Fatalf("blob of %s: %v", key, err)
	}
	return id
}

// loseSession terminates the pin session's backend and waits (with a generous
// safety bound, not a speed assertion) until the checker has noticed.
func (v *pinEnv) loseSession(t *testing.T) {
	t.Helper()
	pid := v.pins.BackendPID()
	if pid == 0 {
		t.Fatal("no pin session open")
	}
	losses := v.metrics.Losses.Load()
	var ok bool
	if err := v.e.pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for v.metrics.Losses.Load() == losses {
		if time.Now().After(deadline) {
			t.Fatal("the pin session's loss was never noticed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (v *pinEnv) wantPins(t *testing.T, held, refs int64) {
	t.Helper()
	if h, r := v.metrics.PinsHeld.Load(), v.metrics.PinRefs.Load(); h != held || r != refs {
		t.Errorf("pins held %d, refs %d; want %d, %d", h, r, held, refs)
	}
}

// gcTry runs the GC protocol on blob id in one transaction: take the blob's
// pin key exclusively with pg_try_advisory_xact_lock and, if that worked,
// delete the row (and its large object). It reports whether the lock was
// granted; the deletion commits only then.
func (v *pinEnv) gcTry(t *testing.T, id int64) bool {
	t.Helper()
	ctx := context.Background()
	var got bool
	err := v.e.withTx(ctx, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, fleet.BlobLockKey(id)).Scan(&got); err != nil {
			return fmt.Errorf("try lock: %w", err)
		}
		if !got {
			return nil
		}
		var oid *uint32
		if err := tx.QueryRow(ctx, `DELETE FROM blobs WHERE id = $1 RETURNING lo_oid`, id).Scan(&oid); err != nil {
			return fmt.Errorf("delete blob %d: %w", id, err)
		}
		if oid != nil {
			if _, err := tx.Exec(ctx, `SELECT lo_unlink($1)`, *oid); err != nil {
				return fmt.Errorf("lo_unlink: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("gc attempt on blob %d: %v", id, err)
	}
	if got && v.media != nil {
		if err := v.media.Remove(ctx, id); err != nil {
			t.Fatalf("remove blob file %d: %v", id, err)
		}
	}
	return got
}

func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("%s: err = %v, want one wrapping store.ErrUnavailable", what, err)
	}
}

// 1. A paced 64 MiB GET whose pin session is terminated stops at the next
// quantum with an error wrapping store.ErrUnavailable and fleet.ErrPinLost;
// what was delivered is an exact prefix of the object. The reader is paused
// until the loss is known, so the assertion is on bytes, not on time.
func TestPacedGetStopsOnPinLoss(t *testing.T) {
	const size = 64 << 20
	const before = 8 << 20
	data := randBytes(64, size)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newPinEnv(t, mode, 0, pacer(t, 16<<20))
			v.put(t, "big", data)
			ctx := context.Background()
			_, _, rd, err := v.e.GetObject(ctx, "b", "big", store.GetOptions{}, false)
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			defer rd.Close()
			var got bytes.Buffer
			if _, err := io.CopyN(&got, rd, before); err != nil {
				t.Fatalf("read before the loss: %v", err)
			}
			v.wantPins(t, 1, 1)

			v.loseSession(t)
			_, err = io.Copy(&got, rd)
			if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, fleet.ErrPinLost) {
				t.Fatalf("stream ended with %v, want an error wrapping ErrUnavailable and ErrPinLost", err)
			}
			if after := got.Len() - before; after > throttle.DefaultQuantum {
				t.Errorf("%d bytes delivered after the loss was known, more than one quantum", after)
			}
			if !bytes.Equal(got.Bytes(), data[:got.Len()]) {
				t.Fatal("delivered bytes are not a prefix of the object")
			}
			if _, err := rd.Read(make([]byte, 10)); !errors.Is(err, fleet.ErrPinLost) {
				t.Errorf("read after the failure = %v, want the same sticky error", err)
			}
			if err := rd.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			v.wantPins(t, 0, 0)

			// Every old handle is released, so a new session serves again.
			_, _, b := v.get(t, "big", store.GetOptions{Range: &store.ByteRange{Start: size - 1<<20, End: size - 1}})
			sameBytes(t, "tail after a new session", b, data[size-1<<20:])
			if n := v.metrics.SessionsOpened.Load(); n != 2 {
				t.Errorf("sessions opened = %d, want 2", n)
			}
		})
	}
}

// 2. HEAD, 304 and 416 answers resolved after the loss (while a stream of the
// lost session still holds its pin, so no new session may open) answer
// ErrUnavailable rather than describe content that nothing protects. Inline
// objects need no pin and keep answering. Once the stream is closed, a new
// session opens and the same requests answer normally.
func TestAnswersAfterPinLoss(t *testing.T) {
	for _, mode := range []string{LargePGChunks, LargeLocal} {
		t.Run(mode, func(t *testing.T) {
			v := newPinEnv(t, mode, 0, nil)
			big := randBytes(2, 1<<20)
			small := randBytes(3, 1000)
			bigInfo := v.put(t, "big", big)
			smallInfo := v.put(t, "small", small)
			ctx := context.Background()
			_, _, stream, err := v.e.GetObject(ctx, "b", "big", store.GetOptions{}, false)
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			defer stream.Close()
			v.loseSession(t)

			type answer struct {
				name    string
				opts    store.GetOptions
				head    bool
				normal  error // the answer with valid protection
				content bool
			}
			answers := func(etag string) []answer {
				return []answer{
					{"HEAD", store.GetOptions{}, true, nil, false},
					{"304", store.GetOptions{Cond: store.Conditions{IfNoneMatch: etag}}, false, store.ErrNotModified, false},
					{"HEAD 304", store.GetOptions{Cond: store.Conditions{IfNoneMatch: etag}}, true, store.ErrNotModified, false},
					{"412", store.GetOptions{Cond: store.Conditions{IfMatch: "nope"}}, false, store.ErrPreconditionFailed, false},
					{"416", store.GetOptions{RangeSpec: "bytes=99999999-"}, false, store.ErrInvalidRange, false},
					{"GET", store.GetOptions{}, false, nil, true},
				}
			}
			for _, a := range answers(bigInfo.ETag) {
				_, _, rd, err := v.e.GetObject(ctx, "b", "big", a.opts, a.head)
				wantUnavailable(t, "streamed object, "+a.name, err)
				if !errors.Is(err, fleet.ErrSessionLost) {
					t.Errorf("%s: err = %v, want it to wrap fleet.ErrSessionLost too", a.name, err)
				}
				if rd != nil {
					t.Errorf("%s: a reader came back with the error", a.name)
					rd.Close()
				}
			}
			check := func(key string, want []byte, etag string) {
				t.Helper()
				for _, a := range answers(etag) {
					_, _, rd, err := v.e.GetObject(ctx, "b", key, a.opts, a.head)
					if a.normal == nil && err != nil || a.normal != nil && !errors.Is(err, a.normal) {
						t.Errorf("%s %s: err = %v, want %v", key, a.name, err, a.normal)
						continue
					}
					if a.content {
						b, rerr := io.ReadAll(rd)
						if rerr != nil || !bytes.Equal(b, want) {
							t.Errorf("%s %s: read %d bytes, %v", key, a.name, len(b), rerr)
						}
						rd.Close()
					}
				}
			}
			check("small", small, smallInfo.ETag) // inline: no pin needed, even now

			if err := stream.Close(); err != nil {
				t.Fatalf("close the stream: %v", err)
			}
			check("big", big, bigInfo.ETag)
			v.wantPins(t, 0, 0)
		})
	}
}

// 3. A blob whose object is deleted while 20 paced GETs stream it cannot be
// deleted by the GC protocol while any stream lives; every stream reads back
// the full, correct bytes; after the last stream the lock is granted and the
// blob row can go.
func TestDeleteDuringConcurrentStreams(t *testing.T) {
	const streams = 20
	const size = 2 << 20
	data := randBytes(20, size)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newPinEnv(t, mode, 0, pacer(t, 16<<20))
			v.put(t, "k", data)
			id := v.blobOf(t, "k")
			ctx := context.Background()

			type result struct {
				i   int
				got []byte
				err error
			}
			half := make(chan int, streams)
			results := make(chan result, streams)
			gates := make([]chan struct{}, streams)
			readers := make([]store.Reader, streams)
			for i := range readers {
				_, _, rd, err := v.e.GetObject(ctx, "b", "k", store.GetOptions{}, false)
				if err != nil {
					t.Fatalf("GetObject %d: %v", i, err)
				}
				readers[i], gates[i] = rd, make(chan struct{})
			}
			for i, rd := range readers {
				go func() {
					var buf bytes.Buffer
					_, err := io.CopyN(&buf, rd, size/2)
					half <- i
					if err == nil {
						<-gates[i]
						_, err = io.Copy(&buf, rd)
					}
					if cerr := rd.Close(); err == nil {
						err = cerr
					}
					results <- result{i, buf.Bytes(), err}
				}()
			}
			for range streams {
				<-half
			}
			v.wantPins(t, 1, streams) // one shared lock for all streams

			if err := v.e.DeleteObject(ctx, "b", "k"); err != nil {
				t.Fatalf("DeleteObject: %v", err)
			}
			if v.gcTry(t, id) {
				t.Fatal("GC got the blob's lock while 20 streams read it")
			}
			wait := func(n int) {
				t.Helper()
				for range n {
					r := <-results
					if r.err != nil {
						t.Errorf("stream %d: %v (session checks %d, failed %d, losses %d)", r.i, r.err,
							v.metrics.Checks.Load(), v.metrics.CheckFailures.Load(), v.metrics.Losses.Load())
					} else if !bytes.Equal(r.got, data) {
						t.Errorf("stream %d: %d bytes that differ from the object", r.i, len(r.got))
					}
				}
			}
			for i := range streams - 1 {
				close(gates[i])
			}
			wait(streams - 1)
			if v.gcTry(t, id) {
				t.Fatal("GC got the blob's lock while one stream still reads it")
			}
			if n := v.count(t, `SELECT count(*) FROM blobs WHERE id = $1`, id); n != 1 {
				t.Fatalf("blob rows = %d while a stream lives", n)
			}
			close(gates[streams-1])
			wait(1)
			v.wantPins(t, 0, 0)
			if !v.gcTry(t, id) {
				t.Fatal("GC did not get the blob's lock after the last stream ended")
			}
			if n := v.count(t, `SELECT count(*) FROM blobs WHERE id = $1`, id); n != 0 {
				t.Errorf("blob rows = %d after GC", n)
			}
		})
	}
}

// 4. Beyond the per-instance cap of distinct pinned blobs, GETs and HEADs that
// need a new pin answer ErrSlowDown; streams of an already pinned blob share
// its lock, inline content needs none, and a multipart GET needs one pin at a
// time, so more parts than the cap stream fine.
func TestPinCapSlowDown(t *testing.T) {
	v := newPinEnv(t, LargePGChunks, 2, nil)
	ctx := context.Background()
	a, b := randBytes(41, 1<<20), randBytes(42, 1<<20)
	small := randBytes(43, 100)
	v.put(t, "a", a)
	v.put(t, "b", b)
	v.put(t, "small", small)
	v.putMultipart(t, "mp", randBytes(44, 5<<20), randBytes(45, 5<<20), randBytes(46, 1<<20))

	open := func(key string) store.Reader {
		t.Helper()
		_, _, rd, err := v.e.GetObject(ctx, "b", key, store.GetOptions{}, false)
		if err != nil {
			t.Fatalf("GetObject %s: %v", key, err)
		}
		return rd
	}
	// The three parts are more distinct blobs than the cap allows.
	_, _, got := v.get(t, "mp", store.GetOptions{})
	sameBytes(t, "GET of 3 parts with a cap of 2", got, bytes.Join([][]byte{randBytes(44, 5<<20), randBytes(45, 5<<20), randBytes(46, 1<<20)}, nil))
	v.wantPins(t, 0, 0)

	r1, r2 := open("a"), open("a")
	r3 := open("b")
	v.wantPins(t, 2, 3)
	for _, head := range []bool{false, true} {
		_, _, rd, err := v.e.GetObject(ctx, "b", "mp", store.GetOptions{PartNumber: 3}, head)
		if !errors.Is(err, store.ErrSlowDown) {
			t.Errorf("head=%v with the cap reached: %v, want ErrSlowDown", head, err)
		}
		if rd != nil {
			rd.Close()
		}
	}
	r4 := open("a") // shares a's lock
	_, _, got = v.get(t, "small", store.GetOptions{})
	sameBytes(t, "inline object at the cap", got, small)
	if v.metrics.PinsRefused.Load() == 0 {
		t.Error("refusals not counted")
	}
	for _, r := range []store.Reader{r1, r2, r3, r4} {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	_, _, got = v.get(t, "mp", store.GetOptions{PartNumber: 3})
	sameBytes(t, "part 3 after the streams closed", got, randBytes(46, 1<<20))
	v.wantPins(t, 0, 0)
}

func (v *pinEnv) putMultipart(t *testing.T, key string, parts ...[]byte) store.ObjectInfo {
	t.Helper()
	ctx := context.Background()
	up, err := v.e.CreateMultipartUpload(ctx, "b", key, store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	var done []store.CompletePart
	for i, p := range parts {
		pi, err := v.e.UploadPart(ctx, "b", key, up.UploadID, i+1, bytes.NewReader(p), store.PutOptions{Size: int64(len(p))})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", i+1, err)
		}
		done = append(done, store.CompletePart{Number: i + 1, ETag: pi.ETag})
	}
	info, err := v.e.CompleteMultipartUpload(ctx, "b", key, up.UploadID, done, store.PutOptions{})
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	return info
}

// A multipart GET pins the part blobs in its range one at a time, the first
// before it answers and each later one when the stream reaches it; inline
// parts need no pin (their bytes come from the blob row itself, exact or
// gone). Close releases the last one.
func TestMultipartPinsPartsInRange(t *testing.T) {
	v := newPinEnv(t, LargePGChunks, 0, nil)
	p1, p2, p3 := randBytes(51, 5<<20), randBytes(52, 5<<20), randBytes(53, 100<<10) // p3 is inline
	v.putMultipart(t, "mp", p1, p2, p3)
	all := bytes.Join([][]byte{p1, p2, p3}, nil)
	ctx := context.Background()
	cases := []struct {
		name string
		opts store.GetOptions
		pins int64 // before the first read, and after the last
		want []byte
	}{
		{"whole", store.GetOptions{}, 1, all},
		{"parts 2-3", store.GetOptions{RangeSpec: fmt.Sprintf("bytes=%d-", len(p1)+10)}, 1, all[len(p1)+10:]},
		{"inline part only", store.GetOptions{PartNumber: 3}, 0, p3},
		{"inside part 1", store.GetOptions{RangeSpec: "bytes=100-199"}, 1, p1[100:200]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, rd, err := v.e.GetObject(ctx, "b", "mp", c.opts, false)
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			v.wantPins(t, c.pins, c.pins)
			b, err := io.ReadAll(rd)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			sameBytes(t, c.name, b, c.want)
			v.wantPins(t, c.pins, c.pins)
			if err := rd.Close(); err != nil {
				t.Fatal(err)
			}
			if err := rd.Close(); err != nil { // a second Close releases nothing more
				t.Fatal(err)
			}
			v.wantPins(t, 0, 0)
		})
	}
}

// hookPinner runs a hook before each Acquire: the test reclaims the blob
// between GetObject's snapshot and its pin, which no timing could arrange.
type hookPinner struct {
	fleet.Pinner
	hook  func(blobID int64)
	calls atomic.Int64
	// staging, if set, tells the pins of puts staging a fresh blob id (ADR
	// 007), which pass through without the hook.
	staging func(blobID int64) bool
}

func (h *hookPinner) Acquire(ctx context.Context, blobID int64) (fleet.Pin, error) {
	if h.staging != nil && h.staging(blobID) {
		return h.Pinner.Acquire(ctx, blobID)
	}
	h.calls.Add(1)
	h.hook(blobID)
	return h.Pinner.Acquire(ctx, blobID)
}

// The re-check after the pin: a blob reclaimed between resolution and pin
// makes GetObject resolve again (serving the new content after an overwrite,
// NoSuchKey after a delete), and a blob reclaimed on every attempt ends in
// ErrUnavailable; no pin is left behind either way.
func TestRecheckAfterPin(t *testing.T) {
	oldData, newData := randBytes(61, 1<<20), randBytes(62, 1<<20)
	cases := []struct {
		name  string
		every bool                          // reclaim on every Acquire, not only the first
		act   func(t *testing.T, v *pinEnv) // what happens to the object before GC
		want  []byte
		err   error
	}{
		{"overwritten", false, func(t *testing.T, v *pinEnv) { v.put(t, "k", newData) }, newData, nil},
		{"deleted", false, func(t *testing.T, v *pinEnv) {
			if err := v.e.DeleteObject(context.Background(), "b", "k"); err != nil {
				t.Fatal(err)
			}
		}, nil, store.ErrNoSuchKey},
		{"always reclaimed", true, func(t *testing.T, v *pinEnv) {
			v.put(t, "k", randBytes(uint64(time.Now().UnixNano()), 1<<20))
		}, nil, store.ErrUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v *pinEnv
			var hp *hookPinner
			v = newPinEnvWith(t, LargePGChunks, 0, nil, func(p fleet.Pinner) fleet.Pinner {
				hp = &hookPinner{Pinner: p}
				hp.staging = func(id int64) bool {
					return v.count(t, `SELECT count(*) FROM blobs WHERE id = $1`, id) == 0
				}
				hp.hook = func(id int64) {
					if hp.calls.Load() > 1 && !c.every {
						return
					}
					c.act(t, v)
					if !v.gcTry(t, id) {
						t.Errorf("GC could not lock blob %d before it was pinned", id)
					}
				}
				return hp
			})
			v.put(t, "k", oldData)
			_, _, rd, err := v.e.GetObject(context.Background(), "b", "k", store.GetOptions{}, false)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
			} else {
				if err != nil {
					t.Fatalf("GetObject: %v", err)
				}
				b, err := io.ReadAll(rd)
				if err != nil {
					t.Fatal(err)
				}
				sameBytes(t, "after re-resolution", b, c.want)
				rd.Close()
			}
			if n := hp.calls.Load(); n < 1 {
				t.Errorf("Acquire called %d times", n)
			}
			v.wantPins(t, 0, 0)
		})
	}
}

// fakePin is a pin the test invalidates after a number of Valid calls.
type fakePin struct {
	mu       sync.Mutex
	validFor int // Valid calls that answer true; <0: always
	calls    int
	released int
}

func (p *fakePin) Valid() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	return p.validFor < 0 || p.calls <= p.validFor
}

func (p *fakePin) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released++
}

type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// The guarded reader, with and without a governor: a pin lost before the
// first read delivers nothing, one lost mid-stream delivers a prefix, one lost
// at EOF never lets the stream look complete, and Close releases exactly once.
func TestGuardedReader(t *testing.T) {
	data := randBytes(7, 300<<10) // several 64 KiB quanta
	govs := map[string]*throttle.BandwidthGovernor{"unpaced": nil, "governor": pacer(t, 0), "paced": pacer(t, 64<<20)}
	cases := []struct {
		name     string
		validFor int
		complete bool
	}{
		{"valid throughout", -1, true},
		{"lost before the first read", 0, false},
		{"lost after the first check", 1, false},
		{"lost mid-stream", 3, false},
	}
	for gname, gov := range govs {
		for _, c := range cases {
			t.Run(gname+"/"+c.name, func(t *testing.T) {
				e := &Engine{gov: gov}
				pin := &fakePin{validFor: c.validFor}
				src := &closeCounter{Reader: bytes.NewReader(data)}
				rd := e.guardedReader(context.Background(), src, pinSet{pin})
				var got bytes.Buffer
				buf := make([]byte, 64<<10)
				_, err := io.CopyBuffer(&got, struct{ io.Reader }{rd}, buf)
				if c.complete {
					if err != nil || !bytes.Equal(got.Bytes(), data) {
						t.Fatalf("read %d bytes, %v; want all %d", got.Len(), err, len(data))
					}
				} else {
					if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, fleet.ErrPinLost) {
						t.Fatalf("err = %v, want ErrUnavailable and ErrPinLost", err)
					}
					if got.Len() >= len(data) {
						t.Fatalf("all %d bytes delivered despite the loss", got.Len())
					}
					if !bytes.Equal(got.Bytes(), data[:got.Len()]) {
						t.Fatal("not a prefix")
					}
				}
				if c.validFor == 0 && got.Len() != 0 {
					t.Errorf("%d bytes delivered with a pin lost before the first read", got.Len())
				}
				for range 2 {
					if err := rd.Close(); err != nil {
						t.Fatal(err)
					}
				}
				if pin.released != 1 || src.closed != 1 {
					t.Errorf("pin released %d times, source closed %d times; want 1 each", pin.released, src.closed)
				}
			})
		}
	}
	// A loss discovered only at EOF: every byte was read, but the end is
	// reported as an error, never as a clean EOF.
	for gname, gov := range govs {
		t.Run(gname+"/lost at EOF", func(t *testing.T) {
			pin := &fakePin{validFor: -1}
			src := &eofHook{data: data, atEOF: func() { pin.mu.Lock(); pin.validFor = 0; pin.mu.Unlock() }}
			rd := (&Engine{gov: gov}).guardedReader(context.Background(), src, pinSet{pin})
			got, err := io.ReadAll(rd)
			if !errors.Is(err, fleet.ErrPinLost) {
				t.Fatalf("end of stream: %v, want ErrPinLost", err)
			}
			if !bytes.Equal(got, data[:len(got)]) {
				t.Fatal("not a prefix")
			}
		})
	}
}

// eofHook serves data and calls atEOF when it reports EOF.
type eofHook struct {
	data  []byte
	off   int
	atEOF func()
}

func (h *eofHook) Read(p []byte) (int, error) {
	if h.off >= len(h.data) {
		h.atEOF()
		return 0, io.EOF
	}
	n := copy(p, h.data[h.off:])
	h.off += n
	return n, nil
}

func (h *eofHook) Close() error { return nil }

func TestMapPinErr(t *testing.T) {
	cases := []struct {
		err  error
		want error
	}{
		{fmt.Errorf("x: %w", fleet.ErrTooManyPins), store.ErrSlowDown},
		{fmt.Errorf("x: %w", fleet.ErrSessionLost), store.ErrUnavailable},
		{fmt.Errorf("x: %w: %w", fleet.ErrSessionLost, fleet.ErrHandlesOutstanding), store.ErrUnavailable},
		{fleet.ErrPinLost, store.ErrUnavailable},
		{fleet.ErrWindowExpired, store.ErrUnavailable},
		{fleet.ErrPinsClosed, store.ErrUnavailable},
		{context.Canceled, context.Canceled},
	}
	for _, c := range cases {
		got := protocol.PinErr(c.err)
		if !errors.Is(got, c.want) || !errors.Is(got, c.err) {
			t.Errorf("protocol.PinErr(%v) = %v, want it to wrap %v and the cause", c.err, got, c.want)
		}
		if c.want == context.Canceled && (errors.Is(got, store.ErrUnavailable) || errors.Is(got, store.ErrSlowDown)) {
			t.Errorf("protocol.PinErr(%v) = %v: a cancellation is no 503", c.err, got)
		}
	}
}

// UploadPartCopy's byte copy reads its source by the GET order: a source blob
// reclaimed between the resolving transaction and the pin makes the copy
// resolve again (copying the new content after an overwrite, NoSuchKey after
// a delete), one reclaimed on every attempt ends in ErrUnavailable, and no pin
// is left behind. Without the pin and re-check the copy would read a blob GC
// already deleted.
func TestUploadPartCopyPinsSource(t *testing.T) {
	oldData, newData := randBytes(71, 2<<20), randBytes(72, 2<<20)
	rng := &store.ByteRange{Start: 100, End: 1<<20 + 99}
	cases := []struct {
		name  string
		every bool
		act   func(t *testing.T, v *pinEnv)
		want  []byte
		err   error
	}{
		{"overwritten", false, func(t *testing.T, v *pinEnv) { v.put(t, "src", newData) }, newData, nil},
		{"deleted", false, func(t *testing.T, v *pinEnv) {
			if err := v.e.DeleteObject(context.Background(), "b", "src"); err != nil {
				t.Fatal(err)
			}
		}, nil, store.ErrNoSuchKey},
		{"always reclaimed", true, func(t *testing.T, v *pinEnv) {
			v.put(t, "src", randBytes(uint64(time.Now().UnixNano()), 2<<20))
		}, nil, store.ErrUnavailable},
	}
	for _, mode := range []string{LargePGChunks, LargePGLO} {
		for _, c := range cases {
			t.Run(mode+"/"+c.name, func(t *testing.T) {
				var v *pinEnv
				var hp *hookPinner
				v = newPinEnvWith(t, mode, 0, nil, func(p fleet.Pinner) fleet.Pinner {
					hp = &hookPinner{Pinner: p}
					hp.staging = func(id int64) bool {
						return v.count(t, `SELECT count(*) FROM blobs WHERE id = $1`, id) == 0
					}
					hp.hook = func(id int64) {
						if hp.calls.Load() > 1 && !c.every {
							return
						}
						c.act(t, v)
						if !v.gcTry(t, id) {
							t.Errorf("GC could not lock blob %d before it was pinned", id)
						}
					}
					return hp
				})
				v.put(t, "src", oldData)
				ctx := context.Background()
				u, err := v.e.CreateMultipartUpload(ctx, "b", "dst", store.ObjectMeta{}, "", "")
				if err != nil {
					t.Fatal(err)
				}
				pi, err := v.e.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: "src", Range: rng}, "b", "dst", u.UploadID, 1)
				if c.err != nil {
					if !errors.Is(err, c.err) {
						t.Fatalf("err = %v, want %v", err, c.err)
					}
				} else {
					if err != nil {
						t.Fatalf("UploadPartCopy: %v", err)
					}
					if want := c.want[rng.Start : rng.End+1]; pi.ETag != md5hex(want) || pi.Size != int64(len(want)) {
						t.Errorf("part %+v is not the new source's range", pi)
					}
				}
				if n := hp.calls.Load(); n < 1 {
					t.Errorf("the copy never pinned its source (%d acquires)", n)
				}
				v.wantPins(t, 0, 0)
			})
		}
	}
}

// pinSet is the pins of one response.
type pinSet = protocol.PinSet

// guardedReader wraps src as the engine's streams are wrapped: paced by the
// governor (if any) and guarded by pins, which can be lost.
func (e *Engine) guardedReader(ctx context.Context, src io.ReadCloser, pins pinSet) store.Reader {
	return protocol.GuardedReader(ctx, src, pins, e.gov, protocol.GuardAlways)
}
