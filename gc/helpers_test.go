package gc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
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

// embeddedMode is the embedded default (SQLite and local files) in tests
// that run on every engine.
const embeddedMode = "embedded"

// engines is every engine: the PostgreSQL modes and the embedded default.
var engines = append(append([]string(nil), modes...), embeddedMode)

type env struct {
	eng    store.ObjectStore
	db     Meta
	pool   *pgxpool.Pool    // PostgreSQL only
	emb    *embedded.Engine // the embedded default only
	media  *localfs.Media
	mode   string
	bucket string
}

func newEnv(t *testing.T, mode string) *env {
	t.Helper()
	if mode == embeddedMode {
		return newEmbeddedEnv(t, embedded.Config{})
	}
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
	if err := EnsureSchema(ctx, pg.NewGC(eng.Pool())); err != nil {
		t.Fatal(err)
	}
	if err := eng.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	return &env{eng: eng, db: pg.NewGC(eng.Pool()), pool: eng.Pool(), media: media, mode: mode, bucket: "b"}
}

// newEmbeddedEnv opens the embedded engine on a fresh data directory with
// cfg (Dir and InlineMax are set here).
func newEmbeddedEnv(t *testing.T, cfg embedded.Config) *env {
	t.Helper()
	cfg.Dir, cfg.InlineMax = t.TempDir(), inlineMax
	eng, err := embedded.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := eng.CreateBucket(context.Background(), "b", ""); err != nil {
		t.Fatal(err)
	}
	return &env{eng: eng, db: eng.GC(), emb: eng, media: eng.Media(), mode: embeddedMode, bucket: "b"}
}

// pgParam matches PostgreSQL's $n placeholders; SQLite reads them as ?n.
var pgParam = regexp.MustCompile(`\$([0-9]+)`)

// scalar runs a query that returns one integer, on either engine's
// database; simple SQL works on both.
func (v *env) scalar(ctx context.Context, q string, args ...any) (int64, error) {
	var n int64
	if v.pool != nil {
		return n, v.pool.QueryRow(ctx, q, args...).Scan(&n)
	}
	return n, v.emb.DB().QueryRowContext(ctx, pgParam.ReplaceAllString(q, "?$1"), args...).Scan(&n)
}

// writeSQL runs a statement on either engine's database (for the embedded
// one on a connection of its own: tests only).
func (v *env) writeSQL(t *testing.T, pgSQL, sqliteSQL string) {
	t.Helper()
	ctx := context.Background()
	if v.pool != nil {
		if _, err := v.pool.Exec(ctx, pgSQL); err != nil {
			t.Fatalf("%s: %v", pgSQL, err)
		}
		return
	}
	db, err := sql.Open("sqlite", filepath.Join(v.media.Dir(), embedded.MetaFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, sqliteSQL); err != nil {
		t.Fatalf("%s: %v", sqliteSQL, err)
	}
}

// ageUploads makes every upload look initiated eight days ago.
func (v *env) ageUploads(t *testing.T) {
	t.Helper()
	v.writeSQL(t, `UPDATE uploads SET initiated = initiated - interval '8 days'`,
		`UPDATE uploads SET initiated = initiated - 8 * 86400000000`)
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
	n, err := v.scalar(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return int(n)
}

// settle collects until nothing is left to collect (grace none, uploads kept).
func (v *env) settle(t *testing.T) Stats {
	t.Helper()
	st, err := collect(context.Background(), v.db, v.opts())
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	return st
}

// assertNoOrphans checks invariant 4 after GC settled, and that nothing
// referenced lost its content.
func (v *env) assertNoOrphans(t *testing.T) {
	t.Helper()
	if n := v.count(t, `SELECT count(*) FROM blobs b
			WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
			  AND NOT EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)
			  AND NOT EXISTS (SELECT 1 FROM object_versions ov WHERE ov.blob_id = b.id)
			  AND NOT EXISTS (SELECT 1 FROM version_parts vp WHERE vp.blob_id = b.id)
			  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id)`); n != 0 {
		t.Errorf("%d unreferenced blob rows", n)
	}
	checks := []struct{ what, sql string }{
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
		if v.pool == nil {
			break // no content in the database
		}
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
	var want []int64
	for after := int64(0); ; {
		id, err := v.scalar(context.Background(), `SELECT coalesce(min(id), 0) FROM blobs WHERE tier = 'local' AND id > $1`, after)
		if err != nil {
			t.Fatal(err)
		}
		if id == 0 {
			break
		}
		want, after = append(want, id), id
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
	id, err := v.scalar(context.Background(), `SELECT blob_id FROM objects WHERE bucket = $1 AND key = $2`, v.bucket, key)
	if err != nil {
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
