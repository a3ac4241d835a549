package pgops

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/pg"
)

// TestPointInTimeRecovery takes a base backup of a primary that archives
// its WAL, writes set A, notes the database time, writes set B and deletes
// part of A, then recovers a copy of the backup to the noted time
// (recovery.signal, restore_command, recovery_target_time): a gateway on the
// copy finds exactly set A, byte-exact, and nothing of B; a GC sweep with
// next to no grace then deletes nothing a recovered object needs.
func TestPointInTimeRecovery(t *testing.T) {
	primary := pgtest.NewServer(t)
	archive, err := primary.Mkdir("archive")
	if err != nil {
		t.Fatal(err)
	}
	primary.Set("archive_mode=on", "archive_command=test ! -f "+archive+"/%f && cp %p "+archive+"/%f")
	if err := primary.Start(); err != nil {
		t.Fatal(err)
	}
	dsn, err := primary.CreateDatabase("s3")
	if err != nil {
		t.Fatal(err)
	}
	// No online GC on the primary: its lease row, recovered as held, would
	// keep the sweep below waiting for its expiry (30 s; docs/operations.md).
	pc := client(start(t, config.EnginePGChunks, dsn, "S3GATE_GC_INTERVAL=0"))
	createBucket(t, pc, "bkt")

	recovered := pgtest.NewBlankServer(t)
	if _, err := recovered.Tool(ctxT(t), "pg_basebackup", "-D", recovered.DataDir(), "-h", "127.0.0.1",
		"-p", strconv.Itoa(primary.Port()), "-U", "postgres", "-X", "stream", "-c", "fast"); err != nil {
		t.Fatal(err)
	}

	setA := sizeClasses("a/", 1)
	putAll(t, pc, "bkt", setA)
	db := connect(t, dsn)
	archived(t, db) // set A's commits are in the archive
	var target time.Time
	if err := db.QueryRow(ctxT(t), `SELECT clock_timestamp()`).Scan(&target); err != nil {
		t.Fatal(err)
	}
	setB := sizeClasses("b/", 50)[:4] // no multipart: set A has one
	putAll(t, pc, "bkt", setB)
	for _, o := range setA[1:3] {
		if _, err := pc.DeleteObject(ctxT(t), &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String(o.key)}); err != nil {
			t.Fatal(err)
		}
	}
	archived(t, db) // the WAL past the target too: recovery must see it to stop there

	if err := recovered.WriteFile("recovery.signal", nil); err != nil {
		t.Fatal(err)
	}
	recovered.Set("restore_command=cp "+filepath.Join(archive, "%f")+" %p",
		"recovery_target_time="+target.UTC().Format("2006-01-02 15:04:05.999999+00"),
		"recovery_target_action=promote")
	if err := recovered.Start(); err != nil {
		t.Fatal(err)
	}
	rdb := connect(t, recovered.URL("s3"))
	poll(t, "recovery reached its target and promoted", func() (bool, error) {
		var in bool
		err := rdb.QueryRow(ctxT(t), `SELECT pg_is_in_recovery()`).Scan(&in)
		return !in, err
	})

	rc := client(start(t, config.EnginePGChunks, recovered.URL("s3"), "S3GATE_GC_INTERVAL=0"))
	expectExactly(t, rc, "bkt", setA)
	// A sweep without grace or pin window (nothing streams here): it must
	// find nothing to delete that the recovered objects need.
	pool, err := pgxpool.New(ctxT(t), recovered.URL("s3"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st, err := gc.RunOnce(ctxT(t), pg.NewGC(pool), nil, gc.Options{Grace: -1, StageGrace: -1, PinWindow: -1})
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	t.Logf("gc after recovery: %+v", st)
	expectExactly(t, rc, "bkt", setA)
	fsckClean(t, recovered.URL("s3"))
}

// archived switches the WAL segment and waits until the archiver has copied
// it: everything committed before the call is then in the archive.
func archived(t *testing.T, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) {
	t.Helper()
	var seg string
	if err := db.QueryRow(ctxT(t), `SELECT pg_walfile_name(pg_switch_wal())`).Scan(&seg); err != nil {
		t.Fatal(err)
	}
	poll(t, "WAL segment "+seg+" archived", func() (bool, error) {
		var last string
		err := db.QueryRow(ctxT(t), `SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver`).Scan(&last)
		return last >= seg, err
	})
}
