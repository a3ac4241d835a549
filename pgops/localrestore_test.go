package pgops

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fsck"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
)

// TestLocalRestoreFsck restores a large = local store in the unsafe order
// on purpose: the data directory copied first, the database dumped later,
// with writes and a GC between. Objects written in between have rows but no
// files; an object deleted and collected in between has a file but no row.
// fsck reports both; --repair=remove-missing,remove-orphans makes the store
// consistent, and a gateway then serves exactly the objects that have bytes.
func TestLocalRestoreFsck(t *testing.T) {
	dsn := pgtest.DSN(t)
	gw := start(t, config.EngineLocal, dsn, "S3GATE_GC_INTERVAL=0")
	c := client(gw)
	createBucket(t, c, "bkt")
	early := sizeClasses("early/", 1)
	putAll(t, c, "bkt", early)

	files := filepath.Join(t.TempDir(), "data")
	if out, err := exec.Command("cp", "-a", gw.DataDir, files).CombinedOutput(); err != nil {
		t.Fatalf("copy the data directory: %v\n%s", err, out)
	}
	late := sizeClasses("late/", 50)
	putAll(t, c, "bkt", late)
	gone := early[3] // multi-chunk: a file of its own
	if _, err := c.DeleteObject(ctxT(t), &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String(gone.key)}); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctxT(t), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	media, err := localfs.Open(gw.DataDir, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := gc.RunOnce(ctxT(t), pg.NewGC(pool), media, gc.Options{Grace: -1, StageGrace: -1, PinWindow: -1, Media: media})
	if err != nil || st.BlobsDeleted != 1 {
		t.Fatalf("gc: %+v, %v; want the deleted object's blob collected", st, err)
	}
	dump := filepath.Join(t.TempDir(), "db.dump")
	tool(t, "pg_dump", "-Fc", "-f", dump, "-d", dsn)
	restored := pgtest.DSN(t)
	tool(t, "pg_restore", "--no-owner", "--exit-on-error", "-d", restored, dump)

	fsckRun := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := fsck.Command(ctxT(t), append([]string{"-database-url", restored, "-data-dir", files, "-large-engine", "local", "-gc-grace", "1ms"}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	code, out := fsckRun("-orphans")
	// The late objects above the knee have rows but no files (the empty and
	// inline ones live in their rows); the collected one has a file, no row.
	var want []string
	survivors := append([]object{}, early[:3]...)
	survivors = append(survivors, early[4:]...)
	for _, o := range late {
		if len(o.data) > inlineMax {
			want = append(want, "AFFECTED object-without-bytes object bkt/"+o.key)
		} else {
			survivors = append(survivors, o)
		}
	}
	want = append(want, "PROBLEM orphan-file blob")
	if code != 1 {
		t.Fatalf("fsck -orphans: exit %d, want 1\n%s", code, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("fsck -orphans lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "REPAIR") {
		t.Fatalf("fsck without --repair repaired:\n%s", out)
	}
	if code, out := fsckRun("--repair=remove-missing,remove-orphans"); code != 0 || !strings.Contains(out, "REPAIR removed object bkt/late/knee") ||
		!strings.Contains(out, "REPAIR removed 1 orphan blob files") {
		t.Fatalf("fsck --repair: exit %d, want 0 after removing the objects without bytes and the orphan file:\n%s", code, out)
	}
	if code, out := fsckRun("-orphans"); code != 0 {
		t.Fatalf("fsck after the repair: exit %d\n%s", code, out)
	}
	rc := client(start(t, config.EngineLocal, restored, "S3GATE_GC_INTERVAL=0", "S3GATE_DATA_DIR="+files))
	expectExactly(t, rc, "bkt", survivors)
}
