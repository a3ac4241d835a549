package localfs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
)

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, ^seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func openMedia(t testing.TB) *Media {
	t.Helper()
	m, err := Open(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func stageAndPublish(t testing.TB, m *Media, data []byte, id int64) {
	t.Helper()
	sf, err := m.Stage(context.Background(), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if sf.Size() != int64(len(data)) {
		t.Fatalf("staged %d bytes, want %d", sf.Size(), len(data))
	}
	if err := m.Publish(context.Background(), sf, id); err != nil {
		t.Fatal(err)
	}
}

func readRange(t *testing.T, m *Media, id, off, n int64) ([]byte, error) {
	t.Helper()
	rc, err := m.Open(context.Background(), id, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestStagePublishOpenRanges(t *testing.T) {
	m := openMedia(t)
	sizes := []int{0, 1, writeBufSize - 1, writeBufSize, 2*writeBufSize + 3}
	for i, size := range sizes {
		id := int64(i + 1)
		data := randBytes(size, uint64(size))
		stageAndPublish(t, m, data, id)

		ranges := []struct {
			name    string
			off, n  int64
			wantErr bool
		}{
			{"whole", 0, int64(size), false},
			{"to end", 0, -1, false},
			{"empty at start", 0, 0, false},
			{"empty at end", int64(size), 0, false},
			{"first byte", 0, 1, size < 1},
			{"last byte", int64(size) - 1, 1, size < 1},
			{"middle", int64(size / 3), int64(size / 3), false},
			{"across write buffers", max(0, int64(writeBufSize-5)), 10, size < writeBufSize+5},
			{"tail from offset", int64(size / 2), -1, false},
			{"past the end", 0, int64(size) + 1, true},
			{"offset past the end", int64(size) + 1, 0, true},
			{"negative offset", -1, 1, true},
		}
		for _, r := range ranges {
			t.Run(fmt.Sprintf("%d/%s", size, r.name), func(t *testing.T) {
				got, err := readRange(t, m, id, r.off, r.n)
				if r.wantErr {
					if err == nil {
						t.Fatalf("range %d+%d of %d bytes succeeded", r.off, r.n, size)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				end := int64(size)
				if r.n >= 0 {
					end = r.off + r.n
				}
				if !bytes.Equal(got, data[r.off:end]) {
					t.Fatalf("range %d+%d: got %d bytes that differ from the content", r.off, r.n, len(got))
				}
			})
		}
	}
	ids, err := m.BlobIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("BlobIDs = %v", ids)
	}
	if sf, err := m.StageFiles(); err != nil || len(sf) != 0 {
		t.Fatalf("stage files left after publishing: %v %v", sf, err)
	}
}

func TestStageShortReads(t *testing.T) {
	m := openMedia(t)
	data := randBytes(3*writeBufSize+77, 9)
	sf, err := m.Stage(context.Background(), iotest.HalfReader(iotest.OneByteReader(bytes.NewReader(data[:1000]))))
	if err != nil {
		t.Fatal(err)
	}
	if err := sf.Discard(); err != nil {
		t.Fatal(err)
	}
	sf, err = m.Stage(context.Background(), iotest.HalfReader(bytes.NewReader(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Publish(context.Background(), sf, 42); err != nil {
		t.Fatal(err)
	}
	got, err := readRange(t, m, 42, 0, -1)
	if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("content differs after short reads (err %v)", err)
	}
}

// TestBlobLayout checks that ids, not keys, name files, and that ids sharing
// a fan-out directory or far apart coexist.
func TestBlobLayout(t *testing.T) {
	m := openMedia(t)
	ids := []int64{1, 257, 65537, 1 << 40, 255, 256}
	for _, id := range ids {
		stageAndPublish(t, m, []byte(strconv.FormatInt(id, 10)), id)
	}
	for _, id := range ids {
		got, err := readRange(t, m, id, 0, -1)
		if err != nil || string(got) != strconv.FormatInt(id, 10) {
			t.Fatalf("blob %d: %q %v", id, got, err)
		}
		rel, err := filepath.Rel(m.Dir(), m.blobPath(id))
		if err != nil {
			t.Fatal(err)
		}
		if parts := strings.Split(rel, string(filepath.Separator)); len(parts) != 4 || parts[0] != "blobs" || parts[3] != strconv.FormatInt(id, 10) {
			t.Fatalf("blob %d at %s", id, rel)
		}
	}
	got, err := m.BlobIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("BlobIDs = %v, want %v", got, want)
	}
	// Stray names in the blob tree are not ids.
	if err := os.WriteFile(filepath.Join(filepath.Dir(m.blobPath(1)), "junk.tmp"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got2, err := m.BlobIDs(context.Background()); err != nil || !slices.Equal(got2, want) {
		t.Fatalf("BlobIDs with a stray file = %v, %v", got2, err)
	}
}

func TestStageFileLifecycle(t *testing.T) {
	ctx := context.Background()
	m := openMedia(t)

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"discard is idempotent and removes the file", func(t *testing.T) {
			sf, err := m.Stage(ctx, strings.NewReader("abc"))
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := sf.Discard(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(sf.Path()); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("stage file still there: %v", err)
			}
			if err := m.Publish(ctx, sf, 100); err == nil {
				t.Fatal("publish after discard succeeded")
			}
		}},
		{"discard after publish keeps the blob", func(t *testing.T) {
			sf, err := m.Stage(ctx, strings.NewReader("kept"))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Publish(ctx, sf, 101); err != nil {
				t.Fatal(err)
			}
			if err := sf.Discard(); err != nil {
				t.Fatal(err)
			}
			if got, err := readRange(t, m, 101, 0, -1); err != nil || string(got) != "kept" {
				t.Fatalf("blob after discard: %q %v", got, err)
			}
			if err := m.Publish(ctx, sf, 102); err == nil {
				t.Fatal("second publish succeeded")
			}
		}},
		{"publish onto an existing id is refused", func(t *testing.T) {
			stageAndPublish(t, m, []byte("first"), 103)
			sf, err := m.Stage(ctx, strings.NewReader("second"))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Publish(ctx, sf, 103); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("publish over blob 103: %v", err)
			}
			if got, _ := readRange(t, m, 103, 0, -1); string(got) != "first" {
				t.Fatalf("blob 103 was overwritten: %q", got)
			}
			if err := sf.Discard(); err != nil {
				t.Fatal(err)
			}
		}},
		{"invalid id", func(t *testing.T) {
			sf, err := m.Stage(ctx, strings.NewReader("x"))
			if err != nil {
				t.Fatal(err)
			}
			defer sf.Discard()
			for _, id := range []int64{0, -5} {
				if err := m.Publish(ctx, sf, id); err == nil {
					t.Fatalf("publish with id %d succeeded", id)
				}
			}
		}},
		{"remove, then open and remove again", func(t *testing.T) {
			stageAndPublish(t, m, []byte("bye"), 104)
			if err := m.Remove(ctx, 104); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Open(ctx, 104, 0, -1); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("open removed blob: %v", err)
			}
			if err := m.Remove(ctx, 104); err != nil {
				t.Fatalf("second remove: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
	if sf, err := m.StageFiles(); err != nil || len(sf) != 0 {
		t.Fatalf("stage files left: %v %v", sf, err)
	}
}

// failingReader yields n bytes, then err.
func failingReader(n int, err error) io.Reader {
	return io.MultiReader(bytes.NewReader(randBytes(n, 7)), iotest.ErrReader(err))
}

// cancelAfter cancels ctx once the source has been read past n bytes.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n -= k
	if c.n <= 0 {
		c.cancel()
	}
	return k, err
}

func TestStageFailuresLeaveNothing(t *testing.T) {
	boom := errors.New("signature mismatch")
	tests := []struct {
		name string
		src  func(cancel context.CancelFunc) io.Reader
		pre  bool // cancel before Stage
		want error
	}{
		{"reader error mid-body", func(context.CancelFunc) io.Reader { return failingReader(2*writeBufSize+5, boom) }, false, boom},
		{"reader's own unexpected EOF is not an end", func(context.CancelFunc) io.Reader {
			return failingReader(100, io.ErrUnexpectedEOF)
		}, false, io.ErrUnexpectedEOF},
		{"cancelled mid-body", func(cancel context.CancelFunc) io.Reader {
			return &cancelAfter{r: bytes.NewReader(randBytes(4*writeBufSize, 8)), n: writeBufSize, cancel: cancel}
		}, false, context.Canceled},
		{"cancelled before", func(context.CancelFunc) io.Reader { return strings.NewReader("x") }, true, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := openMedia(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.pre {
				cancel()
			}
			sf, err := m.Stage(ctx, tt.src(cancel))
			if !errors.Is(err, tt.want) || sf != nil {
				t.Fatalf("Stage = %v, %v; want error %v", sf, err, tt.want)
			}
			if files, err := m.StageFiles(); err != nil || len(files) != 0 {
				t.Fatalf("stage files left: %v %v", files, err)
			}
			if ids, err := m.BlobIDs(context.Background()); err != nil || len(ids) != 0 {
				t.Fatalf("blobs appeared: %v %v", ids, err)
			}
		})
	}
}

func TestReadHonoursContextAndTruncation(t *testing.T) {
	m := openMedia(t)
	data := randBytes(3*writeBufSize, 10)
	stageAndPublish(t, m, data, 7)

	ctx, cancel := context.WithCancel(context.Background())
	rc, err := m.Open(ctx, 7, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1000)
	if _, err := io.ReadFull(rc, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := rc.Read(buf); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}

	// A file that shrinks under a reader yields an error, never a clean EOF.
	rc, err = m.Open(context.Background(), 7, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if err := os.Truncate(m.blobPath(7), writeBufSize); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read of a truncated blob: %v", err)
	}
	// And opening a range beyond the (now short) file is refused.
	if _, err := m.Open(context.Background(), 7, 0, int64(len(data))); err == nil {
		t.Fatal("opened a range beyond a truncated blob")
	}
}

func TestOpenMedia(t *testing.T) {
	dir := t.TempDir()
	m, err := Open(filepath.Join(dir, "a", "b"), true)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Shared() {
		t.Fatal("Shared() = false for shared media")
	}
	for _, sub := range []string{"stage", "blobs"} {
		if fi, err := os.Stat(filepath.Join(dir, "a", "b", sub)); err != nil || !fi.IsDir() {
			t.Fatalf("%s not created: %v", sub, err)
		}
	}
	if err := m.Writable(context.Background()); err != nil {
		t.Fatal(err)
	}
	if files, _ := m.StageFiles(); len(files) != 0 {
		t.Fatalf("the writability probe left %v", files)
	}
	// Reopening existing media works and sees the same blobs.
	stageAndPublish(t, m, []byte("x"), 5)
	m2, err := Open(filepath.Join(dir, "a", "b"), false)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Shared() {
		t.Fatal("Shared() = true for local media")
	}
	if ids, err := m2.BlobIDs(context.Background()); err != nil || !slices.Equal(ids, []int64{5}) {
		t.Fatalf("reopened media: %v %v", ids, err)
	}
	// Media whose stage directory vanished is not writable.
	if err := os.RemoveAll(filepath.Join(dir, "a", "b", "stage")); err != nil {
		t.Fatal(err)
	}
	if err := m.Writable(context.Background()); err == nil {
		t.Fatal("Writable succeeded without a stage directory")
	}
	// A data directory that is a file cannot be opened.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(file, false); err == nil {
		t.Fatal("Open on a regular file succeeded")
	}
	if _, err := Open("", false); err == nil {
		t.Fatal("Open with no directory succeeded")
	}
}

// TestCrashLeavesOnlyStageFiles kills (SIGKILL) a process in the middle of
// staging and checks what remains: a partial stage file that GC can find,
// and no blob at all.
func TestCrashLeavesOnlyStageFiles(t *testing.T) {
	if os.Getenv("LOCALFS_CRASH_DIR") != "" {
		t.Skip("running as the crash helper")
	}
	dir := t.TempDir()
	m, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	stageAndPublish(t, m, []byte("published before the crash"), 1)

	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "LOCALFS_CRASH_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The helper prints READY once several MiB are in its stage file and
	// then blocks forever inside Stage.
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if sc.Text() == "READY" {
			ready = true
			break
		}
	}
	if !ready {
		_ = cmd.Process.Kill() // it may have exited already
		_ = cmd.Wait()
		t.Fatal("crash helper never became ready")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed: the error is expected

	m2, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	files, err := m2.StageFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 {
		t.Fatalf("stage files after the crash: %v, want one", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Size() < 4*writeBufSize {
		t.Fatalf("partial stage file: %v %v", fi, err)
	}
	ids, err := m2.BlobIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []int64{1}) {
		t.Fatalf("blobs after the crash: %v, want only [1]", ids)
	}
	if got, err := readRange(t, m2, 1, 0, -1); err != nil || string(got) != "published before the crash" {
		t.Fatalf("blob 1 after the crash: %q %v", got, err)
	}
}

// blockingAfter yields n random bytes, announces READY, then blocks.
type blockingAfter struct {
	r    io.Reader
	left int
}

func (b *blockingAfter) Read(p []byte) (int, error) {
	if b.left <= 0 {
		fmt.Println("READY")
		select {} // wait for SIGKILL
	}
	k, err := b.r.Read(p[:min(len(p), b.left)])
	b.left -= k
	return k, err
}

// TestCrashHelper is the process that TestCrashLeavesOnlyStageFiles kills.
func TestCrashHelper(t *testing.T) {
	dir := os.Getenv("LOCALFS_CRASH_DIR")
	if dir == "" {
		t.Skip("only runs as the helper of TestCrashLeavesOnlyStageFiles")
	}
	m, err := Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	src := &blockingAfter{r: bytes.NewReader(randBytes(5*writeBufSize, 11)), left: 5 * writeBufSize}
	sf, err := m.Stage(context.Background(), src)
	t.Fatalf("Stage returned %v, %v; it should have blocked", sf, err)
}

const benchSize = 64 << 20

// BenchmarkStagePublish stages and publishes 64 MiB (fsyncs included).
func BenchmarkStagePublish(b *testing.B) {
	m := openMedia(b)
	data := randBytes(benchSize, 12)
	ctx := context.Background()
	b.SetBytes(benchSize)
	id := int64(0)
	for b.Loop() {
		id++
		sf, err := m.Stage(ctx, bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		if err := m.Publish(ctx, sf, id); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := m.Remove(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkRead streams a 64 MiB blob in 1 MiB reads.
func BenchmarkRead(b *testing.B) {
	m := openMedia(b)
	stageAndPublish(b, m, randBytes(benchSize, 13), 1)
	ctx := context.Background()
	buf := make([]byte, 1<<20)
	b.SetBytes(benchSize)
	for b.Loop() {
		rc, err := m.Open(ctx, 1, 0, benchSize)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{rc}, buf)
		if err != nil || n != benchSize {
			b.Fatal(n, err)
		}
		if err := rc.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
