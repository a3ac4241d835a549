package pg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
)

// rowTTL is short so that renewals (every TTL/3) are seen quickly, and long
// enough that a loaded test machine renews in time.
const rowTTL = 1500 * time.Millisecond

// newRowPinEnv opens an engine with row pins on, GETs included, for owner
// on dsn ("" makes a fresh database).
func newRowPinEnv(t *testing.T, mode, dsn, owner string) *env {
	t.Helper()
	if dsn == "" {
		dsn = pgtest.DSN(t)
	}
	return newEnvOn(t, mode, dsn, func(c *Config) {
		c.RowPins = &fleet.RowPinsConfig{Owner: owner, TTL: rowTTL, OnError: func(err error) { t.Logf("row pins: %v", err) }}
		c.ReadRowPins = true
	})
}

// independent opens a connection of its own: what it sees is what every
// other instance sees.
func independent(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func scanInt(t *testing.T, c *pgx.Conn, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := c.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// expiresIn is how far the row (blob, owner) is from expiry, in database
// time; found is false without a row.
func expiresIn(t *testing.T, c *pgx.Conn, blob int64, owner string) (left time.Duration, at time.Time, found bool) {
	t.Helper()
	var us int64
	err := c.QueryRow(context.Background(), `SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1e6)::bigint, expires_at
		FROM pins WHERE blob_id = $1 AND owner = $2`, blob, owner).Scan(&us, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, time.Time{}, false
	}
	if err != nil {
		t.Fatalf("read pin row: %v", err)
	}
	return time.Duration(us) * time.Microsecond, at, true
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func blobOf(t *testing.T, c *pgx.Conn, key string) int64 {
	t.Helper()
	return scanInt(t, c, `SELECT blob_id FROM objects WHERE bucket = 'b' AND key = $1`, key)
}

// TestRowPinRenewal: a held guard's row moves forward every TTL/3 (the
// expiry is TTL from the renewal, in database time); a row whose expiry has
// passed is never renewed (the guard is lost and the row stays expired), and
// the next put of the blob replaces it with a fresh row while the old guard
// stays lost.
func TestRowPinRenewal(t *testing.T) {
	ctx := context.Background()
	v := newRowPinEnv(t, LargePGChunks, "", "A")
	c := independent(t, v.dsn)
	data := randBytes(1, 1<<20)
	v.put(t, "x", data)
	id := blobOf(t, c, "x")
	pin, err := v.e.rowPins.Acquire(ctx, id)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer pin.Release()

	t.Run("renewed every TTL/3", func(t *testing.T) {
		_, first, _ := expiresIn(t, c, id, "A")
		var seen []time.Time
		poll(t, "the row renewed twice", func() bool {
			left, at, ok := expiresIn(t, c, id, "A")
			if !ok {
				t.Fatal("pin row gone")
			}
			if left > rowTTL {
				t.Fatalf("row expires in %s, more than the TTL %s", left, rowTTL)
			}
			if at.After(first) && (len(seen) == 0 || at.After(seen[len(seen)-1])) {
				seen = append(seen, at)
			}
			return len(seen) >= 2
		})
		// The next round is scheduled TTL/3 after the previous one ended.
		if step := seen[1].Sub(seen[0]); step < rowTTL/3-50*time.Millisecond {
			t.Errorf("renewals %s apart, want at least TTL/3 = %s", step, rowTTL/3)
		}
		if !pin.Valid() {
			t.Error("renewed guard not valid")
		}
	})

	t.Run("never resurrected", func(t *testing.T) {
		// The row expires (as if its renewals had failed) before the reaper
		// got to it.
		if _, err := c.Exec(ctx, `UPDATE pins SET expires_at = clock_timestamp() - interval '1 second' WHERE blob_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		got, err := NewRowPinStore(v.e.pool).Renew(ctx, "A", []int64{id}, rowTTL)
		if err != nil || len(got) != 0 {
			t.Fatalf("Renew of an expired row: renewed %v, err %v; want none", got, err)
		}
		poll(t, "the guard lost", func() bool { return !pin.Valid() })
		r := v.e.rowPins.Metrics().Rounds.Load()
		v.put(t, "other", randBytes(2, 1<<20))
		keep, err := v.e.rowPins.Acquire(ctx, blobOf(t, c, "other"))
		if err != nil {
			t.Fatal(err)
		}
		defer keep.Release()
		poll(t, "two more renewal rounds", func() bool { return v.e.rowPins.Metrics().Rounds.Load() >= r+2 })
		if left, _, ok := expiresIn(t, c, id, "A"); !ok || left > 0 {
			t.Fatalf("expired row: found %v, expires in %s; want it still expired", ok, left)
		}
		if pin.Valid() {
			t.Fatal("lost guard valid again")
		}
		// A dedup re-put replaces it: delete the expired row, insert afresh.
		v.put(t, "x2", data)
		if left, _, ok := expiresIn(t, c, id, "A"); !ok || left <= 0 {
			t.Fatalf("after a re-put: found %v, expires in %s; want a fresh row", ok, left)
		}
		if pin.Valid() {
			t.Fatal("the re-put revived the lost guard")
		}
	})
}

// TestRowPinLostStopsGet: a GET whose pin row could not be renewed in time
// (it expired: here set so, as if the renewals had failed) is a lost pin: the
// stream stops with ErrPinLost, never with other bytes.
func TestRowPinLostStopsGet(t *testing.T) {
	ctx := context.Background()
	v := newRowPinEnv(t, LargePGChunks, "", "A")
	c := independent(t, v.dsn)
	data := randBytes(5, 5<<20)
	v.put(t, "x", data)
	_, _, rd, err := v.e.GetObject(ctx, "b", "x", store.GetOptions{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	head := make([]byte, 1)
	if _, err := io.ReadFull(rd, head); err != nil {
		t.Fatal(err)
	}
	m := v.e.rowPins.Metrics()
	if _, err := c.Exec(ctx, `UPDATE pins SET expires_at = clock_timestamp() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	poll(t, "the lost row dropped by a renewal round", func() bool { return m.Held.Load() == 0 })
	rest, err := io.ReadAll(rd)
	if !errors.Is(err, fleet.ErrPinLost) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("stream after its pin row expired: %d more bytes, err %v; want ErrPinLost", len(rest), err)
	}
	if !bytes.Equal(append(head, rest...), data[:1+len(rest)]) {
		t.Fatal("the bytes before the loss are not the object's")
	}
}

// TestRowPinDedupRePut: a dedup re-put commits its pin row with the entry and
// upsert-renews its own (blob, owner) row; another instance's re-put is a row
// of its own. Copies and Complete pin the blobs they reference.
func TestRowPinDedupRePut(t *testing.T) {
	ctx := context.Background()
	a := newRowPinEnv(t, LargePGChunks, "", "A")
	b := newRowPinEnv(t, LargePGChunks, a.dsn, "B")
	c := independent(t, a.dsn)
	data := randBytes(3, 600<<10)
	a.put(t, "one", data)
	id := blobOf(t, c, "one")
	left1, at1, ok := expiresIn(t, c, id, "A")
	if !ok || left1 <= 0 {
		t.Fatalf("first put: pin row found %v, expires in %s", ok, left1)
	}
	a.put(t, "two", data) // dedup, same owner
	_, at2, _ := expiresIn(t, c, id, "A")
	if !at2.After(at1) {
		t.Errorf("dedup re-put did not renew its row: %v then %v", at1, at2)
	}
	b.put(t, "three", data) // dedup, another owner
	if n := scanInt(t, c, `SELECT count(*) FROM pins WHERE blob_id = $1`, id); n != 2 {
		t.Errorf("%d pin rows of the blob, want 2 (one per owner)", n)
	}
	if got := blobOf(t, c, "three"); got != id {
		t.Fatalf("re-put made blob %d, want the dedup of %d", got, id)
	}

	// CopyObject and UploadPartCopy reference blobs without a put.
	if _, err := c.Exec(ctx, `DELETE FROM pins`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.e.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "one"}, "b", "copy", store.CopyOptions{}); err != nil {
		t.Fatalf("CopyObject: %v", err)
	}
	if _, _, ok := expiresIn(t, c, id, "B"); !ok {
		t.Error("CopyObject committed no pin row of the blob it references")
	}
	u, err := a.e.CreateMultipartUpload(ctx, "b", "mp", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	p1, err := a.e.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: "one"}, "b", "mp", u.UploadID, 1)
	if err != nil {
		t.Fatalf("UploadPartCopy: %v", err)
	}
	if _, _, ok := expiresIn(t, c, id, "A"); !ok {
		t.Error("UploadPartCopy committed no pin row of the blob it references")
	}
	if _, err := c.Exec(ctx, `DELETE FROM pins`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.e.CompleteMultipartUpload(ctx, "b", "mp", u.UploadID,
		[]store.CompletePart{{Number: 1, ETag: p1.ETag}}, store.PutOptions{}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if _, _, ok := expiresIn(t, c, id, "A"); !ok {
		t.Error("Complete committed no pin row of its part blob")
	}
}

// TestRowPinJointPut: the entry, the object row and the pin row of a put land
// in one transaction: an independent connection sees none of them while the
// transaction is held open before COMMIT, and all after it. A failure at that
// point (the last step of the driver; with files, the pin-first step)
// (amendment A1) leaves no row, no content and no dirty pooled session.
func TestRowPinJointPut(t *testing.T) {
	ctx := context.Background()
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newRowPinEnv(t, mode, "", "A")
			c := independent(t, v.dsn)
			// Content in the database is owned by its stage row until the
			// joint transaction claims it (ADR 007): the claim commits with
			// the entry, the object row and the pin row.
			visible := func() (blobs, objects, pins, stages int64) {
				return scanInt(t, c, `SELECT count(*) FROM blobs`), scanInt(t, c, `SELECT count(*) FROM objects`),
					scanInt(t, c, `SELECT count(*) FROM pins`), scanInt(t, c, `SELECT count(*) FROM blob_stages`)
			}
			inTx := make(chan struct{})
			resume := make(chan error)
			// Between the pin row and COMMIT, inside the driver.
			v.e.afterPinRows = func(pgx.Tx) error {
				inTx <- struct{}{}
				return <-resume
			}
			sizes := []int{1 << 10, 700 << 10} // inline, then large
			if mode == LargeLocal {
				sizes = sizes[:1] // files put pin first, in two steps: TestRowPinFirst
			}
			for _, size := range sizes {
				data := randBytes(uint64(size), size)
				done := make(chan error, 1)
				go func() {
					_, err := v.e.PutObject(ctx, "b", "k", bytes.NewReader(data), store.PutOptions{Size: int64(size)})
					done <- err
				}()
				<-inTx
				b0, o0, p0, s0 := visible()
				resume <- nil
				if err := <-done; err != nil {
					t.Fatalf("put %d bytes: %v", size, err)
				}
				b1, o1, p1, s1 := visible()
				if b0+o0+p0 != 0 || b1 != 1 || o1 != 1 || p1 != 1 {
					t.Errorf("put %d bytes: blobs, objects, pins seen %d, %d, %d before COMMIT and %d, %d, %d after it; want none, then all",
						size, b0, o0, p0, b1, o1, p1)
				}
				if staged := size > testKnee && mode != LargeLocal; s0 != map[bool]int64{true: 1}[staged] || s1 != 0 {
					t.Errorf("put %d bytes: %d stage rows before COMMIT, %d after; want the content claimed at COMMIT", size, s0, s1)
				}
				_, _, got := v.get(t, "k", store.GetOptions{}) // through a row pin
				sameBytes(t, "read back", got, data)
				wipe(t, v, c)
			}

			// A forced failure between the pin row and COMMIT.
			data := randBytes(9, 700<<10)
			done := make(chan error, 1)
			go func() {
				_, err := v.e.PutObject(ctx, "b", "fail", bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
				done <- err
			}()
			<-inTx
			resume <- errors.New("injected failure")
			if err := <-done; err == nil {
				t.Fatal("put succeeded through an injected failure")
			}
			v.e.afterPinRows = nil
			for what, q := range map[string]string{
				"blob rows": `SELECT count(*) FROM blobs`, "object rows": `SELECT count(*) FROM objects`,
				"pin rows": `SELECT count(*) FROM pins`, "stage rows": `SELECT count(*) FROM blob_stages`,
				"chunk rows": `SELECT count(*) FROM blob_chunks`, "large objects": `SELECT count(*) FROM pg_largeobject_metadata`,
			} {
				if n := scanInt(t, c, q); n != 0 {
					t.Errorf("after the failed put: %d %s", n, what)
				}
			}
			if v.media != nil {
				ids, err := v.media.BlobIDs(ctx)
				if err != nil || len(ids) != 0 {
					t.Errorf("after the failed put: blob files %v (err %v)", ids, err)
				}
				if sf, err := v.media.StageFiles(); err != nil || len(sf) != 0 {
					t.Errorf("after the failed put: stage files %v (err %v)", sf, err)
				}
			}
			v.assertPoolClean(t)
		})
	}
}

// wipe deletes every object and blob with its content.
func wipe(t *testing.T, v *env, c *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	if v.media != nil {
		ids, err := v.media.BlobIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if err := v.media.Remove(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := c.Exec(ctx, `DELETE FROM objects; DELETE FROM pins; DELETE FROM blob_chunks; DELETE FROM blobs;
		SELECT lo_unlink(oid) FROM pg_largeobject_metadata`); err != nil {
		t.Fatal(err)
	}
}

// TestRowPinFirst: with files and row pins, the pin commits first (a
// placeholder blob row and its pin row, seen from an independent connection)
// while the committed file does not exist yet and nothing references the row;
// then the file is placed and the entry and object rows commit. A dedup
// re-put drops its placeholder row and file; a refused conditional put leaves
// nothing behind.
func TestRowPinFirst(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	c := independent(t, dsn)
	var v *env
	var seen []int64
	v = newEnvOn(t, LargeLocal, dsn, func(cfg *Config) {
		cfg.RowPins = &fleet.RowPinsConfig{Owner: "A", TTL: rowTTL}
		cfg.testHookPinned = func(id int64) {
			if _, _, ok := expiresIn(t, c, id, "A"); !ok {
				t.Errorf("blob %d: no durable pin row before its file is placed", id)
			}
			if n := scanInt(t, c, `SELECT count(*) FROM objects WHERE blob_id = $1`, id); n != 0 {
				t.Errorf("blob %d referenced before its file exists", id)
			}
			if _, err := v.media.Open(ctx, id, 0, 1); err == nil {
				t.Errorf("blob %d: file exists before the pin-first step placed it", id)
			}
			seen = append(seen, id)
		}
	})
	data := randBytes(21, 700<<10)
	v.put(t, "k", data)
	if len(seen) != 1 || blobOf(t, c, "k") != seen[0] {
		t.Fatalf("pin-first steps %v; object k references blob %d", seen, blobOf(t, c, "k"))
	}
	_, _, got := v.get(t, "k", store.GetOptions{})
	sameBytes(t, "k", got, data)

	v.put(t, "k2", data) // dedup: the second placeholder goes
	if len(seen) != 2 || blobOf(t, c, "k2") != seen[0] {
		t.Fatalf("dedup re-put: steps %v; k2 references blob %d, want %d", seen, blobOf(t, c, "k2"), seen[0])
	}
	_, err := v.e.PutObject(ctx, "b", "k", bytes.NewReader(randBytes(22, 700<<10)), store.PutOptions{Size: 700 << 10, IfNoneMatch: "*"})
	if !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("conditional put over an existing key: %v, want PreconditionFailed", err)
	}
	if len(seen) != 3 {
		t.Fatalf("pin-first steps %v, want 3", seen)
	}
	ids, err := v.media.BlobIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != seen[0] {
		t.Errorf("blob files %v, want only %d", ids, seen[0])
	}
	if n := scanInt(t, c, `SELECT count(*) FROM blobs`); n != 1 {
		t.Errorf("%d blob rows, want 1 (the placeholders dropped)", n)
	}
	if n := scanInt(t, c, `SELECT count(*) FROM pins WHERE blob_id <> $1`, seen[0]); n != 0 {
		t.Errorf("%d pin rows of placeholders left", n)
	}
	v.assertPoolClean(t)
}

// TestRowPinReplaceRacesGC: while GC's deleting transaction runs on a blob,
// a dedup re-put and a GET's pin replace the owner's expired pin row of that
// blob, over and over. Neither fails: the lock order of ADR 010 leaves no
// cycle for PostgreSQL to break with a deadlock error.
func TestRowPinReplaceRacesGC(t *testing.T) {
	ctx := context.Background()
	v := newRowPinEnv(t, LargePGChunks, "", "A")
	c := independent(t, v.dsn)
	data := randBytes(31, 600<<10)
	v.put(t, "x", data)
	id := blobOf(t, c, "x")
	g := NewGC(v.e.pool)
	pins := NewRowPinStore(v.e.pool)
	for i := range 40 {
		if _, err := c.Exec(ctx, `UPDATE pins SET expires_at = clock_timestamp() - interval '1 second' WHERE blob_id = $1`, id); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 3)
		go func() {
			errc <- g.InTx(ctx, 5*time.Second, func(tx store.GCTx) (bool, error) {
				_, verdict, err := tx.DeleteBlob(ctx, id)
				if err == nil && verdict == store.GCDone {
					err = errors.New("GC deleted a referenced blob")
				}
				return false, err
			})
		}()
		go func() {
			_, err := v.e.PutObject(ctx, "b", fmt.Sprintf("re-put-%d", i), bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
			errc <- err
		}()
		go func() { errc <- pins.Pin(ctx, id, "A", rowTTL) }()
		for range 3 {
			if err := <-errc; err != nil {
				t.Fatalf("iteration %d: %v", i, err)
			}
		}
	}
}
