package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/storetest"
)

// testKnee keeps test content small while still crossing the knee.
const testKnee = 64 << 10

// Helpers shared with the store suite (store/storetest), which runs the
// engine's behaviour tests.
var (
	content = storetest.Bytes
	md5hex  = storetest.MD5Hex
)

func newEngine(t *testing.T) *Engine {
	t.Helper()
	return openAt(t, t.TempDir())
}

func openAt(t *testing.T, dir string) *Engine {
	t.Helper()
	e, err := Open(context.Background(), Config{Dir: dir, InlineMax: testKnee})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

func mkBucket(t *testing.T, e *Engine, name string) {
	t.Helper()
	if err := e.CreateBucket(context.Background(), name, ""); err != nil {
		t.Fatalf("CreateBucket %s: %v", name, err)
	}
}

func put(t *testing.T, e *Engine, bucket, key string, data []byte) store.ObjectInfo {
	t.Helper()
	info, err := e.PutObject(context.Background(), bucket, key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	if err != nil {
		t.Fatalf("PutObject %s/%s: %v", bucket, key, err)
	}
	return info
}

// get reads an object whole (or the selected range) and returns its bytes.
func get(t *testing.T, e *Engine, bucket, key string, opts store.GetOptions) (store.ObjectInfo, *store.ByteRange, []byte) {
	t.Helper()
	info, rng, rd, err := e.GetObject(context.Background(), bucket, key, opts, false)
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	defer func() {
		if err := rd.Close(); err != nil {
			t.Errorf("close reader: %v", err)
		}
	}()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	return info, rng, b
}

func count(t *testing.T, e *Engine, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.rdb.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// multipartObject uploads parts of the given sizes and completes them.
func multipartObject(t *testing.T, e *Engine, bucket, key string, sizes []int, seed uint64) ([]byte, store.ObjectInfo) {
	t.Helper()
	ctx := context.Background()
	u, err := e.CreateMultipartUpload(ctx, bucket, key, store.ObjectMeta{ContentType: "app/x"}, store.AlgCRC32C, "")
	if err != nil {
		t.Fatal(err)
	}
	var all []byte
	var cps []store.CompletePart
	for i, n := range sizes {
		data := content(seed+uint64(i), n)
		all = append(all, data...)
		pi, err := e.UploadPart(ctx, bucket, key, u.UploadID, i+1, bytes.NewReader(data), store.PutOptions{Size: int64(n)})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", i+1, err)
		}
		if pi.ETag != md5hex(data) || pi.Checksum.Algorithm != store.AlgCRC32C {
			t.Fatalf("part %d = %+v", i+1, pi)
		}
		cps = append(cps, store.CompletePart{Number: i + 1, ETag: pi.ETag})
	}
	info, err := e.CompleteMultipartUpload(ctx, bucket, key, u.UploadID, cps, store.PutOptions{})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	return all, info
}

func TestPinsAndReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	data := content(9, testKnee*2)
	{
		e, err := Open(ctx, Config{Dir: dir, InlineMax: testKnee})
		if err != nil {
			t.Fatal(err)
		}
		mkBucket(t, e, "b")
		put(t, e, "b", "k", data)
		_, _, rd, err := e.GetObject(ctx, "b", "k", store.GetOptions{}, false)
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := e.rdb.QueryRow(`SELECT blob_id FROM objects WHERE key = 'k'`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if !e.Pinned(id) {
			t.Error("blob of an open reader is not pinned")
		}
		if err := rd.Close(); err != nil {
			t.Fatal(err)
		}
		if e.Pinned(id) || e.PinCount() != 0 {
			t.Error("pin outlived its reader")
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Reopening applies no migration twice and serves the same bytes.
	e := openAt(t, dir)
	if _, _, b := get(t, e, "b", "k", store.GetOptions{}); !bytes.Equal(b, data) {
		t.Error("content differs after reopen")
	}
	applied, known, err := e.SchemaVersion(ctx)
	if err != nil || applied != known || known < 1 {
		t.Errorf("schema version %d/%d, %v", applied, known, err)
	}
	if err := e.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// TestOrphanFileReplaced: a file left at the next blob id (a publish whose
// transaction then rolled back, or a crash before COMMIT) is replaced by the
// next put, not served and not an error.
func TestOrphanFileReplaced(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	mkBucket(t, e, "b")
	put(t, e, "b", "first", content(1, testKnee*2))
	var last int64
	if err := e.rdb.QueryRow(`SELECT max(id) FROM blobs`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	sf, err := e.media.Stage(ctx, bytes.NewReader([]byte("orphan bytes")))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.media.Publish(ctx, sf, last+1); err != nil {
		t.Fatal(err)
	}
	data := content(2, testKnee*2)
	put(t, e, "b", "second", data)
	if _, _, b := get(t, e, "b", "second", store.GetOptions{}); !bytes.Equal(b, data) {
		t.Error("served the orphan's bytes")
	}
}

// TestFailedWriteLeavesWriterClean: an error or a panic after BEGIN rolls the
// transaction back and the single writer connection serves the next write.
func TestFailedWriteLeavesWriterClean(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	boom := errors.New("boom")
	insert := func(tx txQuerier, name string) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO buckets (name, region, created_at) VALUES (?, 'r', 0)`, name)
		return err
	}
	tests := []struct {
		name string
		fn   func(tx txQuerier) error
	}{
		{"error", func(tx txQuerier) error {
			if err := insert(tx, "err"); err != nil {
				return err
			}
			return boom
		}},
		{"panic", func(tx txQuerier) error {
			if err := insert(tx, "panic"); err != nil {
				return err
			}
			panic(boom)
		}},
		{"constraint", func(tx txQuerier) error {
			if err := insert(tx, "dup"); err != nil {
				return err
			}
			return insert(tx, "dup")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := func() (err error) {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				return e.withWrite(ctx, tc.fn)
			}()
			if err == nil {
				t.Fatal("failed transaction reported success")
			}
			if n := count(t, e, `SELECT count(*) FROM buckets`); n != 0 {
				t.Fatalf("rolled-back rows visible: %d", n)
			}
			// The next write begins a fresh transaction on the same connection
			// (BEGIN inside a leaked transaction would fail) and commits.
			if err := e.CreateBucket(ctx, "after-"+tc.name, ""); err != nil {
				t.Fatalf("write after failure: %v", err)
			}
			if err := e.DeleteBucket(ctx, "after-"+tc.name); err != nil {
				t.Fatal(err)
			}
		})
	}
}
