package bench

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/metacache"
	"github.com/s3gate/s3gate/store/pg"
)

// benchSmallPutBounds measures what bounds the 4 KiB PUT below the HTTP
// layer, paired slice by slice with the raw upsert of put-4KiB:
//
//   - "store alone": the store's PutObject in this process (protocol, pgx
//     and its statements: exactly a PUT's database work, metadata cache
//     included) on a database of its own, 16 goroutines, no HTTP, SigV4 or
//     SDK. Its ratio to the raw upsert is the most the gateway could reach
//     with a free HTTP layer and free clients.
//   - "two-row floor": one autocommit statement that inserts a blob row
//     and upserts the object row referencing it (the rows any
//     content-addressed put writes, without the key's lock, the current
//     row's read or the conditions): the most any put that deduplicates
//     could reach.
//
// The summary shows them as rows of their own (rate, ratio to the raw
// upsert, server CPU: the store's process CPU as "gw", PostgreSQL's).
func (e *gwEnv) benchSmallPutBounds(b *testing.B) {
	if e.raw == nil || e.pg == nil {
		b.Skip("needs the run's own PostgreSQL")
	}
	st := openStoreSide(b, e.pg.newDB(b))
	n := e.sz.smallOps
	rawKeys, stKeys := make([]string, n), make([]string, n)
	for i := range rawKeys {
		id := newID()
		rawKeys[i], stKeys[i] = fmt.Sprintf("bound/%d", id), fmt.Sprintf("store/%d", id)
	}
	var rawR, stR, floorR round
	bufs := make([][]byte, clients)
	for c := range bufs {
		bufs[c] = make([]byte, smallSize)
	}
	for s := range smallSlices {
		lo, hi := n*s/smallSlices, n*(s+1)/smallSlices
		rawR = rawR.add(*e.rawSmall(b, lo, hi, func(ctx context.Context, c *pgx.Conn, i int, buf []byte) error {
			fill(buf, uint64(i)+1<<40, 0)
			return smallUpsert(ctx, c, rawKeys[i], buf)
		}))
		r, err := cpuProbe{gw: func() (time.Duration, bool) { return selfCPU(), true }, pg: e.raw.cpu}.measure(hi-lo, 0,
			func() ([]time.Duration, time.Duration, error) {
				return runOps(b.Context(), clients, hi-lo, func(ctx context.Context, c, i int) error {
					buf := bufs[c]
					fill(buf, uint64(lo+i)+2<<40, 0)
					return st.put(ctx, stKeys[lo+i], buf)
				})
			})
		if err != nil {
			b.Fatal(err)
		}
		r.clCPU = 0 // the store is this process: its CPU is the "gw" column
		stR = stR.add(r)
		floorR = floorR.add(*e.rawSmall(b, lo, hi, func(ctx context.Context, c *pgx.Conn, i int, buf []byte) error {
			fill(buf, uint64(i)+3<<40, 0)
			return floorPut(ctx, c, fmt.Sprintf("floor/%s", rawKeys[i]), buf)
		}))
	}
	e.sum.report(b, e.engine, "put-4KiB: store alone", stR, &rawR, target{"bound: free HTTP and clients", nil})
	e.sum.report(b, e.engine, "put-4KiB: two-row floor", floorR, &rawR, target{"bound: any deduplicating put", nil})
}

// storeSide is a store on a database of its own, in this process.
type storeSide struct {
	s *metacache.Store
}

const boundBucket = "bench"

func openStoreSide(b *testing.B, dsn string) *storeSide {
	ctx := b.Context()
	// 32 connections, the gateway's default pool.
	if err := pg.Migrate(ctx, dsn); err != nil {
		b.Fatalf("store side: %v", err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatalf("store side: %v", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "32")
	u.RawQuery = q.Encode()
	eng, err := pg.Open(ctx, pg.Config{DatabaseURL: u.String(), Large: pg.LargePGChunks, Region: "us-east-1", SkipMigrate: true})
	if err != nil {
		b.Fatalf("store side: open: %v", err)
	}
	b.Cleanup(eng.Close)
	s := metacache.Wrap(eng, metacache.New(metacache.Options{}))
	if err := s.CreateBucket(ctx, boundBucket, ""); err != nil {
		b.Fatalf("store side: create bucket: %v", err)
	}
	return &storeSide{s: s}
}

// put stores data as key with the ETag checked, as a PUT answers it.
func (s *storeSide) put(ctx context.Context, key string, data []byte) error {
	info, err := s.s.PutObject(ctx, boundBucket, key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
	if err != nil {
		return fmt.Errorf("store put %s: %w", key, err)
	}
	sum := md5.Sum(data)
	if want := hex.EncodeToString(sum[:]); info.ETag != want {
		return fmt.Errorf("store put %s: etag %s, want %s", key, info.ETag, want)
	}
	return nil
}

// floorPut writes a blob row and the object row referencing it in one
// autocommit statement (the content's hashes computed as a put computes
// them).
func floorPut(ctx context.Context, conn *pgx.Conn, key string, data []byte) error {
	sha, m := sha256.Sum256(data), md5.Sum(data)
	_, err := conn.Exec(ctx, `WITH blob AS (
			INSERT INTO bench_blobs (id, sha256, size, data) VALUES (nextval('bench_blob_ids'), $2, $3, $4)
			ON CONFLICT (sha256) DO NOTHING RETURNING id)
		INSERT INTO bench_objects (key, blob_id, size, etag)
		SELECT $1, coalesce((SELECT id FROM blob), (SELECT id FROM bench_blobs WHERE sha256 = $2)), $3, $5
		ON CONFLICT (key) DO UPDATE SET blob_id = excluded.blob_id, size = excluded.size, etag = excluded.etag,
			modified = excluded.modified`, key, sha[:], len(data), data, hex.EncodeToString(m[:]))
	if err != nil {
		return fmt.Errorf("floor put %s: %w", key, err)
	}
	return nil
}
