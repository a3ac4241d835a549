package gc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
)

// contentFiles counts the content files of media: blob files and stage
// files.
func contentFiles(t *testing.T, m *localfs.Media) int {
	t.Helper()
	ids, err := m.BlobIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stage, err := m.StageFiles()
	if err != nil {
		t.Fatal(err)
	}
	return len(ids) + len(stage)
}

// spaceCounts are what must return to their starting values.
type spaceCounts struct{ files, blobRows, uploads int }

func (v *env) space(t *testing.T) spaceCounts {
	t.Helper()
	return spaceCounts{contentFiles(t, v.media), v.count(t, `SELECT count(*) FROM blobs`), v.count(t, `SELECT count(*) FROM uploads`)}
}

// fillAndDelete writes n objects of distinct content on v (inline, file
// backed, multipart with one or two parts, and an upload left open), then
// deletes every object and returns how many blobs that left unreferenced.
func (v *env) fillAndDelete(t *testing.T, n int) int {
	t.Helper()
	ctx := context.Background()
	blobs := 0
	for i := range n {
		key := fmt.Sprintf("obj/%03d", i)
		data := bytes.Repeat([]byte{byte(i), byte(i >> 8), 'x'}, 100+(i%7)*700) // 300 B (inline) to 12.9 KiB
		switch {
		case i%25 == 0: // two parts: the first of the minimum size
			up, err := v.eng.CreateMultipartUpload(ctx, v.bucket, key, store.ObjectMeta{}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			var parts []store.CompletePart
			for n, d := range [][]byte{bytes.Repeat([]byte{byte(i)}, store.MinPartSize), data} {
				p, err := v.eng.UploadPart(ctx, v.bucket, key, up.UploadID, n+1, bytes.NewReader(d), store.PutOptions{Size: int64(len(d))})
				if err != nil {
					t.Fatal(err)
				}
				parts = append(parts, store.CompletePart{Number: n + 1, ETag: p.ETag})
			}
			if _, err := v.eng.CompleteMultipartUpload(ctx, v.bucket, key, up.UploadID, parts, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			blobs += 2
		case i%10 == 0: // one part
			up, err := v.eng.CreateMultipartUpload(ctx, v.bucket, key, store.ObjectMeta{}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			p, err := v.eng.UploadPart(ctx, v.bucket, key, up.UploadID, 1, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.eng.CompleteMultipartUpload(ctx, v.bucket, key, up.UploadID,
				[]store.CompletePart{{Number: 1, ETag: p.ETag}}, store.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			blobs++
		default:
			if err := v.put(ctx, key, data); err != nil {
				t.Fatal(err)
			}
			blobs++
		}
	}
	for i := range n {
		if err := v.eng.DeleteObject(ctx, v.bucket, fmt.Sprintf("obj/%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return blobs
}

// TestEmbeddedSpaceReturns: on the embedded default, 500 objects (inline,
// in files, multipart) are written and deleted; GC (the offline command, and
// separately the online runner within its interval) brings the data
// directory's content files and the blob rows back to their starting counts.
func TestEmbeddedSpaceReturns(t *testing.T) {
	const objects = 500
	t.Run("offline command", func(t *testing.T) {
		v := newEmbeddedEnv(t, embedded.Config{})
		start := v.space(t)
		blobs := v.fillAndDelete(t, objects)
		if got := v.space(t); got.blobRows != start.blobRows+blobs {
			t.Fatalf("after the deletes: %+v, want %d more blob rows than %+v", got, blobs, start)
		}
		// The command needs the data directory to itself.
		if err := v.emb.Close(); err != nil {
			t.Fatal(err)
		}
		environ := []string{"S3GATE_DATA_DIR=" + v.media.Dir(), "S3GATE_LOG_LEVEL=error", fmt.Sprintf("S3GATE_INLINE_MAX=%d", inlineMax)}
		var out, errOut bytes.Buffer
		if code := command(context.Background(), []string{"--offline", "--dry-run", "--gc-grace=1ns"}, environ, &out, &errOut); code != ExitOK ||
			!strings.Contains(strings.Join(strings.Fields(out.String()), " "), fmt.Sprintf("unreferenced blobs %d", blobs)) {
			t.Fatalf("dry run: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		out.Reset()
		if code := command(context.Background(), []string{"--offline", "--gc-grace=1ns", "--stage-grace=1ns"}, environ, &out, &errOut); code != ExitOK ||
			!strings.Contains(out.String(), fmt.Sprintf("reclaimed %d blobs", blobs)) {
			t.Fatalf("offline gc: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		v = reopen(t, v.media.Dir())
		if got := v.space(t); got != start {
			t.Fatalf("after gc: %+v, want the start %+v", got, start)
		}
		v.assertNoOrphans(t)
	})
	t.Run("online runner", func(t *testing.T) {
		v := newEmbeddedEnv(t, embedded.Config{})
		start := v.space(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var m Metrics
		r, err := NewRunner(ctx, v.db, v.media, Options{Grace: time.Millisecond, StageGrace: time.Hour,
			Interval: 20 * time.Millisecond, Metrics: &m, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		blobs := v.fillAndDelete(t, objects)
		// Poll until the runner's runs brought everything back (hang guard only).
		deadline := time.Now().Add(2 * time.Minute)
		for v.space(t) != start {
			if time.Now().After(deadline) {
				t.Fatalf("online gc: %+v, want the start %+v (runs %d, reclaimed %d)", v.space(t), start, m.SweepsRun.Load(), m.BlobsReclaimed.Load())
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Read before the cancel, which fails the run in flight.
		failed := m.SweepsFailed.Load()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if m.BlobsReclaimed.Load() != int64(blobs) || m.SweepsRun.Load() == 0 || failed != 0 {
			t.Fatalf("metrics: reclaimed %d of %d blobs in %d runs (%d failed)", m.BlobsReclaimed.Load(), blobs, m.SweepsRun.Load(), failed)
		}
		v.assertNoOrphans(t)
	})
}

// reopen opens the embedded engine on an existing data directory.
func reopen(t *testing.T, dir string) *env {
	t.Helper()
	eng, err := embedded.Open(context.Background(), embedded.Config{Dir: dir, InlineMax: inlineMax})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return &env{eng: eng, db: eng.GC(), emb: eng, media: eng.Media(), mode: embeddedMode, bucket: "b"}
}

// TestEmbeddedDataDirLock: while an engine has the data directory open, a
// second engine, an offline gc and an online gc refuse, naming the
// directory; once it is closed, they run.
func TestEmbeddedDataDirLock(t *testing.T) {
	v := newEmbeddedEnv(t, embedded.Config{})
	dir := v.media.Dir()
	if _, err := embedded.Open(context.Background(), embedded.Config{Dir: dir}); !errors.Is(err, embedded.ErrInUse) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second open: %v, want ErrInUse naming %s", err, dir)
	}
	environ := []string{"S3GATE_DATA_DIR=" + dir, "S3GATE_LOG_LEVEL=error"}
	for _, args := range [][]string{{"--offline"}, {}} {
		var out, errOut bytes.Buffer
		code := command(context.Background(), args, environ, &out, &errOut)
		msg := errOut.String()
		if code != ExitFail || !strings.Contains(msg, dir) || !strings.Contains(msg, "in use") ||
			!strings.Contains(msg, "runs online GC itself") || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
			t.Fatalf("gc %v while open: exit %d, stderr %q", args, code, msg)
		}
	}
	if err := v.emb.Close(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := command(context.Background(), nil, environ, &out, &errOut); code != ExitOK {
		t.Fatalf("gc after close: exit %d: %s", code, errOut.String())
	}
}

// TestEmbeddedReapers: expired uploads go with their parts; a file whose
// row never committed (a crash between publish and COMMIT, or after a
// sweep's commit) goes after the grace; stage files after the stage grace;
// a young file without a row stays.
func TestEmbeddedReapers(t *testing.T) {
	v := newEmbeddedEnv(t, embedded.Config{})
	ctx := context.Background()
	up, err := v.eng.CreateMultipartUpload(ctx, v.bucket, "mp", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	part := content(4)
	if _, err := v.eng.UploadPart(ctx, v.bucket, "mp", up.UploadID, 1, bytes.NewReader(part), store.PutOptions{Size: int64(len(part))}); err != nil {
		t.Fatal(err)
	}
	if err := v.put(ctx, "kept", content(10)); err != nil {
		t.Fatal(err)
	}
	if st := v.settle(t); st.UploadsAborted != 0 || st.BlobsDeleted != 0 {
		t.Fatalf("a young upload was reaped: %+v", st)
	}
	v.ageUploads(t)
	sf, err := v.media.Stage(ctx, strings.NewReader("half a put"))
	if err != nil {
		t.Fatal(err)
	}
	orphan := blobFilePath(v.media, 1_000_000)
	if err := os.MkdirAll(filepath.Dir(orphan), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("published, never committed"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := v.opts()
	opts.Grace, opts.StageGrace = time.Hour, time.Hour
	if st, err := collect(ctx, v.db, opts); err != nil || st.UploadsAborted != 1 || st.BlobsDeleted != 0 || st.BlobFilesRemoved != 0 || st.StageFilesRemoved != 0 {
		t.Fatalf("within the graces: %+v, %v; want only the upload aborted", st, err)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{sf.Path(), orphan} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := collect(ctx, v.db, opts); err != nil || st.BlobsDeleted != 0 || st.BlobFilesRemoved != 1 || st.StageFilesRemoved != 1 {
		t.Fatalf("after the graces: %+v, %v", st, err)
	}
	if st := v.settle(t); st.BlobsDeleted != 1 {
		t.Fatalf("the aborted upload's part blob: %+v", st)
	}
	v.assertNoOrphans(t)
	if err := v.check(ctx, "kept", content(10)); err != nil {
		t.Fatal(err)
	}
}
