package storetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestStore runs the suite on every metadata engine with every large engine.
func TestStore(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) *storetest.Env
	}{
		{"embedded-local", openEmbedded},
		{"pg-pgchunks", openPG(pg.LargePGChunks)},
		{"pg-pglo", openPG(pg.LargePGLO)},
		{"pg-local", openPG(pg.LargeLocal)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, c.open)
		})
	}
}

func openEmbedded(t *testing.T) *storetest.Env {
	e, err := embedded.Open(context.Background(), embedded.Config{Dir: t.TempDir(), InlineMax: storetest.Knee})
	if err != nil {
		t.Fatalf("embedded.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	v := &storetest.Env{
		Store:     e,
		LargeTier: store.TierLocal,
		Units:     func(int) map[string]int { return map[string]int{"files": 1} },
		// fsck's repair, through the engine's GC as fsck runs it.
		RemoveVersionWithBlobs: e.GC().RemoveVersionWithBlobs,
		Idle: func(t testing.TB) {
			if n := e.PinCount(); n != 0 {
				t.Errorf("%d pins held", n)
			}
		},
	}
	db := e.DB()
	schema{
		row: func(q string, args ...any) row { return db.QueryRowContext(context.Background(), q, args...) },
		list: func(q string) ([]string, error) {
			rows, err := db.QueryContext(context.Background(), q)
			if err != nil {
				return nil, err
			}
			return collect(rows)
		},
		media: e.Media(),
	}.fill(v)
	return v
}

func openPG(mode string) func(t *testing.T) *storetest.Env {
	return func(t *testing.T) *storetest.Env {
		ctx := context.Background()
		cfg := pg.Config{DatabaseURL: pgtest.DSN(t), InlineMax: storetest.Knee, Large: mode}
		var units map[string]int
		switch mode {
		case pg.LargeLocal:
			m, err := localfs.Open(t.TempDir(), false)
			if err != nil {
				t.Fatalf("localfs.Open: %v", err)
			}
			cfg.Media = m
			units = map[string]int{"files": 1}
		case pg.LargePGLO:
			units = map[string]int{"los": 1}
		}
		e, err := pg.Open(ctx, cfg)
		if err != nil {
			t.Fatalf("pg.Open: %v", err)
		}
		t.Cleanup(e.Close)
		pool := e.Pool()
		v := &storetest.Env{
			Store:     e,
			LargeTier: mode,
			Units: func(size int) map[string]int {
				if mode == pg.LargePGChunks {
					return map[string]int{"chunks": (size + content.ChunkSize - 1) / content.ChunkSize}
				}
				return units
			},
			Idle: func(t testing.TB) { storetest.PoolClean(t, pool) },
			// fsck's repair, through a GC over the pool as fsck builds it.
			RemoveVersionWithBlobs: pg.NewGC(pool).RemoveVersionWithBlobs,
		}
		if mode != pg.LargeLocal {
			v.ReapStages = func(t testing.TB) {
				// Every stage row with its chunk rows or large object, as
				// GC's stage reaper drops an abandoned one. It runs inside
				// the put's body read, maybe not on the test's goroutine:
				// Errorf, not Fatalf.
				var n, los int
				if err := pool.QueryRow(ctx, `WITH s AS (DELETE FROM blob_stages RETURNING blob_id, lo_oid),
					c AS (DELETE FROM blob_chunks WHERE blob_id IN (SELECT blob_id FROM s))
					SELECT count(*), count(lo_unlink(lo_oid)) FROM s`).Scan(&n, &los); err != nil {
					t.Errorf("reap stages: %v", err)
				} else if n == 0 {
					t.Error("no stage row to reap")
				}
			}
		}
		schema{
			row: func(q string, args ...any) row { return pool.QueryRow(ctx, q, args...) },
			list: func(q string) ([]string, error) {
				rows, err := pool.Query(ctx, q)
				if err != nil {
					return nil, err
				}
				return pgx.CollectRows(rows, pgx.RowTo[string])
			},
			kinds: map[string]string{
				"los":    `SELECT CAST(oid AS text) FROM pg_largeobject_metadata ORDER BY oid`,
				"chunks": `SELECT blob_id || ':' || seq FROM blob_chunks ORDER BY blob_id, seq`,
				"staged": `SELECT CAST(blob_id AS text) FROM blob_stages ORDER BY blob_id`,
			},
			media: cfg.Media,
		}.fill(v)
		return v
	}
}

// row is what pgx and database/sql both return from QueryRow.
type row interface{ Scan(dest ...any) error }

// schema answers the hooks from the tables both metadata engines share.
type schema struct {
	row   func(q string, args ...any) row
	list  func(q string) ([]string, error) // one text column
	kinds map[string]string                // content kinds besides blobs and files: their id queries
	media *localfs.Media                   // nil without files
}

func (s schema) fill(v *storetest.Env) {
	v.Object = func(t testing.TB, bucket, key string) storetest.Stored {
		t.Helper()
		var o storetest.Stored
		if err := s.row(`SELECT coalesce(o.blob_id, 0), coalesce(b.tier, ''),
			(SELECT count(*) FROM object_parts p WHERE p.bucket = o.bucket AND p.key = o.key)
			FROM objects o LEFT JOIN blobs b ON b.id = o.blob_id WHERE o.bucket = $1 AND o.key = $2`,
			bucket, key).Scan(&o.Blob, &o.Tier, &o.Parts); err != nil {
			t.Fatalf("object %s/%s: %v", bucket, key, err)
		}
		return o
	}
	v.Rows = func(t testing.TB) storetest.Rows {
		t.Helper()
		var r storetest.Rows
		if err := s.row(`SELECT (SELECT count(*) FROM objects), (SELECT count(*) FROM uploads),
			(SELECT count(*) FROM upload_parts)`).Scan(&r.Objects, &r.Uploads, &r.UploadParts); err != nil {
			t.Fatalf("count rows: %v", err)
		}
		return r
	}
	v.Content = func(t testing.TB) map[string][]string {
		t.Helper()
		m := map[string][]string{}
		queries := map[string]string{"blobs": `SELECT CAST(id AS text) FROM blobs ORDER BY id`}
		maps.Copy(queries, s.kinds)
		for k, q := range queries {
			ids, err := s.list(q)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			m[k] = ids
		}
		if s.media != nil {
			ids, err := s.media.BlobIDs(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			stages, err := s.media.StageFiles()
			if err != nil {
				t.Fatal(err)
			}
			m["files"], m["stages"] = nil, slices.Sorted(slices.Values(stages))
			for _, id := range slices.Sorted(slices.Values(ids)) {
				m["files"] = append(m["files"], strconv.FormatInt(id, 10))
			}
		}
		return m
	}
}

func collect(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
