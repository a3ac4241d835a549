package pgops

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/pg"
)

// TestUpgradeUnderLoad: a gateway keeps serving, without one failed
// request and staying ready, while a newer binary's migration N+1 is applied
// under its load. The migration is written here as that newer binary's
// `s3gate migrate` would run it (one transaction under the migration lock,
// recorded in schema_migrations) and is additive, as expand-first migrations
// are: a new column on a hot table and a new table. What it proves: the
// running binary's statements do not depend on the exact shape of the
// tables, and its readiness accepts a newer schema. It does not prove that
// any future migration is additive: that is the review rule of
// docs/operations.md.
func TestUpgradeUnderLoad(t *testing.T) {
	dsn := pgtest.DSN(t)
	gw := start(t, config.EnginePGChunks, dsn)
	c := client(gw)
	createBucket(t, c, "bkt")

	var ops, failures atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o := object{key: fmt.Sprintf("w%d/%d", w, i), data: randBytes(uint64(w*100000+i), (i%3)*inlineMax)}
				_, err := c.PutObject(ctxT(t), &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: &o.key, Body: strings.NewReader(string(o.data))})
				if err == nil {
					var b []byte
					if b, err = get(ctxT(t), c, "bkt", o.key); err == nil && string(b) != string(o.data) {
						err = fmt.Errorf("%s: read back %d bytes, want %d", o.key, len(b), len(o.data))
					}
				}
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				ops.Add(1)
			}
		}()
	}
	atLeast := func(n int64) func() (bool, error) { return func() (bool, error) { return ops.Load() >= n, nil } }
	poll(t, "load running", atLeast(20))

	db := connect(t, dsn)
	applied, _, err := pg.SchemaVersion(ctxT(t), db)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`SELECT pg_advisory_xact_lock(` + fmt.Sprint(fleet.MigrationLockKey()) + `)`,
		`SET LOCAL lock_timeout = '10s'`,
		`ALTER TABLE objects ADD COLUMN expand_test text`,
		`CREATE TABLE expand_test (id bigint PRIMARY KEY, note text)`,
		fmt.Sprintf(`INSERT INTO schema_migrations (version, name) VALUES (%d, '%04d_expand_test.sql')`, applied+1, applied+1),
	} {
		if _, err := tx.Exec(ctxT(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	migratedAt := ops.Load()
	poll(t, "load after the migration", atLeast(migratedAt+40))
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed across the migration; first: %v", n, ops.Load(), firstErr.Load())
	}
	resp, err := http.Get(gw.MetricsURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz after a newer additive migration: %d, want 200", resp.StatusCode)
	}
	t.Logf("%d operations, %d of them after migration %d was applied", ops.Load(), ops.Load()-migratedAt, applied+1)
}
