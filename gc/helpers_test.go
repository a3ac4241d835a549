package gc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var iterFlag = flag.Int("gc.iterations", 0, "operations per adversarial test (default $S3GATE_GC_ITERATIONS or 300)")

// iterations is the size of each adversarial test: a CI-friendly default of
// a few hundred, more with -gc.iterations or S3GATE_GC_ITERATIONS.
func iterations(t *testing.T) int {
	if *iterFlag > 0 {
		return *iterFlag
	}
	if s := os.Getenv("S3GATE_GC_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("S3GATE_GC_ITERATIONS=%q: want a positive integer", s)
		}
		return n
	}
	if testing.Short() {
		return 60
	}
	return 300
}

// inlineMax is small so that the tests exercise inline and large blobs with
// small, fast contents.
const inlineMax = 1024

var modes = []string{pg.LargePGLO, pg.LargePGChunks, pg.LargeLocal}

type env struct {
	eng    *pg.Engine
	pool   *pgxpool.Pool
	media  *localfs.Media
	mode   string
	bucket string
}

func newEnv(t *testing.T, mode string) *env {
	t.Helper()
	ctx := context.Background()
	cfg := pg.Config{DatabaseURL: pgtest.DSN(t), InlineMax: inlineMax, Large: mode}
	var media *localfs.Media
	if mode == pg.LargeLocal {
		var err error
		if media, err = localfs.Open(t.TempDir(), false); err != nil {
			t.Fatal(err)
		}
		cfg.Media = media
	}
	eng, err := pg.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	if err := EnsureSchema(ctx, eng.Pool()); err != nil {
		t.Fatal(err)
	}
	if err := eng.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	return &env{eng: eng, pool: eng.Pool(), media: media, mode: mode, bucket: "b"}
}

// opts are sweep options with no grace at all: the adversarial setting.
func (v *env) opts() Options {
	return Options{Grace: -1, StageGrace: -1, Media: v.media, Logger: slog.New(slog.DiscardHandler)}
}

// content returns deterministic bytes; sizes straddle the inline knee.
func content(seed uint64) []byte {
	sizes := []int{0, 300, inlineMax, inlineMax + 1, 3000, 9000}
	n := sizes[seed%uint64(len(sizes))]
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func (v *env) put(ctx context.Context, key string, data []byte) error {
	_, err := v.eng.PutObject(ctx, v.bucket, key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	return err
}

// check reads key back and compares its SHA-256 with want (nil: must be absent).
func (v *env) check(ctx context.Context, key string, want []byte) error {
	_, _, rd, err := v.eng.GetObject(ctx, v.bucket, key, store.GetOptions{}, false)
	if want == nil {
		if errors.Is(err, store.ErrNoSuchKey) {
			return nil
		}
		if err == nil {
			_ = rd.Close()
		}
		return fmt.Errorf("%s: want no object, got err %v", key, err)
	}
	if err != nil {
		return fmt.Errorf("%s: get: %w", key, err)
	}
	defer rd.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rd); err != nil {
		return fmt.Errorf("%s: read: %w", key, err)
	}
	if got, exp := h.Sum(nil), sha256.Sum256(want); !bytes.Equal(got, exp[:]) {
		return fmt.Errorf("%s: content sha256 %x, want %x", key, got, exp)
	}
	return nil
}

func (v *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := v.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// settle collects until nothing is left to collect (grace none, uploads kept).
func (v *env) settle(t *testing.T) Stats {
	t.Helper()
	st, err := collect(context.Background(), v.pool, v.opts())
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	return st
}

// assertNoOrphans checks invariant 4 after GC settled, and that nothing
// referenced lost its content.
func (v *env) assertNoOrphans(t *testing.T) {
	t.Helper()
	checks := []struct{ what, sql string }{
		{"unreferenced blob rows", `SELECT count(*) FROM blobs b
			WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
			  AND NOT EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)
			  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id)`},
		{"unreferenced large objects", `SELECT count(*) FROM pg_largeobject_metadata m
			WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.lo_oid = m.oid)`},
		{"pglo blobs without their large object", `SELECT count(*) FROM blobs b
			WHERE b.tier = 'pglo' AND NOT EXISTS (SELECT 1 FROM pg_largeobject_metadata m WHERE m.oid = b.lo_oid)`},
		{"chunk rows without a blob", `SELECT count(*) FROM blob_chunks c
			WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = c.blob_id)`},
		{"pgchunks blobs without chunks", `SELECT count(*) FROM blobs b
			WHERE b.tier = 'pgchunks' AND b.size > 0 AND NOT EXISTS (SELECT 1 FROM blob_chunks c WHERE c.blob_id = b.id)`},
	}
	for _, c := range checks {
		if n := v.count(t, c.sql); n != 0 {
			t.Errorf("%d %s", n, c.what)
		}
	}
	if v.media == nil {
		return
	}
	files, err := v.media.BlobIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rows, err := v.pool.Query(context.Background(), `SELECT id FROM blobs WHERE tier = 'local' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i] < files[j] })
	if fmt.Sprint(files) != fmt.Sprint(want) {
		t.Errorf("blob files %v, local blob rows %v", files, want)
	}
	stage, err := v.media.StageFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(stage) != 0 {
		t.Errorf("stage files left: %v", stage)
	}
}

// blobOf returns the blob id of a single-put object.
func (v *env) blobOf(t *testing.T, key string) int64 {
	t.Helper()
	var id int64
	if err := v.pool.QueryRow(context.Background(), `SELECT blob_id FROM objects WHERE bucket = $1 AND key = $2`,
		v.bucket, key).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func (v *env) blobExists(t *testing.T, id int64) bool {
	t.Helper()
	return v.count(t, `SELECT count(*) FROM blobs WHERE id = $1`, id) == 1
}

// waitLockWaiters blocks until n sessions wait on a lock (hang guard only).
func (v *env) waitLockWaiters(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for v.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`) < n {
		if time.Now().After(deadline) {
			t.Fatal("no session started waiting on a lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
