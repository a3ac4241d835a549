package embedded

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/throttle"
)

// openWith opens an engine in a fresh directory with the given pins and
// governor.
func openWith(t *testing.T, pins *fleet.LocalPins, gov *throttle.BandwidthGovernor) *Engine {
	t.Helper()
	e, err := Open(context.Background(), Config{Dir: t.TempDir(), InlineMax: testKnee, Pins: pins, Governor: gov})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	mkBucket(t, e, "b")
	return e
}

func pacer(t *testing.T, perRequest int64) *throttle.BandwidthGovernor {
	t.Helper()
	g, err := throttle.New(throttle.Config{PerRequest: perRequest})
	if err != nil {
		t.Fatalf("throttle.New: %v", err)
	}
	return g
}

func blobOf(t *testing.T, e *Engine, key string) int64 {
	t.Helper()
	var id int64
	if err := e.rdb.QueryRow(`SELECT blob_id FROM objects WHERE bucket = 'b' AND key = ?`, key).Scan(&id); err != nil {
		t.Fatalf("blob of %s: %v", key, err)
	}
	return id
}

func wantPins(t *testing.T, p *fleet.LocalPins, held, refs int64) {
	t.Helper()
	m := p.Metrics()
	if h, r := m.PinsHeld.Load(), m.PinRefs.Load(); h != held || r != refs {
		t.Errorf("pins held %d, refs %d; want %d, %d", h, r, held, refs)
	}
}

// 5. Streams hold their pins (one entry per blob, shared) while they read,
// also after the object is deleted, so a sweeper can neither take the blob
// exclusively nor treat it as unpinned; every stream reads the exact bytes
// through the governor, and Close releases the pins exactly once.
func TestEmbeddedPinsHeldDuringStream(t *testing.T) {
	for name, gov := range map[string]*throttle.BandwidthGovernor{"unpaced": nil, "paced": pacer(t, 16<<20)} {
		t.Run(name, func(t *testing.T) {
			pins := fleet.NewLocalPins(0, nil)
			e := openWith(t, pins, gov)
			data := content(5, 2<<20)
			put(t, e, "b", "k", data)
			id := blobOf(t, e, "k")
			ctx := context.Background()

			var readers []store.Reader
			for range 3 {
				_, _, rd, err := e.GetObject(ctx, "b", "k", store.GetOptions{}, false)
				if err != nil {
					t.Fatalf("GetObject: %v", err)
				}
				readers = append(readers, rd)
			}
			wantPins(t, pins, 1, 3)
			if !e.Pinned(id) || e.PinCount() != 1 {
				t.Fatalf("Pinned = %v, PinCount = %d while streams are open", e.Pinned(id), e.PinCount())
			}
			if err := e.DeleteObject(ctx, "b", "k"); err != nil {
				t.Fatalf("DeleteObject: %v", err)
			}
			if release, ok := pins.TryExclusive(id); ok {
				release()
				t.Fatal("a sweeper took a streamed blob exclusively")
			}
			for i, rd := range readers {
				got, err := io.ReadAll(rd)
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("stream %d after the delete: %d bytes, %v", i, len(got), err)
				}
				if !e.Pinned(id) {
					t.Errorf("stream %d: blob unpinned before Close", i)
				}
				for range 2 {
					if err := rd.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				}
			}
			wantPins(t, pins, 0, 0)
			if e.Pinned(id) || e.PinCount() != 0 {
				t.Error("pins outlived their readers")
			}
			release, ok := pins.TryExclusive(id)
			if !ok {
				t.Fatal("sweeper refused after the last stream closed")
			}
			release()
		})
	}
}

// Only file-backed blobs in the range are pinned, and only the first one
// before the stream starts (later parts are pinned as the stream reaches
// them): inline content, read from the blob row itself, needs none.
func TestEmbeddedPinsOnlyStreamedBlobs(t *testing.T) {
	pins := fleet.NewLocalPins(0, nil)
	e := openWith(t, pins, nil)
	all, _ := multipartObject(t, e, "b", "mp", []int{5 << 20, 5 << 20, 1000}, 70) // the last part is inline
	put(t, e, "b", "small", content(71, 100))
	first := 5 << 20
	cases := []struct {
		name string
		key  string
		opts store.GetOptions
		pins int64
		want []byte
	}{
		{"whole multipart", "mp", store.GetOptions{}, 1, all},
		{"inline part", "mp", store.GetOptions{PartNumber: 3}, 0, all[2*first:]},
		{"parts 2-3", "mp", store.GetOptions{Range: &store.ByteRange{Start: int64(first), End: int64(len(all) - 1)}}, 1, all[first:]},
		{"inline object", "small", store.GetOptions{}, 0, content(71, 100)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, rd, err := e.GetObject(context.Background(), "b", c.key, c.opts, false)
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			wantPins(t, pins, c.pins, c.pins)
			got, err := io.ReadAll(rd)
			if err != nil || !bytes.Equal(got, c.want) {
				t.Errorf("read %d bytes, %v; want %d", len(got), err, len(c.want))
			}
			if err := rd.Close(); err != nil {
				t.Fatal(err)
			}
			wantPins(t, pins, 0, 0)
		})
	}
}

// Beyond the cap of distinct pinned blobs, a GET that needs a new pin answers
// ErrSlowDown; a multipart GET needs only one pin at a time, so it streams
// with a cap of one; shared blobs and inline content still work.
func TestEmbeddedPinCap(t *testing.T) {
	pins := fleet.NewLocalPins(1, nil)
	e := openWith(t, pins, nil)
	a, b := content(81, 1<<20), content(82, 1<<20)
	put(t, e, "b", "a", a)
	put(t, e, "b", "b", b)
	put(t, e, "b", "small", content(83, 10))
	mp, _ := multipartObject(t, e, "b", "mp", []int{5 << 20, 1 << 20}, 84)
	ctx := context.Background()

	if _, _, got := get(t, e, "b", "mp", store.GetOptions{}); !bytes.Equal(got, mp) {
		t.Fatalf("two parts with a cap of one: %d bytes, want %d", len(got), len(mp))
	}
	wantPins(t, pins, 0, 0)

	_, _, r1, err := e.GetObject(ctx, "b", "a", store.GetOptions{}, false)
	if err != nil {
		t.Fatal(err)
	}
	_, _, r2, err := e.GetObject(ctx, "b", "a", store.GetOptions{}, false)
	if err != nil {
		t.Fatalf("second stream of the pinned blob: %v", err)
	}
	if _, _, _, err := e.GetObject(ctx, "b", "b", store.GetOptions{}, false); !errors.Is(err, store.ErrSlowDown) || !errors.Is(err, fleet.ErrTooManyPins) {
		t.Errorf("new blob at the cap: %v, want ErrSlowDown", err)
	}
	if _, _, got := get(t, e, "b", "small", store.GetOptions{}); !bytes.Equal(got, content(83, 10)) {
		t.Error("inline object at the cap")
	}
	wantPins(t, pins, 1, 2)
	for _, r := range []store.Reader{r1, r2} {
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, got := get(t, e, "b", "b", store.GetOptions{}); !bytes.Equal(got, b) {
		t.Error("blob b after the cap freed")
	}
}

// A sweeper holding a blob exclusively (checking references before deleting)
// makes a GET wait until it lets go: the GET cannot have opened the blob
// before the release.
func TestEmbeddedGetWaitsForSweeper(t *testing.T) {
	pins := fleet.NewLocalPins(0, nil)
	e := openWith(t, pins, nil)
	data := content(91, 1<<20)
	put(t, e, "b", "k", data)
	release, ok := pins.TryExclusive(blobOf(t, e, "k"))
	if !ok {
		t.Fatal("TryExclusive on an unpinned blob failed")
	}
	var released atomic.Bool
	done := make(chan error, 1)
	go func() {
		_, _, rd, err := e.GetObject(context.Background(), "b", "k", store.GetOptions{}, false)
		if err != nil {
			done <- err
			return
		}
		if !released.Load() {
			rd.Close()
			done <- errors.New("GET opened the blob while the sweeper held it")
			return
		}
		got, err := io.ReadAll(rd)
		if err == nil && !bytes.Equal(got, data) {
			err = errors.New("content differs")
		}
		if cerr := rd.Close(); err == nil {
			err = cerr
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // room for a GET that does not wait to show itself
	released.Store(true)
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wantPins(t, pins, 0, 0)
}
