package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/pg"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// engine is a real metadata engine with what the tests read of it.
type engine struct {
	st    *store.Store
	gc    gc.Meta
	opts  gc.Options
	stats func(context.Context) (store.BlobStats, error)
}

// openEngines opens the embedded default and PostgreSQL with pgchunks, both
// with a small inline knee (inline and chunked blobs).
func openEngines(t *testing.T) map[string]engine {
	t.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	emb, err := embedded.Open(ctx, embedded.Config{Dir: t.TempDir(), InlineMax: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	p, err := pg.Open(ctx, pg.Config{DatabaseURL: pgtest.DSN(t), InlineMax: 100, Large: pg.LargePGChunks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	out := map[string]engine{
		"embedded": {st: store.New(emb), gc: emb.GC(), opts: gc.Options{Grace: -1, Media: emb.Media(), Logger: quiet}, stats: emb.BlobStats},
		"pgchunks": {st: store.New(p), gc: pg.NewGC(p.Pool()), opts: gc.Options{Grace: -1, Logger: quiet}, stats: p.BlobStats},
	}
	for name, e := range out {
		if err := gc.EnsureSchema(ctx, e.gc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return out
}

func (e engine) rules(t *testing.T, bucket, versioning, rules string) {
	t.Helper()
	ctx := context.Background()
	if err := e.st.CreateBucket(ctx, bucket, ""); err != nil {
		t.Fatal(err)
	}
	if versioning != "" {
		if err := e.st.SetBucketVersioning(ctx, bucket, versioning); err != nil {
			t.Fatal(err)
		}
	}
	c, err := parse(t, rules)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.PutBucketConfig(ctx, bucket, ConfigName, doc); err != nil {
		t.Fatal(err)
	}
}

func (e engine) put(t *testing.T, bucket, key, body string) {
	t.Helper()
	if _, err := e.st.PutObject(context.Background(), bucket, key, strings.NewReader(body), store.PutOptions{Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
}

func (e engine) blobs(t *testing.T) int64 {
	t.Helper()
	s, err := e.stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, tier := range s.Tiers {
		n += tier.Blobs
	}
	return n
}

// versions lists the bucket as "key:version-count[+marker]" lines.
func (e engine) versions(t *testing.T, bucket string) string {
	t.Helper()
	res, err := e.st.ListObjectVersions(context.Background(), bucket, store.ListVersionsParams{MaxKeys: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, v := range res.Versions {
		kind := "v"
		if v.DeleteMarker {
			kind = "m"
		}
		if v.IsLatest {
			kind = strings.ToUpper(kind)
		}
		fmt.Fprintf(&b, "%s:%s ", v.Key, kind)
	}
	return strings.TrimSpace(b.String())
}

// TestRunOnEngines: on a versioned bucket of each real engine, a run
// expires current versions (delete markers), removes noncurrent versions
// (keeping NewerNoncurrentVersions), the next run removes the markers left
// alone, a third finds nothing; GC then reclaims exactly the blobs only the
// removed versions held. The clock is three days ahead (Options.Now).
func TestRunOnEngines(t *testing.T) {
	for name, e := range openEngines(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e.rules(t, "bkt", store.VersioningEnabled,
				`<Rule><ID>v</ID><Filter><Prefix>v/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>`+
					`<Rule><ID>m</ID><Filter><Prefix>v/</Prefix></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`+
					`<Rule><ID>n</ID><Filter><Prefix>n/</Prefix></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>`)
			for i := range 3 {
				e.put(t, "bkt", "v/a", fmt.Sprintf("a%d", i)+strings.Repeat("a", 200*i)) // inline and chunked
				e.put(t, "bkt", "n/x", fmt.Sprintf("x%d", i))
			}
			e.put(t, "bkt", "v/b", "b0")
			e.put(t, "bkt", "keep/c", "c0")
			e.put(t, "bkt", "keep/c", "c1")
			if n := e.blobs(t); n != 9 {
				t.Fatalf("%d blobs after the writes, want 9", n)
			}
			opts := Options{Now: func(context.Context) (time.Time, error) { return time.Now().Add(3 * 24 * time.Hour), nil }, Batch: 2}
			want := []Stats{
				{Buckets: 1, Expired: 2, Noncurrent: 5}, // v/a's three and v/b's one under markers; n/x's oldest
				{Buckets: 1, Markers: 2},                // the markers, alone now
				{Buckets: 1},
			}
			for i, w := range want {
				st, err := RunOnce(ctx, e.st, opts)
				if err != nil {
					t.Fatalf("run %d: %v", i+1, err)
				}
				if st != w {
					t.Errorf("run %d: %+v, want %+v", i+1, st, w)
				}
			}
			if got, w := e.versions(t, "bkt"), "keep/c:V keep/c:v n/x:V n/x:v"; got != w {
				t.Errorf("versions left %q, want %q", got, w)
			}
			gst, err := gc.Sweep(ctx, e.gc, e.opts)
			if err != nil {
				t.Fatal(err)
			}
			if gst.BlobsDeleted != 5 || e.blobs(t) != 4 {
				t.Errorf("GC reclaimed %d blobs, %d left: want 5 (v/a's three, v/b's, n/x's oldest) and 4", gst.BlobsDeleted, e.blobs(t))
			}
			for key, body := range map[string]string{"n/x": "x2", "keep/c": "c1"} {
				_, _, rd, err := e.st.GetObject(ctx, "bkt", key, store.GetOptions{}, false)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rd)
				rd.Close()
				if err != nil || string(got) != body {
					t.Errorf("%s: %q %v, want %q", key, got, err, body)
				}
			}
		})
	}
}

// TestOverwriteRaceOnEngines: an object rewritten between the runner's
// judgement and its deletion survives on the real stores, versioned or not
// (the deletion names the ETag and last-modified time judged).
func TestOverwriteRaceOnEngines(t *testing.T) {
	for name, e := range openEngines(t) {
		for _, versioning := range []string{"", store.VersioningEnabled} {
			t.Run(name+"/versioning="+versioning, func(t *testing.T) {
				ctx := context.Background()
				bucket := "race" + strings.ToLower(versioning)
				e.rules(t, bucket, versioning, `<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)
				t.Cleanup(func() { _, _ = e.st.DeleteBucketConfig(ctx, bucket, ConfigName) }) // one bucket per run
				e.put(t, bucket, "k", "old")
				opts := Options{Now: func(context.Context) (time.Time, error) { return time.Now().Add(3 * 24 * time.Hour), nil },
					beforeExpire: func(bucket, key string) { e.put(t, bucket, key, "new") }}
				st, err := RunOnce(ctx, e.st, opts)
				if err != nil {
					t.Fatal(err)
				}
				_, _, rd, err := e.st.GetObject(ctx, bucket, "k", store.GetOptions{}, false)
				if err != nil {
					t.Fatalf("the rewritten object is gone: %v (%+v)", err, st)
				}
				got, err := io.ReadAll(rd)
				rd.Close()
				if err != nil || !bytes.Equal(got, []byte("new")) || st.Expired != 0 || st.Changed != 1 {
					t.Errorf("read %q %v, stats %+v: want the new object, 0 expired, 1 changed", got, err, st)
				}
			})
		}
	}
}
