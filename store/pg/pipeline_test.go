package pg

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// TestSmallPutRoundTrips: a small PUT is two round trips (BEGIN, the lock,
// the blob's insert and lookup, the current row; then the object row with
// COMMIT) and seven statements, whether its content is new, a duplicate or
// overwrites the key; the separate bucket check is gone.
func TestSmallPutRoundTrips(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	ctx := context.Background()
	c := countStatements(t, v)
	v.put(t, "warm", randBytes(1, 4<<10)) // prepares the statements on the connection
	for _, tc := range []struct {
		name, key string
		seed      uint64
	}{
		{"new content", "a", 2},
		{"duplicate content", "b", 2},
		{"overwrite", "a", 3},
		{"empty object", "e", 4},
	} {
		data := randBytes(tc.seed, 4<<10)
		if tc.key == "e" {
			data = nil
		}
		n0, r0 := c.n.Load(), c.trips.Load()
		info, err := v.e.PutObject(ctx, "b", tc.key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n, r := c.n.Load()-n0, c.trips.Load()-r0; n != 7 || r != 2 {
			t.Errorf("%s: %d statements in %d round trips, want 7 in 2", tc.name, n, r)
		}
		got, _, body := v.get(t, tc.key, store.GetOptions{})
		sameBytes(t, tc.name, body, data)
		if !got.LastModified.Equal(info.LastModified) {
			t.Errorf("%s: last modified %v stored, %v acknowledged", tc.name, got.LastModified, info.LastModified)
		}
	}
	if n := v.count(t, `SELECT count(*) FROM blobs`); n != 4 {
		t.Errorf("%d blob rows, want 4 (the duplicate shares one)", n)
	}
}

// TestPipelinedPutLastModified: successive puts of a key, each pipelined
// with its last_modified read before the lock holder's COMMIT, are ordered.
func TestPipelinedPutLastModified(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	var last time.Time
	for i := range 20 {
		info := v.put(t, "k", randBytes(uint64(i), 100))
		if !info.LastModified.After(last) {
			t.Fatalf("put %d: last modified %v, not after the previous %v", i, info.LastModified, last)
		}
		last = info.LastModified
	}
}

// TestPipelinedPutFailures: a failing statement of either pipeline, a
// missing bucket (the deferred object row's foreign key) and a context
// cancelled mid-pipeline each fail the put, leave no rows and give back no
// connection in a transaction (amendment A1); only a failure after COMMIT
// was sent is a CommitError.
func TestPipelinedPutFailures(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	ctx := context.Background()
	c := independent(t, v.dsn)
	for _, sql := range []string{
		`CREATE FUNCTION test_fail_blob() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.size = 777 THEN RAISE EXCEPTION 'injected blob failure'; END IF; RETURN NEW; END $$`,
		`CREATE TRIGGER test_fail_blob BEFORE INSERT ON blobs FOR EACH ROW EXECUTE FUNCTION test_fail_blob()`,
		`CREATE FUNCTION test_fail_object() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.key = 'fail' THEN RAISE EXCEPTION 'injected object failure'; END IF;
			IF NEW.key = 'block' THEN PERFORM pg_advisory_xact_lock(4242); END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER test_fail_object BEFORE INSERT ON objects FOR EACH ROW EXECUTE FUNCTION test_fail_object()`,
	} {
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	put := func(ctx context.Context, bucket, key string, size int) error {
		_, err := v.e.PutObject(ctx, bucket, key, bytes.NewReader(randBytes(9, size)), store.PutOptions{Size: int64(size)})
		return err
	}
	// waitLockWait polls until some session waits for an advisory lock.
	waitLockWait := func() {
		t.Helper()
		for scanInt(t, c, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`) == 0 {
			time.Sleep(5 * time.Millisecond) // polling a condition, not synchronizing
		}
	}
	clean := func(name string) {
		t.Helper()
		// A cancelled put's server session may still run to its end.
		for scanInt(t, c, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
				AND (state <> 'idle' OR wait_event_type = 'Lock')`) > 0 {
			time.Sleep(5 * time.Millisecond)
		}
		if n := scanInt(t, c, `SELECT count(*) FROM objects WHERE key <> 'block'`) + scanInt(t, c, `SELECT count(*) FROM blobs WHERE size <> 100`); n != 0 {
			t.Errorf("%s: %d rows left", name, n)
		}
		v.assertPoolClean(t)
	}

	for _, tc := range []struct {
		name, bucket, key string
		size              int
		want              error // nil: any error but a CommitError
	}{
		{"first pipeline: blob insert fails", "b", "k", 777, nil},
		{"deferred object row fails", "b", "fail", 10, nil},
		{"deferred object row: missing bucket", "nope", "k", 10, store.ErrNoSuchBucket},
	} {
		err := put(ctx, tc.bucket, tc.key, tc.size)
		var ce *protocol.CommitError
		switch {
		case err == nil:
			t.Errorf("%s: put succeeded", tc.name)
		case errors.As(err, &ce):
			t.Errorf("%s: %v is a CommitError; the failure is a known rollback", tc.name, err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		clean(tc.name)
	}

	// Cancelled while the first pipeline waits for the key's lock.
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1)`, objectLockKey("b", "k")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- put(cctx, "b", "k", 100) }()
	waitLockWait()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("put cancelled in its first pipeline: %v, want context.Canceled", err)
	}
	if _, err := c.Exec(ctx, `SELECT pg_advisory_unlock($1)`, objectLockKey("b", "k")); err != nil {
		t.Fatal(err)
	}
	clean("cancelled in the first pipeline")

	// Cancelled while the deferred row (blocked in its trigger) and COMMIT
	// are in flight: the outcome is unknown, a CommitError.
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	cctx, cancel = context.WithCancel(ctx)
	go func() { done <- put(cctx, "b", "block", 100) }()
	waitLockWait()
	cancel()
	var ce *protocol.CommitError
	if err := <-done; !errors.As(err, &ce) {
		t.Errorf("put cancelled with its COMMIT sent: %v, want a CommitError", err)
	}
	if _, err := c.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	clean("cancelled in the commit pipeline")

	// The engine still works on the connections it kept.
	v.put(t, "after", randBytes(10, 100))
	v.assertPoolClean(t)
}

// TestSmallInlineRowsUntoasted: inline content that fits a heap page stays
// in the blobs row (migration 0013): a 4 KiB put writes no TOAST chunks,
// while larger inline content is still moved out of line.
func TestSmallInlineRowsUntoasted(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	var toast string
	if err := v.e.pool.QueryRow(context.Background(),
		`SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'blobs'::regclass`).Scan(&toast); err != nil {
		t.Fatalf("toast relation of blobs: %v", err)
	}
	for i, tc := range []struct {
		name      string
		size      int
		outOfLine bool
	}{
		{"4 KiB", 4 << 10, false},
		{"7 KiB", 7 << 10, false},
		{"32 KiB", 32 << 10, true},
	} {
		if tc.size >= testKnee {
			t.Fatalf("%s: not below the test knee %d: not inline", tc.name, testKnee)
		}
		before := v.count(t, `SELECT count(*) FROM `+toast)
		v.put(t, tc.name, randBytes(uint64(100+i), tc.size))
		if got := v.count(t, `SELECT count(*) FROM `+toast) > before; got != tc.outOfLine {
			t.Errorf("%s: TOAST chunks written %v, want %v", tc.name, got, tc.outOfLine)
		}
		if n := v.count(t, `SELECT count(*) FROM blobs WHERE size = $1 AND tier = 'inline'`, tc.size); n != 1 {
			t.Errorf("%s: %d inline blob rows of that size, want 1", tc.name, n)
		}
	}
}

// TestBlobLookupLockOrder: the pipelined put locks the blob row it looks up
// (FOR KEY SHARE) before it locks the object row (FOR UPDATE), so that it
// never holds the object row while it waits for GC's lock on the blob (GC's
// DELETE of the blob checks, through the foreign key, the object rows that
// point at it: the other order could deadlock). A session that holds the
// blob row FOR UPDATE, as GC does before it deletes, makes the put wait in
// its lookup with the key's object row still unlocked; when GC keeps the row
// the put references it, when GC deletes it the put inserts a new blob.
func TestBlobLookupLockOrder(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name   string
		delete bool
	}{
		{"GC keeps the blob", false},
		{"GC deletes the blob", true},
	} {
		v := newEnv(t, LargePGChunks)
		gc, other := independent(t, v.dsn), independent(t, v.dsn)
		data := randBytes(uint64(50+i), 100)
		v.put(t, "k", randBytes(uint64(60+i), 100)) // the object row the put overwrites
		v.put(t, "tmp", data)
		if err := v.e.DeleteObject(ctx, "b", "tmp"); err != nil {
			t.Fatal(err)
		}
		var oldID int64
		if err := gc.QueryRow(ctx, `SELECT id FROM blobs WHERE size = 100 AND id NOT IN (SELECT blob_id FROM objects)`).Scan(&oldID); err != nil {
			t.Fatalf("%s: the unreferenced blob: %v", tc.name, err)
		}
		gtx, err := gc.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gtx.Exec(ctx, `SELECT id FROM blobs WHERE id = $1 FOR UPDATE`, oldID); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := v.e.PutObject(ctx, "b", "k", bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
			done <- err
		}()
		// Polling a condition: the put waits for gc's transaction.
		for scanInt(t, other, `SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted`) == 0 {
			select {
			case err := <-done:
				t.Fatalf("%s: the put (%v) did not wait for the locked blob row", tc.name, err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		tx, err := other.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM objects WHERE bucket = 'b' AND key = 'k' FOR UPDATE NOWAIT`); err != nil {
			t.Errorf("%s: the object row, while the put waits for the blob row: %v; want it not yet locked", tc.name, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		end := gtx.Rollback
		if tc.delete {
			if _, err := gtx.Exec(ctx, `DELETE FROM blobs WHERE id = $1`, oldID); err != nil {
				t.Fatal(err)
			}
			end = gtx.Commit
		}
		if err := end(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: put: %v", tc.name, err)
		}
		_, _, body := v.get(t, "k", store.GetOptions{})
		sameBytes(t, tc.name, body, data)
		var newID int64
		if err := other.QueryRow(ctx, `SELECT blob_id FROM objects WHERE bucket = 'b' AND key = 'k'`).Scan(&newID); err != nil {
			t.Fatal(err)
		}
		if got := newID == oldID; got == tc.delete {
			t.Errorf("%s: the put references blob %d, the locked one was %d", tc.name, newID, oldID)
		}
	}
}
