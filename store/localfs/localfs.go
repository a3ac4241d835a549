// Package localfs keeps large content on filesystem media: a local disk, or
// shared media (NFS, CephFS) mounted by every instance of a fleet. Content is
// staged into a unique file, fsynced, and published by renaming it to a path
// derived only from its blob id (never from an object key), followed by an
// fsync of the directory. A crash therefore leaves at worst a stage file (GC
// reaps it), never a partially written blob.
package localfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/protocol"
)

// writeBufSize is the size of each write into a stage file: large writes keep
// the syscall count low and suit network filesystems.
const writeBufSize = 1 << 20

var bufPool = sync.Pool{New: func() any { b := make([]byte, writeBufSize); return &b }}

// Media is one content directory with two subdirectories: stage/ for files
// being written and blobs/ for published blobs, fanned out as
// blobs/<id&0xff>/<id>>8&0xff>/<id> (hex directory names, decimal file name).
type Media struct {
	dir      string
	stageDir string
	blobDir  string
	shared   bool
}

// Open prepares dir (creating dir/stage and dir/blobs) and returns its Media.
// shared declares that every instance of a fleet mounts the same directory.
func Open(dir string, shared bool) (*Media, error) {
	if dir == "" {
		return nil, errors.New("localfs: no data directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("localfs: data directory %q: %w", dir, err)
	}
	m := &Media{
		dir:      abs,
		stageDir: filepath.Join(abs, "stage"),
		blobDir:  filepath.Join(abs, "blobs"),
		shared:   shared,
	}
	for _, d := range []string{m.dir, m.stageDir, m.blobDir} {
		if err := PrivateDir(d); err != nil {
			return nil, fmt.Errorf("localfs: %w", err)
		}
	}
	return m, nil
}

// Modes of everything under a data directory: content, metadata and secrets
// are the gateway's alone, whatever the umask.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// PrivateDir creates dir (and its parents) if needed and sets it to DirMode,
// also when it existed with a wider mode. Set explicitly: the umask only ever
// narrows a mode, and an existing directory keeps whatever it had.
func PrivateDir(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, DirMode); err != nil {
		return fmt.Errorf("set mode of %s: %w", dir, err)
	}
	return nil
}

// Dir returns the absolute data directory.
func (m *Media) Dir() string { return m.dir }

// Shared reports whether the media was declared shared between instances.
func (m *Media) Shared() bool { return m.shared }

// StageFile is content written and fsynced under stage/, not yet published.
// Exactly one of Publish or Discard takes effect; Discard after Publish is a
// no-op, so `defer s.Discard()` is the usual cleanup.
type StageFile struct {
	path string
	size int64

	mu   sync.Mutex
	done bool // published or discarded
}

// Size returns the number of bytes staged.
func (s *StageFile) Size() int64 { return s.size }

// Path returns the stage file's path (for logs and tests).
func (s *StageFile) Path() string { return s.path }

// Discard removes the stage file unless it was published. It is idempotent.
func (s *StageFile) Discard() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("localfs: discard %s: %w", s.path, err)
	}
	s.done = true
	return nil
}

// Stage writes r to a new unique file under stage/ in writeBufSize writes and
// fsyncs it. ctx is checked between writes. On any error the partial file is
// removed; read errors are wrapped (errors.Is/As still see them).
func (m *Media) Stage(ctx context.Context, r io.Reader) (sf *StageFile, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localfs: stage: %w", err)
	}
	f, err := os.CreateTemp(m.stageDir, "stage-*")
	if err != nil {
		return nil, fmt.Errorf("localfs: create stage file: %w", err)
	}
	defer func() {
		if err != nil {
			// The stage error is what matters; the cleanup is best effort and
			// a leftover file would be reaped by GC.
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	// CreateTemp asks for 0600; set it so, whatever the umask. The blob file
	// is this file renamed, so it keeps the mode.
	if err := f.Chmod(FileMode); err != nil {
		return nil, fmt.Errorf("localfs: stage file mode: %w", err)
	}

	bufp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bufp)
	buf := *bufp
	var size int64
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("localfs: stage: %w", err)
		}
		n, rerr := fill(r, buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				return nil, fmt.Errorf("localfs: write stage file: %w", err)
			}
			size += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, fmt.Errorf("localfs: stage: read body: %w", rerr)
		}
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("localfs: fsync stage file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("localfs: close stage file: %w", err)
	}
	return &StageFile{path: f.Name(), size: size}, nil
}

// fill reads into buf until it is full or r fails. Unlike io.ReadFull it keeps
// io.EOF apart from a reader's own io.ErrUnexpectedEOF (a truncated body must
// not look like a complete one).
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := r.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// blobPath is where blob id lives. Sequential ids spread over 65,536
// directories through their low 16 bits.
func (m *Media) blobPath(id int64) string {
	u := uint64(id)
	return filepath.Join(m.blobDir,
		fmt.Sprintf("%02x", u&0xff), fmt.Sprintf("%02x", u>>8&0xff),
		strconv.FormatInt(id, 10))
}

// Publish moves a stage file to its place for blob id: the file is fsynced,
// renamed, and its directory fsynced, so the blob is durable when Publish
// returns. An id that is already published is refused (ids are never
// reused) and the stage file stays for the caller to discard.
func (m *Media) Publish(ctx context.Context, s *StageFile, id int64) error {
	if id <= 0 {
		return fmt.Errorf("localfs: publish: invalid blob id %d", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return fmt.Errorf("localfs: publish blob %d: stage file %s already published or discarded", id, s.path)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localfs: publish blob %d: %w", id, err)
	}
	target := m.blobPath(id)
	dir := filepath.Dir(target)
	if err := m.makeBlobDir(dir); err != nil {
		return fmt.Errorf("localfs: publish blob %d: %w", id, err)
	}
	if _, err := os.Lstat(target); err == nil {
		return fmt.Errorf("localfs: publish blob %d: %w", id, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("localfs: publish blob %d: %w", id, err)
	}
	// Stage already fsynced the content; this guards a stage file that
	// reached us another way and costs nothing on clean pages.
	if err := syncPath(s.path); err != nil {
		return fmt.Errorf("localfs: publish blob %d: %w", id, err)
	}
	if err := os.Rename(s.path, target); err != nil {
		return fmt.Errorf("localfs: publish blob %d: %w", id, err)
	}
	s.done = true
	if err := syncPath(dir); err != nil {
		return fmt.Errorf("localfs: publish blob %d: fsync directory: %w", id, err)
	}
	return nil
}

// makeBlobDir creates the two fan-out levels of dir as needed and fsyncs the
// parent of every directory it created, so the path survives a crash.
func (m *Media) makeBlobDir(dir string) error {
	parent := filepath.Dir(dir)
	for _, d := range []string{parent, dir} {
		err := os.Mkdir(d, DirMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
		if err := os.Chmod(d, DirMode); err != nil {
			return fmt.Errorf("set mode of %s: %w", d, err)
		}
		if err := syncPath(filepath.Dir(d)); err != nil {
			return fmt.Errorf("fsync %s: %w", filepath.Dir(d), err)
		}
	}
	return nil
}

// syncPath fsyncs a file or directory by path.
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the Sync error is the one to report
		return err
	}
	return f.Close()
}

// Open streams length bytes of blob id from offset (length < 0: to the end).
// The range must lie within the file: a shorter file is corruption, reported
// rather than served. A missing blob wraps fs.ErrNotExist. Reads check ctx.
func (m *Media) Open(ctx context.Context, id int64, offset, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("localfs: open blob %d: %w", id, err)
	}
	f, err := os.Open(m.blobPath(id))
	if err != nil {
		return nil, fmt.Errorf("localfs: open blob %d: %w", id, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close() // the Stat error is the one to report
		return nil, fmt.Errorf("localfs: stat blob %d: %w", id, err)
	}
	size := fi.Size()
	if length < 0 && offset >= 0 {
		length = size - offset
	}
	if offset < 0 || length < 0 || offset > size || length > size-offset {
		_ = f.Close()
		return nil, fmt.Errorf("localfs: blob %d is %d bytes, cannot read %d bytes at %d", id, size, length, offset)
	}
	return &rangeReader{ctx: ctx, f: f, sr: io.NewSectionReader(f, offset, length), off: offset, left: length, id: id}, nil
}

// rangeReader streams a section of a blob file: by Read, or handed to a
// network writer by SendTo (sendfile).
type rangeReader struct {
	ctx  context.Context
	f    *os.File
	sr   *io.SectionReader
	off  int64 // the section's start in the file
	left int64
	id   int64
}

// observe, if set (tests), sees the bytes of every Read ("read"), of every
// SendTo ("sent": handed to the writer as the file) and, of those, the ones
// the writer read from the file instead of sending it by sendfile ("copied").
var observe atomic.Pointer[func(id int64, ev string, n int64)]

func observed(id int64, ev string, n int64) {
	if h := observe.Load(); h != nil {
		(*h)(id, ev, n)
	}
}

// sendFile is the file as SendTo hands it over: net's sendfile reaches its
// descriptor (syscall.Conn), and what a writer reads from it instead
// (net/http's first 512 bytes, or everything without sendfile) is observed.
type sendFile struct {
	f  *os.File
	id int64
}

func (s sendFile) Read(p []byte) (int, error) {
	n, err := s.f.Read(p)
	observed(s.id, "copied", int64(n))
	return n, err
}

func (s sendFile) SyscallConn() (syscall.RawConn, error) { return s.f.SyscallConn() }

func (r *rangeReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, fmt.Errorf("localfs: read blob %d: %w", r.id, err)
	}
	n, err := r.sr.Read(p)
	r.left -= int64(n)
	observed(r.id, "read", int64(n))
	if err == io.EOF && r.left > 0 {
		// The file shrank under us: never let a short body look complete.
		return n, fmt.Errorf("localfs: read blob %d: %w", r.id, io.ErrUnexpectedEOF)
	}
	if err != nil && err != io.EOF {
		return n, fmt.Errorf("localfs: read blob %d: %w", r.id, err)
	}
	return n, err
}

// SendTo implements protocol.FileSender: it hands dst at most max bytes of
// the section as the file itself (an io.LimitedReader of the file at the
// right offset), which net/http's connection sends with sendfile. The file's
// own offset is set for each call (Read uses pread and never moves it). A
// file that ends before the section does is an error, as for Read.
func (r *rangeReader) SendTo(dst io.ReaderFrom, max int64) (int64, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, fmt.Errorf("localfs: send blob %d: %w", r.id, err)
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	pos := r.off + r.sr.Size() - r.left
	if _, err := r.f.Seek(pos, io.SeekStart); err != nil {
		return 0, fmt.Errorf("localfs: send blob %d: %w", r.id, err)
	}
	want := min(max, r.left)
	n, err := dst.ReadFrom(&io.LimitedReader{R: sendFile{f: r.f, id: r.id}, N: want})
	r.left -= n
	// Keep Read's view in step, should the caller mix both.
	if _, serr := r.sr.Seek(r.sr.Size()-r.left, io.SeekStart); serr != nil && err == nil {
		err = serr
	}
	observed(r.id, "sent", n)
	switch {
	case err != nil:
		return n, fmt.Errorf("localfs: send blob %d: %w", r.id, err)
	case n < want:
		// The file shrank under us: never let a short body look complete.
		return n, fmt.Errorf("localfs: send blob %d: %w", r.id, io.ErrUnexpectedEOF)
	case r.left == 0:
		return n, io.EOF
	}
	return n, nil
}

func (r *rangeReader) Close() error {
	if err := r.f.Close(); err != nil {
		return fmt.Errorf("localfs: close blob %d: %w", r.id, err)
	}
	return nil
}

// Remove deletes blob id. A blob that is already gone is not an error (GC
// may repeat work after a crash). The directory is not fsynced: a removal
// lost in a crash leaves an orphan that GC reaps again.
func (m *Media) Remove(ctx context.Context, id int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localfs: remove blob %d: %w", id, err)
	}
	if err := os.Remove(m.blobPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("localfs: remove blob %d: %w", id, err)
	}
	return nil
}

// Writable checks that the media accepts durable writes: it creates, writes,
// fsyncs and removes a probe file in stage/ and checks that blobs/ exists.
func (m *Media) Writable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("localfs: writable: %w", err)
	}
	fi, err := os.Stat(m.blobDir)
	if err != nil {
		return fmt.Errorf("localfs: writable: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("localfs: writable: %s is not a directory", m.blobDir)
	}
	f, err := os.CreateTemp(m.stageDir, "probe-*")
	if err != nil {
		return fmt.Errorf("localfs: writable: %w", err)
	}
	_, werr := f.Write([]byte{0})
	if werr == nil {
		werr = f.Sync()
	}
	cerr := f.Close()
	rerr := os.Remove(f.Name())
	if err := errors.Join(werr, cerr, rerr); err != nil {
		return fmt.Errorf("localfs: writable: probe %s: %w", f.Name(), err)
	}
	return nil
}

// StageFiles lists the paths of every file under stage/: in-flight stages
// and leftovers of crashes. GC decides by age which ones to reap.
func (m *Media) StageFiles() ([]string, error) {
	entries, err := os.ReadDir(m.stageDir)
	if err != nil {
		return nil, fmt.Errorf("localfs: list stage files: %w", err)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			out = append(out, filepath.Join(m.stageDir, e.Name()))
		}
	}
	return out, nil
}

// BlobIDs lists the ids of every published blob, ascending. Names that are
// not blob ids are skipped; ctx is checked between directories.
func (m *Media) BlobIDs(ctx context.Context) ([]int64, error) {
	var ids []int64
	top, err := os.ReadDir(m.blobDir)
	if err != nil {
		return nil, fmt.Errorf("localfs: list blobs: %w", err)
	}
	for _, d1 := range top {
		if !d1.IsDir() {
			continue
		}
		p1 := filepath.Join(m.blobDir, d1.Name())
		mid, err := os.ReadDir(p1)
		if err != nil {
			return nil, fmt.Errorf("localfs: list blobs: %w", err)
		}
		for _, d2 := range mid {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("localfs: list blobs: %w", err)
			}
			if !d2.IsDir() {
				continue
			}
			files, err := os.ReadDir(filepath.Join(p1, d2.Name()))
			if err != nil {
				return nil, fmt.Errorf("localfs: list blobs: %w", err)
			}
			for _, f := range files {
				id, err := strconv.ParseInt(f.Name(), 10, 64)
				if err != nil || id <= 0 || !f.Type().IsRegular() {
					continue
				}
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// Content returns the media as the large-content engine of the staged put
// (protocol.Content): content that cannot take part in the metadata
// transaction. A stage file is written and fsynced before BEGIN and renamed
// into place under the new blob row's id inside the transaction, before
// COMMIT, so no committed row lacks its file (design §2). replaceOrphans says
// that a file already at a new row's id is an orphan to replace: so it is
// where the metadata engine hands out the id of a rolled-back row again
// (SQLite). Where ids never come back, such a file is not this put's to
// replace, and the put fails.
func (m *Media) Content(replaceOrphans bool) protocol.Content {
	return files{m: m, replace: replaceOrphans}
}

type files struct {
	m       *Media
	replace bool
}

func (files) Tier() string { return store.TierLocal }

// FreshID implements protocol.Content: files are placed under the id of
// their new blob row.
func (files) FreshID(context.Context) (int64, bool, error) { return 0, false, nil }

// Stage implements protocol.Content. On error Stage has removed its partial
// file already.
func (f files) Stage(ctx context.Context, _ int64, r io.Reader) (protocol.Staged, error) {
	sf, err := f.m.Stage(ctx, r)
	return &stagedFile{files: f, sf: sf}, err
}

// Slot implements protocol.Content: files hold no database resource.
func (files) Slot(context.Context) (func(), error) { return func() {}, nil }

// stagedFile is a put's stage file (protocol.Staged).
type stagedFile struct {
	files
	sf     *StageFile // nil if staging failed
	placed int64
}

func (s *stagedFile) Claim(context.Context, protocol.Tx) (*uint32, error) { return nil, nil }

// Place renames the stage file into place for a new blob row id; on dedup
// the existing blob serves and the stage file is discarded.
func (s *stagedFile) Place(ctx context.Context, _ protocol.Tx, id int64, inserted bool) error {
	if !inserted {
		return s.discard()
	}
	err := s.m.Publish(ctx, s.sf, id)
	if errors.Is(err, fs.ErrExist) && s.replace {
		// The row this transaction inserted holds id alone: the file is left
		// by a transaction that published and then rolled back or crashed.
		if rmErr := s.m.Remove(ctx, id); rmErr != nil {
			return fmt.Errorf("publish content: replace orphan file of blob %d: %w", id, rmErr)
		}
		err = s.m.Publish(ctx, s.sf, id)
	}
	if !errors.Is(err, fs.ErrExist) {
		s.placed = id // the rename may have happened before a later step failed
	}
	if err != nil {
		return fmt.Errorf("publish content: %w", err)
	}
	return nil
}

func (s *stagedFile) Placed() int64 { return s.placed }

// Unstage discards the stage file; it is a no-op once the file is placed.
func (s *stagedFile) Unstage(context.Context) error {
	if s.sf == nil {
		return nil
	}
	return s.discard()
}

func (s *stagedFile) Unplace(ctx context.Context, id int64) error { return s.m.Remove(ctx, id) }

func (s *stagedFile) discard() error {
	if err := s.sf.Discard(); err != nil {
		return fmt.Errorf("discard staged content: %w", err)
	}
	return nil
}
