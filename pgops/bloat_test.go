package pgops

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/store/pg"
	"github.com/s3gate/s3gate/store/pg/content"
)

// sizes are the content tables' sizes in bytes.
type sizes struct{ chunksMain, chunksToast, largeObject int64 }

func (s sizes) String() string {
	mib := func(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }
	return fmt.Sprintf("blob_chunks %s + TOAST %s MiB, pg_largeobject %s MiB", mib(s.chunksMain), mib(s.chunksToast), mib(s.largeObject))
}

func measure(t *testing.T, db *pgx.Conn) sizes {
	t.Helper()
	var s sizes
	if err := db.QueryRow(ctxT(t), `SELECT pg_relation_size('blob_chunks'),
		pg_total_relation_size((SELECT reltoastrelid FROM pg_class WHERE oid = 'blob_chunks'::regclass)),
		pg_total_relation_size('pg_largeobject')`).Scan(&s.chunksMain, &s.chunksToast, &s.largeObject); err != nil {
		t.Fatal(err)
	}
	return s
}

// fill writes mib MiB as 4 MiB objects under prefix and returns their keys.
func fill(t *testing.T, c *s3.Client, prefix string, mib int) []string {
	t.Helper()
	var keys []string
	for i := 0; i < mib/4; i++ {
		o := object{key: fmt.Sprintf("%s%03d", prefix, i), data: randBytes(uint64(i)+uint64(len(prefix))<<32, 4*content.ChunkSize)}
		put(t, c, "bkt", o)
		keys = append(keys, o.key)
	}
	return keys
}

// TestBloat (make bloat) writes N MiB (S3GATE_BLOAT_MIB, default 64) on
// pgchunks and on pglo, deletes everything, collects, and prints the size
// of the content tables before, after GC, after VACUUM and after as much is
// written again; autovacuum is off so that the figures are the scenario's.
// The default run skips it (it would cost tens of seconds); the figures are
// in docs/operations.md.
func TestBloat(t *testing.T) {
	if os.Getenv("S3GATE_BLOAT") == "" {
		t.Skip("the bloat scenario runs with make bloat (S3GATE_BLOAT=1)")
	}
	mib := 64
	if v := os.Getenv("S3GATE_BLOAT_MIB"); v != "" {
		var err error
		if mib, err = strconv.Atoi(v); err != nil || mib < 4 {
			t.Fatalf("S3GATE_BLOAT_MIB=%q: want a whole number of MiB, at least 4", v)
		}
	}
	srv := pgtest.NewServer(t)
	srv.Set("autovacuum=off")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	for _, engine := range []string{config.EnginePGChunks, config.EnginePGLO} {
		t.Run(engine, func(t *testing.T) {
			dsn, err := srv.CreateDatabase("bloat_" + engine)
			if err != nil {
				t.Fatal(err)
			}
			c := client(start(t, engine, dsn, "S3GATE_GC_INTERVAL=0"))
			createBucket(t, c, "bkt")
			db := connect(t, dsn)
			vacuum := func() {
				for _, tbl := range []string{"blob_chunks", "pg_largeobject", "blobs"} {
					if _, err := db.Exec(ctxT(t), "VACUUM "+tbl); err != nil {
						t.Fatal(err)
					}
				}
			}
			pool, err := pgxpool.New(ctxT(t), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			collect := func(keys []string) {
				for _, k := range keys {
					if _, err := c.DeleteObject(ctxT(t), &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k)}); err != nil {
						t.Fatal(err)
					}
				}
				st, err := gc.RunOnce(ctxT(t), pg.NewGC(pool), nil, gc.Options{Grace: -1, StageGrace: -1, PinWindow: -1})
				if err != nil || st.BlobsDeleted != int64(len(keys)) {
					t.Fatalf("gc: %+v, %v; want %d blobs deleted", st, err, len(keys))
				}
			}
			rows := []string{"start: " + measure(t, db).String()}
			keys := fill(t, c, "a/", mib)
			rows = append(rows, fmt.Sprintf("after writing %d MiB: %s", mib, measure(t, db)))
			collect(keys)
			rows = append(rows, "after deleting all and GC: "+measure(t, db).String())
			vacuum()
			rows = append(rows, "after VACUUM: "+measure(t, db).String())
			keys = fill(t, c, "b/", mib)
			rows = append(rows, fmt.Sprintf("after writing %d MiB again: %s", mib, measure(t, db)))
			// The last object written stays: its pages at the end of the
			// table keep VACUUM from truncating, so space is reused instead.
			collect(keys[:len(keys)-1])
			vacuum()
			rows = append(rows, "after deleting all but the last object, GC and VACUUM: "+measure(t, db).String())
			fill(t, c, "c/", mib-4)
			rows = append(rows, fmt.Sprintf("after writing %d MiB more: %s", mib-4, measure(t, db)))
			t.Logf("%s, %d MiB:\n  %s", engine, mib, strings.Join(rows, "\n  "))
		})
	}
}

// TestDBMetrics: the database health series follow what PostgreSQL sees —
// chunk bytes in blob_chunks' TOAST after a multi-chunk put, dead tuples
// there after the blob is collected, and the age of a transaction that a
// gateway session holds open.
func TestDBMetrics(t *testing.T) {
	dsn := pgtest.DSN(t)
	gw := start(t, config.EnginePGChunks, dsn, "S3GATE_GC_INTERVAL=0")
	c := client(gw)
	createBucket(t, c, "bkt")
	put(t, c, "bkt", object{key: "k", data: randBytes(1, 2*content.ChunkSize)})
	if v := scrapeValue(t, gw, `s3gate_db_table_bytes{part="toast",table="blob_chunks"}`); v < 2*content.ChunkSize {
		t.Fatalf("blob_chunks TOAST bytes %v after a 2 MiB put; want at least 2 MiB", v)
	}
	if _, err := c.DeleteObject(ctxT(t), &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")}); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := gc.RunOnce(ctxT(t), pg.NewGC(pool), nil, gc.Options{Grace: -1, StageGrace: -1, PinWindow: -1}); err != nil {
		t.Fatal(err)
	}
	// An idle backend reports its statistics within 10 s; ask GC's
	// connections to report theirs now.
	for _, conn := range pool.AcquireAllIdle(ctxT(t)) {
		_, err := conn.Exec(ctxT(t), `SELECT pg_stat_force_next_flush()`)
		conn.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	poll(t, "dead chunk rows reported", func() (bool, error) {
		return scrapeValue(t, gw, `s3gate_db_table_tuples{state="dead",table="blob_chunks"}`) >= 2, nil
	})
	// A transaction held open by a session named as the gateway's.
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = pg.AppName + "-test"
	held, err := pgx.ConnectConfig(ctxT(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(context.Background())
	tx, err := held.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // the test's own open transaction
	if _, err := tx.Exec(ctxT(t), `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	poll(t, "the open transaction's age", func() (bool, error) {
		return scrapeValue(t, gw, `s3gate_db_oldest_xact_age_seconds`) > 0.2, nil
	})
}

// scrapeValue returns the value of one series of the gateway's /metrics
// (name{labels} as the text format writes it, labels sorted), or -1.
func scrapeValue(t *testing.T, gw *testgw.Gateway, series string) float64 {
	t.Helper()
	resp, err := http.Get(gw.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(series+" ")); ok {
			f, err := strconv.ParseFloat(string(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return -1
}
