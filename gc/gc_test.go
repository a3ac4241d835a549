package gc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
)

// garbage puts key with data and deletes it, leaving one unreferenced blob.
func (v *env) garbage(t *testing.T, key string, data []byte) int64 {
	t.Helper()
	ctx := context.Background()
	if err := v.put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	id := v.blobOf(t, key)
	if err := v.eng.DeleteObject(ctx, v.bucket, key); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestSweepReclaims(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			small, large := content(1), content(4) // 300 B inline, 3000 B large
			idSmall := v.garbage(t, "small", small)
			idLarge := v.garbage(t, "large", large)
			if err := v.put(ctx, "kept", content(5)); err != nil {
				t.Fatal(err)
			}
			// Young blobs are protected by the default grace.
			st, err := Sweep(ctx, v.db, Options{Media: v.media})
			if err != nil {
				t.Fatal(err)
			}
			if st.BlobsDeleted != 0 || !v.blobExists(t, idSmall) || !v.blobExists(t, idLarge) {
				t.Fatalf("grace ignored: %+v", st)
			}
			st, err = Sweep(ctx, v.db, v.opts())
			if err != nil {
				t.Fatal(err)
			}
			if st.BlobsDeleted != 2 || st.BytesReclaimed != int64(len(small)+len(large)) {
				t.Fatalf("stats %+v, want 2 blobs and %d bytes", st, len(small)+len(large))
			}
			if v.blobExists(t, idSmall) || v.blobExists(t, idLarge) {
				t.Fatal("unreferenced blobs survived")
			}
			v.assertNoOrphans(t)
			if err := v.check(ctx, "kept", content(5)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPinStopsDeletion: a GET's shared pin (simulated on another session)
// makes the exclusive try-lock fail, and the blob is skipped until released.
func TestPinStopsDeletion(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			id := v.garbage(t, "k", content(4))
			conn, err := pgx.ConnectConfig(ctx, v.pool.Config().ConnConfig.Copy())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, BlobLockKey(id)); err != nil {
				t.Fatal(err)
			}
			st, err := Sweep(ctx, v.db, v.opts())
			if err != nil {
				t.Fatal(err)
			}
			if st.SkippedPinned != 1 || st.BlobsDeleted != 0 || !v.blobExists(t, id) {
				t.Fatalf("pinned blob not skipped: %+v", st)
			}
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock_shared($1)`, BlobLockKey(id)); err != nil {
				t.Fatal(err)
			}
			st, err = Sweep(ctx, v.db, v.opts())
			if err != nil {
				t.Fatal(err)
			}
			if st.BlobsDeleted != 1 || v.blobExists(t, id) {
				t.Fatalf("unpinned blob not deleted: %+v", st)
			}
			v.assertNoOrphans(t)
		})
	}
}

// TestReferenceInFlight: a reference being inserted while the sweep deletes
// decides the outcome by its own fate. The sweep's DELETE waits on the blob
// row lock that the referencing transaction holds, and the foreign-key check
// then sees the committed reference with a fresh snapshot.
func TestReferenceInFlight(t *testing.T) {
	tests := []struct {
		name        string
		upsert      bool // first re-publish the blob like a dedup put
		commit      bool
		wantDeleted bool
	}{
		{"reference commits", false, true, false},
		{"dedup upsert and reference commit", true, true, false},
		{"reference rolls back", false, false, true},
		{"dedup upsert rolls back", true, false, true},
	}
	for _, mode := range modes {
		for _, tt := range tests {
			t.Run(mode+"/"+tt.name, func(t *testing.T) {
				v := newEnv(t, mode)
				ctx := context.Background()
				data := content(4)
				id := v.garbage(t, "old", data)
				tx, err := v.pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx)
				if tt.upsert {
					var got int64
					if err := tx.QueryRow(ctx, `INSERT INTO blobs (sha256, size, tier, inline_data, lo_oid)
						SELECT sha256, size, tier, inline_data, lo_oid FROM blobs WHERE id = $1
						ON CONFLICT (sha256) DO UPDATE SET sha256 = EXCLUDED.sha256 RETURNING id`, id).Scan(&got); err != nil {
						t.Fatal(err)
					}
					if got != id {
						t.Fatalf("upsert found blob %d, want %d", got, id)
					}
				}
				if _, err := tx.Exec(ctx, `INSERT INTO objects (bucket, key, blob_id, size, etag) VALUES ($1, 'new', $2, $3, 'e')`,
					v.bucket, id, len(data)); err != nil {
					t.Fatal(err)
				}
				type result struct {
					st  Stats
					err error
				}
				done := make(chan result, 1)
				go func() {
					st, err := Sweep(ctx, v.db, v.opts())
					done <- result{st, err}
				}()
				v.waitLockWaiters(t, 1)
				if tt.commit {
					err = tx.Commit(ctx)
				} else {
					err = tx.Rollback(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
				r := <-done
				if r.err != nil {
					t.Fatal(r.err)
				}
				if got := !v.blobExists(t, id); got != tt.wantDeleted {
					t.Fatalf("deleted = %v, want %v (stats %+v)", got, tt.wantDeleted, r.st)
				}
				if !tt.wantDeleted {
					if r.st.SkippedReferenced != 1 {
						t.Fatalf("stats %+v, want one referenced skip", r.st)
					}
					if err := v.check(ctx, "new", data); err != nil {
						t.Fatal(err)
					}
				}
				v.assertNoOrphans(t)
			})
		}
	}
}

// TestPutWhileDeleting: the other order. The sweep has deleted the row but
// not committed (held in its guard) when a put of the same content arrives:
// the put waits, then publishes a NEW blob (new id, new large object, chunk
// rows or file), which the removal of the old one cannot touch.
func TestPutWhileDeleting(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			data := content(10) // 3000 B: large tier
			id := v.garbage(t, "old", data)
			inGuard, release := make(chan struct{}), make(chan struct{})
			opts := v.opts()
			opts.Guard = func(context.Context) error {
				close(inGuard)
				<-release
				return nil
			}
			done := make(chan error, 1)
			go func() {
				st, err := Sweep(ctx, v.db, opts)
				if err == nil && st.BlobsDeleted != 1 {
					err = fmt.Errorf("stats %+v, want one deletion", st)
				}
				done <- err
			}()
			<-inGuard
			putDone := make(chan error, 1)
			go func() { putDone <- v.put(ctx, "new", data) }()
			v.waitLockWaiters(t, 1)
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := <-putDone; err != nil {
				t.Fatal(err)
			}
			if nid := v.blobOf(t, "new"); nid == id {
				t.Fatalf("the put reused blob %d that was being deleted", id)
			}
			if err := v.check(ctx, "new", data); err != nil {
				t.Fatal(err)
			}
			v.assertNoOrphans(t)
		})
	}
}

// TestGuardRefusal: a guard error rolls the deletion back and stops the sweep.
func TestGuardRefusal(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			id := v.garbage(t, "k", content(4))
			opts := v.opts()
			errLost := errors.New("lease lost")
			opts.Guard = func(context.Context) error { return errLost }
			st, err := Sweep(context.Background(), v.db, opts)
			if !errors.Is(err, errLost) {
				t.Fatalf("err = %v, want the guard's error", err)
			}
			if st.BlobsDeleted != 0 || !v.blobExists(t, id) {
				t.Fatalf("deleted despite the guard: %+v", st)
			}
			if v.media != nil {
				if ids, _ := v.media.BlobIDs(context.Background()); len(ids) != 1 {
					t.Fatalf("files %v, want the blob's file kept", ids)
				}
			}
		})
	}
}

// TestReapers covers each reaper's grace and its removal.
func TestReapers(t *testing.T) {
	ctx := context.Background()
	t.Run("uploads", func(t *testing.T) {
		v := newEnv(t, "pglo")
		u, err := v.eng.CreateMultipartUpload(ctx, v.bucket, "mp", store.ObjectMeta{}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		data := content(4)
		if _, err := v.eng.UploadPart(ctx, v.bucket, "mp", u.UploadID, 1, strings.NewReader(string(data)), store.PutOptions{Size: int64(len(data))}); err != nil {
			t.Fatal(err)
		}
		if st := v.settle(t); st.UploadsAborted != 0 || st.BlobsDeleted != 0 {
			t.Fatalf("a young upload was reaped: %+v", st)
		}
		if _, err := v.pool.Exec(ctx, `UPDATE uploads SET initiated = initiated - interval '8 days'`); err != nil {
			t.Fatal(err)
		}
		st := v.settle(t)
		if st.UploadsAborted != 1 || st.BlobsDeleted != 1 {
			t.Fatalf("stats %+v, want the upload aborted and its part blob deleted", st)
		}
		if v.count(t, `SELECT count(*) FROM uploads`)+v.count(t, `SELECT count(*) FROM blobs`) != 0 {
			t.Fatal("upload or blob left")
		}
		v.assertNoOrphans(t)
	})
	t.Run("large objects", func(t *testing.T) {
		v := newEnv(t, "pglo")
		if err := v.put(ctx, "kept", content(4)); err != nil {
			t.Fatal(err)
		}
		var oid uint32
		if err := v.pool.QueryRow(ctx, `SELECT lo_from_bytea(0, 'crash leftover')`).Scan(&oid); err != nil {
			t.Fatal(err)
		}
		n, err := ReapLargeObjects(ctx, v.db, Options{})
		if err != nil || n != 0 {
			t.Fatalf("first sighting unlinked %d (%v); the grace runs from the first sighting", n, err)
		}
		if _, err := v.pool.Exec(ctx, `UPDATE gc_lo_sightings SET first_seen = first_seen - interval '2 minutes'`); err != nil {
			t.Fatal(err)
		}
		if n, err = ReapLargeObjects(ctx, v.db, Options{}); err != nil || n != 1 {
			t.Fatalf("unlinked %d (%v), want the orphan", n, err)
		}
		if v.count(t, `SELECT count(*) FROM gc_lo_sightings`) != 0 {
			t.Fatal("sighting not forgotten")
		}
		v.assertNoOrphans(t)
		if err := v.check(ctx, "kept", content(4)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("stage files", func(t *testing.T) {
		v := newEnv(t, "local")
		sf, err := v.media.Stage(ctx, strings.NewReader("leftover"))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := ReapStageFiles(ctx, v.media, Options{}); err != nil || n != 0 {
			t.Fatalf("young stage file removed: %d %v", n, err)
		}
		old := time.Now().Add(-2 * time.Hour)
		if err := os.Chtimes(sf.Path(), old, old); err != nil {
			t.Fatal(err)
		}
		if n, err := ReapStageFiles(ctx, v.media, Options{}); err != nil || n != 1 {
			t.Fatalf("old stage file: removed %d (%v), want 1", n, err)
		}
		v.assertNoOrphans(t)
	})
	t.Run("blob files", func(t *testing.T) {
		v := newEnv(t, "local")
		if err := v.put(ctx, "kept", content(4)); err != nil {
			t.Fatal(err)
		}
		publish := func(id int64) {
			sf, err := v.media.Stage(ctx, strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			if err := v.media.Publish(ctx, sf, id); err != nil {
				t.Fatal(err)
			}
		}
		publish(1_000_000) // a crash's leftover: no row ever
		if n, err := ReapBlobFiles(ctx, v.db, v.media, Options{}); err != nil || n != 0 {
			t.Fatalf("young file removed: %d %v", n, err)
		}
		// A put in flight: its row is inserted but not committed. The probe
		// waits for it; here it times out and the file stays.
		tx, err := v.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO blobs (id, sha256, size, tier) VALUES (2000000, sha256('in flight'), 1, 'local')`); err != nil {
			t.Fatal(err)
		}
		publish(2_000_000)
		opts := v.opts()
		opts.LockTimeout = 100 * time.Millisecond
		n, err := ReapBlobFiles(ctx, v.db, v.media, opts)
		if err != nil || n != 1 {
			t.Fatalf("removed %d (%v), want only the leftover", n, err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if n, err := ReapBlobFiles(ctx, v.db, v.media, v.opts()); err != nil || n != 0 {
			t.Fatalf("removed %d (%v) after the put committed, want 0", n, err)
		}
		ids, err := v.media.BlobIDs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids) != fmt.Sprintf("[%d 2000000]", v.blobOf(t, "kept")) {
			t.Fatalf("files %v", ids)
		}
		if v.count(t, `SELECT count(*) FROM blobs WHERE id = 1000000`) != 0 {
			t.Fatal("a probe row was committed")
		}
	})
}

// TestSentinelDetectsReset: when the server drops the sentinel session (as a
// backend crash drops every session), the guard check fails, so no deletion
// can commit afterwards in that run.
func TestSentinelDetectsReset(t *testing.T) {
	v := newEnv(t, "pgchunks")
	ctx := context.Background()
	check, closeSentinel, err := pg.NewGC(v.pool).Sentinel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeSentinel()
	if err := check(ctx); err != nil {
		t.Fatalf("fresh sentinel: %v", err)
	}
	pid := v.count(t, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, pg.SentinelApp)
	if v.count(t, `SELECT count(*) FROM (SELECT pg_terminate_backend($1::int, 30000) AS gone) t WHERE gone`, pid) != 1 {
		t.Fatal("terminate failed")
	}
	if err := check(ctx); err == nil {
		t.Fatal("sentinel check passed after its session was terminated")
	}
	id := v.garbage(t, "k", content(4))
	opts := v.opts()
	opts.Guard = check
	if _, err := Sweep(ctx, v.db, opts); err == nil || !v.blobExists(t, id) {
		t.Fatalf("deleted after a session reset: err %v", err)
	}
}
