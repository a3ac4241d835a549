package gc

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

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
)

// rowRaceTTL is the row pins' TTL in TestRowPinsRaceSweeps: short, so that
// streams outlive several renewals, long enough for a loaded machine to renew
// in time (a late renewal loses a pin: allowed, counted, never wrong bytes).
const rowRaceTTL = 1500 * time.Millisecond

// rowRaceSize is above the pgchunks read-ahead (two 1 MiB rows ahead of the
// reader), so that a stream paused after its first byte still has rows to
// fetch after the sweep.
const rowRaceSize = 4<<20 + 1

// TestRowPinsRaceSweeps: with row pins only (PIN_MODE=rows: no session pins),
// a GET opened before its object is deleted reads it back byte-exact although
// sweeps run meanwhile, on the direct path (Sweep) and the windowed one
// (RunOnce: lease, sentinel, pin window); some streams are held open over
// more than a TTL, so only renewed rows protect them. Dedup re-puts of the
// same content under another key, and a sweeper, race all along. After the
// streams end and their rows expire, one run reaps every pin row and every
// blob: nothing is left.
func TestRowPinsRaceSweeps(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	eng, err := pg.Open(ctx, pg.Config{DatabaseURL: dsn, InlineMax: inlineMax, Large: pg.LargePGChunks,
		RowPins:     &fleet.RowPinsConfig{Owner: "A", TTL: rowRaceTTL, OnError: func(err error) { t.Logf("row pins: %v", err) }},
		ReadRowPins: true})
	if err != nil {
		t.Fatalf("pg.Open: %v", err)
	}
	t.Cleanup(eng.Close)
	db := pg.NewGC(eng.Pool())
	if err := EnsureSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := eng.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	v := &env{eng: eng, db: db, pool: eng.Pool(), mode: pg.LargePGChunks, bucket: "b"}
	opts := v.opts()
	// Row pins cannot pin a staged id (it has no blob row yet): without
	// session pins only the stage grace protects a put's staged content.
	opts.StageGrace = time.Hour
	opts.PinWindow, opts.Holder = time.Millisecond, "A"

	iters := max(iterations(t)/30, 4)
	var cur atomic.Pointer[[]byte] // the content the re-putter dedups against
	first := raceContent(0)
	cur.Store(&first)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	var rePuts, sweeps atomic.Int64
	kick := make(chan struct{}, 1) // a re-put ended: sweep again
	wg.Add(2)
	go func() { // dedup re-puts: reference the streamed blob on and off
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			data := *cur.Load()
			if err := v.put(ctx, "dedup", data); err != nil {
				errc <- fmt.Errorf("re-put: %w", err)
				return
			}
			if err := checkHead(ctx, eng, "dedup", data[:1024]); err != nil {
				errc <- fmt.Errorf("re-put read back: %w", err)
				return
			}
			if err := eng.DeleteObject(ctx, "b", "dedup"); err != nil {
				errc <- fmt.Errorf("delete re-put: %w", err)
				return
			}
			rePuts.Add(1)
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	}()
	go func() { // a sweeper racing the re-puts
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-kick:
			}
			if _, err := Sweep(ctx, db, opts); err != nil {
				errc <- fmt.Errorf("background sweep: %w", err)
				return
			}
			sweeps.Add(1)
		}
	}()

	var exact, lost int
	var pinned int64
	for i := range iters {
		data := raceContent(i)
		cur.Store(&data)
		if err := v.put(ctx, "k", data); err != nil {
			t.Fatalf("put: %v", err)
		}
		_, _, rd, err := eng.GetObject(ctx, "b", "k", store.GetOptions{}, false)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		head := make([]byte, 1)
		if _, err := io.ReadFull(rd, head); err != nil {
			t.Fatalf("first byte: %v", err)
		}
		if err := eng.DeleteObject(ctx, "b", "k"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		if i < 2 { // outlive the TTL of the row the GET inserted
			m := eng.RowPins().Metrics()
			r0 := m.Rounds.Load()
			waitCond(t, "four renewal rounds, or the pin lost", func() bool { return m.Rounds.Load() >= r0+4 || m.Held.Load() == 0 })
		}
		var st Stats
		if i%2 == 0 {
			st, err = Sweep(ctx, db, opts)
		} else {
			st, err = RunOnce(ctx, db, nil, opts)
		}
		if err != nil {
			t.Fatalf("sweep %d: %v", i, err)
		}
		pinned += st.SkippedPinned
		rest, err := io.ReadAll(rd)
		_ = rd.Close()
		switch {
		case errors.Is(err, fleet.ErrPinLost):
			lost++ // a renewal came too late: the stream stopped short
		case err != nil:
			t.Fatalf("iteration %d: stream failed: %v", i, err)
		case !bytes.Equal(append(head, rest...), data):
			t.Fatalf("iteration %d: %d bytes read back, not the object's %d", i, 1+len(rest), len(data))
		default:
			exact++
		}
	}
	close(stop)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	t.Logf("%d streams byte-exact, %d stopped by a lost pin; %d blobs skipped as pinned by the synchronous sweeps (most are not even proposed); %d re-puts, %d background sweeps",
		exact, lost, pinned, rePuts.Load(), sweeps.Load())
	if exact < iters/2 {
		t.Fatalf("only %d of %d streams byte-exact", exact, iters)
	}

	// Every guard is released: once the rows expire, one run reaps them all
	// (in batches of 2) and every blob with them.
	waitCond(t, "every pin row expired", func() bool {
		n, err := v.scalar(ctx, `SELECT count(*) FROM pins WHERE expires_at > clock_timestamp()`)
		return err == nil && n == 0
	})
	rows, err := v.scalar(ctx, `SELECT count(*) FROM pins`)
	if err != nil {
		t.Fatal(err)
	}
	final := opts
	final.BatchSize = 2
	st, err := RunOnce(ctx, db, nil, final)
	if err != nil {
		t.Fatalf("final run: %v", err)
	}
	if st.PinsReaped != rows {
		t.Errorf("final run reaped %d pin rows, want the %d expired ones", st.PinsReaped, rows)
	}
	for what, q := range map[string]string{"pin rows": `SELECT count(*) FROM pins`, "blobs": `SELECT count(*) FROM blobs`,
		"chunk rows": `SELECT count(*) FROM blob_chunks`, "objects": `SELECT count(*) FROM objects`} {
		if n, err := v.scalar(ctx, q); err != nil || n != 0 {
			t.Errorf("after the final run: %d %s (err %v), want 0", n, what, err)
		}
	}
}

// raceContent is the streamed content of iteration i.
func raceContent(i int) []byte {
	data := streamContent(uint64(i))
	return append(data, make([]byte, max(0, rowRaceSize-len(data)))...)[:rowRaceSize]
}

// checkHead reads the first len(want) bytes of key.
func checkHead(ctx context.Context, eng store.ObjectStore, key string, want []byte) error {
	_, _, rd, err := eng.GetObject(ctx, "b", key, store.GetOptions{Range: &store.ByteRange{Start: 0, End: int64(len(want)) - 1}}, false)
	if err != nil {
		return err
	}
	defer rd.Close()
	got, err := io.ReadAll(rd)
	if err != nil && !errors.Is(err, fleet.ErrPinLost) {
		return err
	}
	if err == nil && !bytes.Equal(got, want) {
		return fmt.Errorf("%s: wrong bytes", key)
	}
	return nil
}

// waitCond polls cond for up to streamHang.
func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(streamHang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
