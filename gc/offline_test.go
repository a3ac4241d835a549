package gc

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
)

// leftovers plants garbage of every kind on v and returns the plan a
// collection with no grace and no upload expiry must report.
func (v *env) leftovers(t *testing.T) Plan {
	t.Helper()
	ctx := context.Background()
	var want Plan
	small, large := content(1), content(4) // 300 B inline, 3000 B large
	v.garbage(t, "small", small)
	v.garbage(t, "large", large)
	want.Blobs, want.BlobBytes = 2, int64(len(small)+len(large))
	if err := v.put(ctx, "kept", content(5)); err != nil {
		t.Fatal(err)
	}
	// An incomplete upload whose one part nothing else references.
	up, err := v.eng.CreateMultipartUpload(ctx, v.bucket, "mp", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	part := bytes.Repeat([]byte("p"), 5000)
	if _, err := v.eng.UploadPart(ctx, v.bucket, "mp", up.UploadID, 1, bytes.NewReader(part), store.PutOptions{Size: int64(len(part))}); err != nil {
		t.Fatal(err)
	}
	want.ExpiredUploads, want.UploadBlobs, want.UploadBlobBytes = 1, 1, int64(len(part))
	switch v.mode {
	case pg.LargePGLO:
		if _, err := v.pool.Exec(ctx, `SELECT lo_from_bytea(0, $1)`, []byte("orphan large object")); err != nil {
			t.Fatal(err)
		}
		want.OrphanLOs, want.OrphanLOBytes = 1, int64(len("orphan large object"))
	case pg.LargeLocal:
		if err := os.WriteFile(filepath.Join(v.media.Dir(), "stage", "crashed"), []byte("half a put"), 0o600); err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := v.pool.QueryRow(ctx, `SELECT nextval('blob_ids')`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		p := blobFilePath(v.media, id)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("published, never committed"), 0o600); err != nil {
			t.Fatal(err)
		}
		want.StageFiles, want.StageBytes = 1, int64(len("half a put"))
		want.OrphanFiles, want.OrphanFileBytes = 1, int64(len("published, never committed"))
	}
	return want
}

// inventory counts everything a collection could remove.
func (v *env) inventory(t *testing.T) [5]int {
	t.Helper()
	inv := [5]int{
		v.count(t, `SELECT count(*) FROM blobs`),
		v.count(t, `SELECT count(*) FROM uploads`),
		v.count(t, `SELECT count(*) FROM pg_largeobject_metadata`),
	}
	if v.media != nil {
		ids, err := v.media.BlobIDs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		stage, err := v.media.StageFiles()
		if err != nil {
			t.Fatal(err)
		}
		inv[3], inv[4] = len(ids), len(stage)
	}
	return inv
}

func TestOfflineDryRunThenCollect(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			want := v.leftovers(t)
			before := v.inventory(t)
			opts := v.opts()
			opts.UploadExpiry = -1

			// With the default grace everything is too young.
			young, _, err := Offline(ctx, v.db, Options{Media: v.media, UploadExpiry: -1, StageGrace: -1}, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if young.TotalBlobs() != 0 || young.OrphanLOs != 0 || young.OrphanFiles != 0 {
				t.Errorf("grace ignored: %+v", young)
			}

			plan, st, err := Offline(ctx, v.db, opts, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if plan != want {
				t.Errorf("dry run plan\n got %+v\nwant %+v", plan, want)
			}
			if st != (Stats{}) {
				t.Errorf("dry run reports work done: %+v", st)
			}
			if after := v.inventory(t); after != before {
				t.Fatalf("dry run changed the store: %v -> %v", before, after)
			}
			if v.count(t, `SELECT count(*) FROM pg_tables WHERE tablename = 'gc_lo_sightings'`) != 1 {
				// newEnv created it; the dry run must not have needed to.
				t.Fatal("gc_lo_sightings missing")
			}

			var progress bytes.Buffer
			var m Metrics
			opts.Metrics = &m
			_, st, err = Offline(ctx, v.db, opts, false, &progress)
			if err != nil {
				t.Fatal(err)
			}
			got := Plan{
				Blobs: st.BlobsDeleted, BlobBytes: st.BytesReclaimed,
				ExpiredUploads: st.UploadsAborted, OrphanLOs: st.LargeObjectsUnlinked,
				StageFiles: st.StageFilesRemoved, OrphanFiles: st.BlobFilesRemoved,
			}
			wantGot := Plan{
				Blobs: want.TotalBlobs(), BlobBytes: want.BlobBytes + want.UploadBlobBytes,
				ExpiredUploads: want.ExpiredUploads, OrphanLOs: want.OrphanLOs,
				StageFiles: want.StageFiles, OrphanFiles: want.OrphanFiles,
			}
			if got != wantGot {
				t.Errorf("offline run reclaimed %+v, the plan said %+v", got, wantGot)
			}
			v.assertNoOrphans(t)
			if n := v.count(t, `SELECT count(*) FROM uploads`); n != 0 {
				t.Errorf("%d uploads left", n)
			}
			if err := v.check(ctx, "kept", content(5)); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(progress.String(), "unreferenced blobs: 3/3 done") {
				t.Errorf("progress lines:\n%s", progress.String())
			}
			if m.SweepsRun.Load() != 1 || m.BlobsReclaimed.Load() != want.TotalBlobs() || m.UploadsAborted.Load() != 1 ||
				m.OrphansFound.Load() != want.OrphanLOs+want.StageFiles+want.OrphanFiles {
				t.Errorf("metrics: sweeps %d blobs %d uploads %d orphans %d", m.SweepsRun.Load(), m.BlobsReclaimed.Load(),
					m.UploadsAborted.Load(), m.OrphansFound.Load())
			}
			// Nothing is left to plan.
			plan, _, err = Offline(ctx, v.db, opts, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if plan != (Plan{}) {
				t.Errorf("after the collection the plan is %+v", plan)
			}
		})
	}
}

// TestOfflineUsesStoreLocks proves that the keys offline GC locks are the
// very keys of store/pg's mutations: with the key held elsewhere, the
// engine's Abort and Delete wait on it, and offline GC skips the upload.
func TestOfflineUsesStoreLocks(t *testing.T) {
	v := newEnv(t, pg.LargePGChunks)
	ctx := context.Background()
	up, err := v.eng.CreateMultipartUpload(ctx, v.bucket, "mp", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.put(ctx, "obj", content(2)); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.ConnectConfig(ctx, v.pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tests := []struct {
		name string
		key  int64
		op   func() error
	}{
		{"upload key blocks Abort", fleet.UploadLockKey(up.UploadID), func() error {
			return v.eng.AbortMultipartUpload(ctx, v.bucket, "mp", up.UploadID)
		}},
		{"object key blocks Delete", fleet.ObjectLockKey(v.bucket, "obj"), func() error {
			return v.eng.DeleteObject(ctx, v.bucket, "obj")
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, tc.key); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				// Offline GC waits on the same key, times out and skips.
				opts := v.opts()
				opts.UploadExpiry, opts.LockTimeout = -1, 50*time.Millisecond
				_, st, err := Offline(ctx, v.db, opts, false, nil)
				if err != nil {
					t.Fatal(err)
				}
				if st.UploadsAborted != 0 || v.count(t, `SELECT count(*) FROM uploads`) != 1 {
					t.Fatalf("upload reaped through a held lock: %+v", st)
				}
			}
			done := make(chan error, 1)
			go func() { done <- tc.op() }()
			v.waitLockWaiters(t, 1)
			select {
			case err := <-done:
				t.Fatalf("the engine did not wait on the key: %v", err)
			default:
			}
			if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, tc.key); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	v := newEnv(t, pg.LargeLocal)
	want := v.leftovers(t)
	dsn := v.pool.Config().ConnString()
	base := []string{"S3GATE_DATABASE_URL=" + dsn, "S3GATE_LARGE_ENGINE=local", "S3GATE_DATA_DIR=" + v.media.Dir(),
		"S3GATE_LOG_LEVEL=error"}
	tests := []struct {
		name     string
		args     []string
		environ  []string
		code     int
		stdout   []string // substrings
		stderr   []string
		reclaims bool
	}{
		{"no embedded store", []string{"--offline"}, []string{"S3GATE_DATA_DIR=" + t.TempDir()}, ExitUsage,
			nil, []string{"no embedded store in"}, false},
		{"unknown flag", []string{"--bogus"}, base, ExitUsage, nil, []string{"bogus"}, false},
		{"bad setting", []string{"--offline", "-inline-max", "lots"}, base, ExitUsage, nil, []string{"S3GATE_INLINE_MAX"}, false},
		{"negative duration", []string{"--grace=-1s"}, base, ExitUsage, nil, []string{"must not be negative"}, false},
		{"help", []string{"-h"}, base, ExitOK, []string{"--offline", "S3GATE_DATABASE_URL"}, nil, false},
		{"young garbage", []string{"--offline", "--dry-run"}, base, ExitOK,
			[]string{"dry run", "unreferenced blobs 0 0 B"}, nil, false},
		{"dry run", []string{"--offline", "--dry-run", "--gc-grace", "1ns", "--stage-grace=1ns", "--upload-expiry=1ns"}, base, ExitOK,
			[]string{"nothing was deleted", "unreferenced blobs 2 3.2 KiB", "their part blobs 1 4.9 KiB",
				"stage files 1 10 B", "blob files without row 1 26 B"}, nil, false},
		{"offline", []string{"-offline", "-grace=1ns", "-stage-grace=1ns", "-upload-expiry=1ns"}, base, ExitOK,
			[]string{"reclaimed 3 blobs", "aborted 1 expired uploads", "1 stage files, 1 blob files without row"}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := v.inventory(t)
			var out, errOut bytes.Buffer
			code := command(context.Background(), tc.args, tc.environ, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			flat := strings.Join(strings.Fields(out.String()), " ")
			for _, s := range tc.stdout {
				if !strings.Contains(flat, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errOut.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut.String())
				}
			}
			if after := v.inventory(t); (after != before) != tc.reclaims {
				t.Errorf("inventory %v -> %v (reclaim expected: %v)", before, after, tc.reclaims)
			}
		})
	}
	v.assertNoOrphans(t)
	_ = want
}

// TestRunOnceMetrics: a counted run and a run that finds the lease held are
// both recorded.
func TestRunOnceMetrics(t *testing.T) {
	v := newEnv(t, pg.LargePGChunks)
	ctx := context.Background()
	v.garbage(t, "a", content(4))
	var m Metrics
	opts := v.opts()
	opts.PinWindow, opts.Metrics, opts.Holder = -1, &m, "me"
	st, err := RunOnce(ctx, v.db, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if st.BlobsDeleted != 1 || m.SweepsRun.Load() != 1 || m.BlobsReclaimed.Load() != 1 ||
		m.BytesReclaimed.Load() != int64(len(content(4))) || m.LeaseAcquired.Load() != 1 || m.LeaseHeld.Load() != 0 ||
		m.LastSweepUnix.Load() == 0 || m.LeaseLost.Load() != 0 {
		t.Fatalf("after a run: %+v, metrics %+v", st, &m)
	}
	v.holdLease(t)
	if _, err := RunOnce(ctx, v.db, nil, opts); err == nil {
		t.Fatal("RunOnce ran while another holder had the lease")
	}
	if m.LeaseBusy.Load() != 1 || m.SweepsRun.Load() != 1 || m.LeaseHeld.Load() != 0 {
		t.Fatalf("after a busy lease: %+v", &m)
	}
}

func TestProgressPlain(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := NewProgress(&buf, "blobs", 10, "")
	p.now = func() time.Time { return now }
	p.Add(1) // first report
	p.Add(1) // too soon: no line
	now = now.Add(PlainEvery)
	p.Add(3)
	p.Done()
	p.Done() // idempotent
	want := "blobs: 1/10\nblobs: 5/10\nblobs: 5/10 done\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
	var nilP *Progress
	nilP.Add(1) // a nil progress is a no-op
	nilP.Done()
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{5 << 20, "5.0 MiB"}, {2 << 30, "2.0 GiB"},
	}
	for _, tc := range tests {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestSplitArgs(t *testing.T) {
	own := Flags{"offline": true, "grace": false}
	tests := []struct {
		args       []string
		mine, rest string
	}{
		{[]string{"--offline", "-inline-max", "1k"}, "[--offline]", "[-inline-max 1k]"},
		{[]string{"-grace", "5s", "-addr=x"}, "[-grace 5s]", "[-addr=x]"},
		{[]string{"--grace=5s", "--offline=false"}, "[--grace=5s --offline=false]", "[]"},
		{[]string{"plain", "--", "-offline"}, "[]", "[plain -- -offline]"},
	}
	for _, tc := range tests {
		mine, rest := SplitArgs(tc.args, own)
		if got := strings.Join([]string{fmtList(mine), fmtList(rest)}, " "); got != tc.mine+" "+tc.rest {
			t.Errorf("SplitArgs(%q) = %s, want %s %s", tc.args, got, tc.mine, tc.rest)
		}
	}
}

func fmtList(s []string) string { return "[" + strings.Join(s, " ") + "]" }
