package pg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const testKnee = 256 << 10

var modes = []string{LargePGLO, LargePGChunks, LargeLocal}

// Helpers shared with the store suite (store/storetest), which runs the
// engine's behaviour tests.
var (
	randBytes = storetest.Bytes
	md5hex    = storetest.MD5Hex
	sameBytes = storetest.SameBytes
)

type env struct {
	e     *Engine
	media *localfs.Media
	dir   string
	dsn   string
}

func newEnv(t testing.TB, mode string) *env {
	t.Helper()
	return newEnvOn(t, mode, pgtest.DSN(t), nil)
}

// newEnvOn is newEnv on database dsn (which another env may share: the
// bucket may exist), with set (if not nil) adjusting the config.
func newEnvOn(t testing.TB, mode, dsn string, set func(*Config)) *env {
	t.Helper()
	ctx := context.Background()
	cfg := Config{DatabaseURL: dsn, InlineMax: testKnee, Large: mode, Region: "us-east-1"}
	if set != nil {
		set(&cfg)
	}
	v := &env{dsn: dsn}
	if mode == LargeLocal {
		v.dir = t.TempDir()
		m, err := localfs.Open(v.dir, false)
		if err != nil {
			t.Fatalf("localfs.Open: %v", err)
		}
		cfg.Media, v.media = m, m
	}
	e, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(e.Close)
	v.e = e
	if err := e.CreateBucket(ctx, "b", ""); err != nil && !errors.Is(err, store.ErrBucketExists) {
		t.Fatalf("CreateBucket: %v", err)
	}
	return v
}

func (v *env) put(t *testing.T, key string, data []byte) store.ObjectInfo {
	t.Helper()
	info, err := v.e.PutObject(context.Background(), "b", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info
}

func (v *env) get(t *testing.T, key string, opts store.GetOptions) (store.ObjectInfo, *store.ByteRange, []byte) {
	t.Helper()
	info, rng, rd, err := v.e.GetObject(context.Background(), "b", key, opts, false)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return info, rng, b
}

func (v *env) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := v.e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestMigrateConcurrent(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = Migrate(ctx, dsn) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Migrate #%d: %v", i, err)
		}
	}
	if err := Migrate(ctx, dsn); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	e, err := Open(ctx, Config{DatabaseURL: dsn, Large: LargePGChunks, SkipMigrate: true})
	if err != nil {
		t.Fatalf("Open after migrate: %v", err)
	}
	defer e.Close()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var n, maxV int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &maxV); err != nil {
		t.Fatal(err)
	}
	if n != len(ms) || maxV != ms[len(ms)-1].Version {
		t.Errorf("schema_migrations: %d rows, max %d; want %d rows, max %d", n, maxV, len(ms), ms[len(ms)-1].Version)
	}
}

func TestOpenRefusesStaleSchema(t *testing.T) {
	_, err := Open(context.Background(), Config{DatabaseURL: pgtest.DSN(t), SkipMigrate: true})
	if err == nil {
		t.Fatal("Open with SkipMigrate on an empty database succeeded")
	}
}

// assertPoolClean proves amendment A1 on the engine's pool.
func (v *env) assertPoolClean(t *testing.T) {
	t.Helper()
	storetest.PoolClean(t, v.e.pool)
}

func TestLockKeyDistinct(t *testing.T) {
	seen := map[int64]string{}
	for _, id := range [][2]string{{"a", "b/c"}, {"a/b", "c"}, {"ab", "c"}, {"a", "bc"}} {
		k := objectLockKey(id[0], id[1])
		if prev, dup := seen[k]; dup {
			t.Errorf("lock key of %q equals that of %s", id, prev)
		}
		seen[k] = fmt.Sprint(id)
	}
	if objectLockKey("u", "") == uploadLockKey("u") {
		t.Errorf("object and upload lock keys share a namespace")
	}
}

// TestLocalStageDirClean checks that the local engine leaves no stage files
// after successful puts either.
func TestLocalStageDirClean(t *testing.T) {
	v := newEnv(t, LargeLocal)
	v.put(t, "x", randBytes(5, 1<<20))
	v.put(t, "y", randBytes(5, 1<<20)) // dedup: the second stage is discarded
	entries, err := os.ReadDir(filepath.Join(v.dir, "stage"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("stage files left: %d", len(entries))
	}
}
