// Package crashtest runs the real s3gate binary as a subprocess against a
// throwaway PostgreSQL and proves invariants that need a process to die:
// kill -9 during concurrent uploads loses no acknowledged write and, after
// GC, leaves no orphan; a PostgreSQL crash the moment a large PUT is
// acknowledged loses nothing (ADR 024); and the space scenario (write,
// delete, collect: every counter returns to where it started).
package crashtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/fsck"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/internal/gwproc"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	accessKey = "crashtest"
	secretKey = "crashtest-secret-key"
	// inlineMax is the knee of the gateways under test.
	inlineMax = 64 << 10
)

// buildBinary builds cmd/s3gate into dir.
func buildBinary(t *testing.T, dir string) string { return gwproc.BuildBinary(t, dir) }

// gateway is one s3gate serve subprocess; restarts keep its settings.
type gateway struct {
	gwproc.Proc
	t       *testing.T
	addr    string
	dsn     string
	engine  string
	dataDir string
}

// newGateway starts a gateway on a fresh database; extra are further
// S3GATE_* settings.
func newGateway(t *testing.T, bin, engine string, extra ...string) *gateway {
	t.Helper()
	var dsn string
	if engine != embeddedEngine { // the embedded default has no database URL
		dsn = pgtest.DSN(t)
	}
	return newGatewayOn(t, bin, engine, dsn, extra...)
}

// newGatewayOn is newGateway on the database at dsn (a server of the test's
// own, which it crashes).
func newGatewayOn(t *testing.T, bin, engine, dsn string, extra ...string) *gateway {
	t.Helper()
	dir := t.TempDir()
	g := &gateway{t: t, addr: gwproc.FreeAddr(t), engine: engine, dsn: dsn, dataDir: filepath.Join(dir, "data")}
	g.Proc = gwproc.Proc{Name: "gateway", Bin: bin, LogPath: filepath.Join(dir, "gateway.log"), Env: append([]string{
		"S3GATE_ADDR=" + g.addr,
		"S3GATE_DATABASE_URL=" + g.dsn,
		"S3GATE_ROOT_ACCESS_KEY=" + accessKey,
		"S3GATE_ROOT_SECRET_KEY=" + secretKey,
		"S3GATE_LARGE_ENGINE=" + g.large(),
		"S3GATE_DATA_DIR=" + g.dataDir,
		"S3GATE_METRICS_ADDR=off",
		fmt.Sprintf("S3GATE_INLINE_MAX=%d", inlineMax),
		"S3GATE_LOG_LEVEL=warn",
	}, extra...)}
	g.start()
	t.Cleanup(g.stop)
	return g
}

// start starts the gateway; it is ready when an authenticated request
// succeeds.
func (g *gateway) start() {
	g.t.Helper()
	client := g.client()
	g.Start(g.t, func(ctx context.Context) error {
		_, err := client.ListBuckets(ctx, &s3.ListBucketsInput{})
		return err
	})
}

// embeddedEngine names the embedded default (SQLite and local files, no
// PostgreSQL) among the engines of these tests.
const embeddedEngine = "embedded"

func (g *gateway) large() string {
	if g.engine == embeddedEngine {
		return "local"
	}
	return g.engine
}

// kill sends SIGKILL and waits for the process to be gone.
func (g *gateway) kill() { g.Kill(g.t) }

// killDuring runs ops operations concurrently against the gateway, all
// released at once, and SIGKILLs it as soon as killAt of them were
// acknowledged; it returns once every operation has ended (the kill fails
// the rest) and answers how many were acknowledged. op performs operation i
// under its own deadline and reports whether the gateway acknowledged it; it
// records what it must prove later itself, before it returns true, so that
// everything counted is on record when the kill comes.
func (g *gateway) killDuring(ops int, killAt int64, op func(ctx context.Context, i int) (acked bool)) int64 {
	g.t.Helper()
	var nAcked atomic.Int64
	killNow := make(chan struct{})
	var once sync.Once
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if op(ctx, i) && nAcked.Add(1) == killAt {
				once.Do(func() { close(killNow) })
			}
		}()
	}
	close(start)
	select {
	case <-killNow:
	case <-time.After(5 * time.Minute):
		g.t.Fatalf("only %d of %d operations acknowledged (hang guard)", nAcked.Load(), ops)
	}
	g.kill()
	wg.Wait()
	n := nAcked.Load()
	g.t.Logf("%s: %d of %d operations acknowledged before and around kill -9", g.engine, n, ops)
	return n
}

// stop ends the gateway gracefully (SIGTERM), then by force.
func (g *gateway) stop() { g.Stop() }

// client is aws-sdk-go-v2 with its default checksums, without retries (a
// retry after the kill would blur which request was acknowledged).
func (g *gateway) client() *s3.Client {
	return gwproc.Client(g.addr, accessKey, secretKey, aws.NopRetryer{})
}

// pool opens the gateway's database for the test's own inspection.
func (g *gateway) pool() *pgxpool.Pool {
	p, err := pgxpool.New(context.Background(), g.dsn)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(p.Close)
	return p
}

// media opens the data directory's media (nil unless the engine is local).
func (g *gateway) media() *localfs.Media {
	if g.engine != "local" {
		return nil
	}
	m, err := localfs.Open(g.dataDir, false)
	if err != nil {
		g.t.Fatal(err)
	}
	return m
}

// payload is the deterministic content of object i.
func payload(seed uint64, size int) []byte {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	r := rand.NewChaCha8(key)
	b := make([]byte, size)
	_, _ = r.Read(b) // ChaCha8 reads never fail
	return b
}

// readBack fetches key and returns its SHA-256, or found=false for NoSuchKey.
func readBack(ctx context.Context, c *s3.Client, bucket, key string) (sum [32]byte, found bool, err error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey" {
			return sum, false, nil
		}
		return sum, false, err
	}
	defer out.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, out.Body); err != nil {
		return sum, true, fmt.Errorf("read %s: %w", key, err)
	}
	copy(sum[:], h.Sum(nil))
	return sum, true, nil
}

func count(t *testing.T, db *pgxpool.Pool, sql string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// orphanQueries count what must be zero once GC has settled.
var orphanQueries = []struct{ what, sql string }{
	{"unreferenced blob rows", `SELECT count(*) FROM blobs b
		WHERE NOT EXISTS (SELECT 1 FROM objects o WHERE o.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM object_parts p WHERE p.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM object_versions v WHERE v.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM version_parts vp WHERE vp.blob_id = b.id)`},
	{"unreferenced large objects", `SELECT count(*) FROM pg_largeobject_metadata m
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.lo_oid = m.oid)`},
	{"chunk rows without a blob", `SELECT count(*) FROM blob_chunks c
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = c.blob_id)`},
	{"incomplete uploads", `SELECT count(*) FROM uploads`},
}

// leftovers reports every kind of orphan: rows by query, and for local media
// blob files without a row and stage files.
func leftovers(t *testing.T, db *pgxpool.Pool, m *localfs.Media) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, q := range orphanQueries {
		out[q.what] = count(t, db, q.sql)
	}
	if m == nil {
		return out
	}
	rows, err := db.Query(context.Background(), `SELECT id FROM blobs WHERE tier = 'local'`)
	if err != nil {
		t.Fatal(err)
	}
	local, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	fileLeftovers(t, m, local, out)
	return out
}

// fileLeftovers adds to out the blob files without a row, the local blob
// rows (ids local) without a file, and the stage files of m.
func fileLeftovers(t *testing.T, m *localfs.Media, local []int64, out map[string]int64) {
	t.Helper()
	files, err := m.BlobIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	have := map[int64]bool{}
	for _, id := range local {
		have[id] = true
	}
	for _, id := range files {
		if !have[id] {
			out["blob files without a row"]++
		}
		delete(have, id)
	}
	out["local blob rows without a file"] = int64(len(have))
	stage, err := m.StageFiles()
	if err != nil {
		t.Fatal(err)
	}
	out["stage files"] = int64(len(stage))
}

// collect runs the online collection once with no grace and no upload
// expiry. While a gateway's own scheduled run holds the lease (or a killed
// gateway's grant has not expired yet: 30 s in SQL) it tries again.
func collect(t *testing.T, db gc.Meta, m *localfs.Media) gc.Stats {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute) // hang guard only
	for {
		st, err := gc.RunOnce(context.Background(), db, m, gc.Options{
			Grace: -1, StageGrace: -1, UploadExpiry: -1, PinWindow: -1,
			Holder: "crashtest", Logger: slog.New(slog.DiscardHandler),
		})
		if errors.Is(err, lease.ErrHeld) && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("gc.RunOnce: %v", err)
		}
		return st
	}
}

// storeView is what the tests inspect of a gateway's store: its leftovers,
// one collection (no grace, no upload expiry), and a clean fsck.
type storeView struct {
	leftovers func() map[string]int64
	collect   func() gc.Stats
	fsck      func() fsck.Report
}

// collectClean runs one collection and fails the test for every kind of
// leftover it did not reclaim.
func (s storeView) collectClean(t *testing.T) {
	t.Helper()
	t.Logf("gc: %+v", s.collect())
	for what, n := range s.leftovers() {
		if n != 0 {
			t.Errorf("%d %s after GC", n, what)
		}
	}
}

// inspect runs fn on the gateway's store. PostgreSQL is shared with the
// running gateway; the embedded data directory belongs to one process, so
// a running gateway is stopped for fn and started again after it.
func (g *gateway) inspect(fn func(s storeView)) {
	t := g.t
	t.Helper()
	if g.engine != embeddedEngine {
		db, m := g.pool(), g.media()
		fn(storeView{
			leftovers: func() map[string]int64 { return leftovers(t, db, m) },
			collect:   func() gc.Stats { return collect(t, pg.NewGC(db), m) },
			fsck:      func() fsck.Report { return fsckClean(t, pg.NewGC(db), m) },
		})
		return
	}
	running := false
	select {
	case <-g.Exited():
	default:
		running = true
		g.stop()
	}
	e, err := embedded.Open(context.Background(), embedded.Config{Dir: g.dataDir, InlineMax: inlineMax})
	if err != nil {
		t.Fatal(err)
	}
	fn(storeView{
		leftovers: func() map[string]int64 { return embeddedLeftovers(t, e) },
		collect:   func() gc.Stats { return collect(t, e.GC(), e.Media()) },
		fsck:      func() fsck.Report { return fsckClean(t, e.GC(), e.Media()) },
	})
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if running {
		g.start()
	}
}

// embeddedLeftovers is leftovers for the embedded default.
func embeddedLeftovers(t *testing.T, e *embedded.Engine) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	out := map[string]int64{}
	for _, q := range orphanQueries {
		if strings.Contains(q.sql, "pg_largeobject") || strings.Contains(q.sql, "blob_chunks") {
			continue // content inside PostgreSQL
		}
		var n int64
		if err := e.DB().QueryRowContext(ctx, q.sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		out[q.what] = n
	}
	rows, err := e.DB().QueryContext(ctx, `SELECT id FROM blobs WHERE tier = 'local'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var local []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		local = append(local, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	fileLeftovers(t, e.Media(), local, out)
	return out
}

// fsckClean runs fsck and fails on any problem.
func fsckClean(t *testing.T, db fsck.Meta, m *localfs.Media) fsck.Report {
	t.Helper()
	r, err := fsck.Check(context.Background(), db, fsck.Options{Media: m})
	if err != nil {
		t.Fatalf("fsck: %v", err)
	}
	for _, p := range r.Problems {
		t.Errorf("fsck: %v", p)
	}
	return r
}

// dataFiles counts the regular files under the data directory's blobs/ and
// stage/.
func dataFiles(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, sub := range []string{"blobs", "stage"} {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(_ string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func engines() []string {
	if testing.Short() {
		return []string{"pgchunks", "local"}
	}
	return []string{"pglo", "pgchunks", "local"}
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func describe(m map[string]int64) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
