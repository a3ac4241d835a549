// Package fsck verifies stored content: that every reference has its blob,
// that every blob has all of its bytes (inline data, large object, chunk rows
// covering its size, or a file of its size), and that those bytes still hash
// to the blob's SHA-256 address (bitrot, truncation, lost writes). It reports;
// it repairs only what an operator asks for by name after a restore
// (restore.go), because a repair that guessed would lose stored data.
package fsck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"

	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
	"github.com/s3gate/s3gate/store/pg/content"
)

// Kinds of Problem.
const (
	KindMissingBlob    = "missing-blob"    // a reference names a blob row that does not exist
	KindMissingContent = "missing-content" // large object, chunk rows or file absent
	KindSizeMismatch   = "size-mismatch"   // stored bytes shorter or longer than the blob's size
	KindHashMismatch   = "hash-mismatch"   // bytes present, but not those of the address
	KindObjectSize     = "object-size"     // an object's size disagrees with its blob(s)
	KindUnreadable     = "unreadable"      // reading failed for another reason
)

// Problem is one finding.
type Problem struct {
	Kind   string
	BlobID int64  // 0 when the problem is about an object
	Tier   string // blob tier, if known
	// Where names the reference for object problems (bucket/key, upload id).
	Where  string
	Detail string
}

func (p Problem) String() string {
	s := p.Kind
	if p.BlobID != 0 {
		s += fmt.Sprintf(" blob %d (%s)", p.BlobID, p.Tier)
	}
	if p.Where != "" {
		s += " " + p.Where
	}
	return s + ": " + p.Detail
}

// Report is the outcome of Check.
type Report struct {
	BlobsChecked int64
	BytesHashed  int64
	// Vanished counts blobs deleted (by GC) while they were being checked:
	// not problems.
	Vanished int64
	Problems []Problem
	// Affected are the objects and upload parts that reference a blob with
	// missing content (KindObjectWithoutBytes): that blob's problem is in
	// Problems; these say what it costs.
	Affected []Problem
}

// OK reports whether nothing is wrong.
func (r Report) OK() bool { return len(r.Problems) == 0 }

// Options configure Check.
type Options struct {
	// Media is the filesystem media of local blobs; nil if none (a local
	// blob is then reported as unreadable).
	Media *localfs.Media
	// Progress receives the progress bar (bytes hashed); nil for none.
	Progress io.Writer
	// BatchSize is the number of blob rows read per query (default 100).
	BatchSize int
	// Orphans also reports blob files that no blob row names (restore.go).
	Orphans bool
}

// Meta is what Check reads from a metadata engine: store/pg (pg.NewGC) and
// store/embedded (Engine.GC) implement it.
type Meta interface {
	TotalBlobBytes(ctx context.Context) (int64, error)
	// Blobs lists blob rows with ids above after, at most limit.
	Blobs(ctx context.Context, after int64, limit int) ([]store.StoredBlob, error)
	BlobExists(ctx context.Context, id int64) (bool, error)
	// Inline returns the inline bytes of blob id; false if the row is gone.
	Inline(ctx context.Context, id int64) ([]byte, bool, error)
	// References finds references without their blob row, and objects whose
	// size disagrees with their content.
	References(ctx context.Context) (missing, sizes []store.Finding, err error)
}

var (
	_ Meta      = (*pg.GC)(nil)
	_ dbContent = (*pg.GC)(nil)
	_ Meta      = (*embedded.GC)(nil)
)

// dbContent reads content kept inside the database (store/pg).
type dbContent interface {
	LargeObjectExists(ctx context.Context, oid uint32) (bool, error)
	ReadLargeObject(ctx context.Context, oid uint32, off int64, n int32) ([]byte, error)
	ChunkSizes(ctx context.Context, id int64) (seqs []int32, sizes []int64, err error)
	Chunk(ctx context.Context, id int64, seq int32) ([]byte, bool, error)
}

// Check verifies every reference and every blob. Problems are in the
// report; the error is for failures of the check itself (the database went
// away, ctx ended).
func Check(ctx context.Context, db Meta, opts Options) (Report, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	var r Report
	missing, sizes, err := db.References(ctx)
	if err != nil {
		return r, fmt.Errorf("fsck: %w", err)
	}
	for _, f := range missing {
		r.Problems = append(r.Problems, Problem{Kind: KindMissingBlob, Where: f.Where, Detail: f.Detail})
	}
	for _, f := range sizes {
		r.Problems = append(r.Problems, Problem{Kind: KindObjectSize, Where: f.Where, Detail: f.Detail})
	}
	total, err := db.TotalBlobBytes(ctx)
	if err != nil {
		return r, fmt.Errorf("fsck: %w", err)
	}
	bar := gc.NewProgress(opts.Progress, "fsck", total, "B")
	defer bar.Done()
	c := &checker{db: db, media: opts.Media, bar: bar, buf: make([]byte, content.ChunkSize)}
	c.content, _ = db.(dbContent)
	after := int64(0)
	for {
		blobs, err := db.Blobs(ctx, after, opts.BatchSize)
		if err != nil {
			return r, fmt.Errorf("fsck: %w", err)
		}
		if len(blobs) == 0 {
			if err := restoreFindings(ctx, db, opts, &r); err != nil {
				return r, fmt.Errorf("fsck: %w", err)
			}
			return r, nil
		}
		for _, b := range blobs {
			p, err := c.check(ctx, b)
			if err != nil {
				return r, fmt.Errorf("fsck: blob %d: %w", b.ID, err)
			}
			r.BlobsChecked++
			r.BytesHashed += c.hashed
			if p == nil {
				continue
			}
			// A blob that GC deleted while we read it is not damage.
			exists, err := db.BlobExists(ctx, b.ID)
			if err != nil {
				return r, fmt.Errorf("fsck: blob %d: %w", b.ID, err)
			}
			if !exists {
				r.Vanished++
				continue
			}
			r.Problems = append(r.Problems, *p)
		}
		after = blobs[len(blobs)-1].ID
	}
}

type blob = store.StoredBlob

type checker struct {
	db      Meta
	content dbContent // nil: the engine keeps no content in the database
	media   *localfs.Media
	bar     *gc.Progress
	buf     []byte
	hashed  int64 // bytes hashed by the last check
}

// check verifies one blob. It returns a problem, or an error if the check
// itself could not run (ctx ended, connection lost).
func (c *checker) check(ctx context.Context, b blob) (*Problem, error) {
	c.hashed = 0
	prob := func(kind, format string, args ...any) *Problem {
		return &Problem{Kind: kind, BlobID: b.ID, Tier: b.Tier, Detail: fmt.Sprintf(format, args...)}
	}
	h := sha256.New()
	var p *Problem
	var err error
	switch {
	case b.Tier == store.TierInline:
		p, err = c.inline(ctx, b, h, prob)
	case b.Tier == store.TierPGLO && c.content != nil:
		p, err = c.largeObject(ctx, b, h, prob)
	case b.Tier == store.TierPGChunks && c.content != nil:
		p, err = c.chunks(ctx, b, h, prob)
	case b.Tier == store.TierLocal:
		p, err = c.file(ctx, b, h, prob)
	default:
		return prob(KindUnreadable, "unknown tier %q", b.Tier), nil
	}
	if err != nil || p != nil {
		return p, err
	}
	if got := h.Sum(nil); !bytes.Equal(got, b.SHA256) {
		return prob(KindHashMismatch, "content hashes to %x, address is %x", got, b.SHA256), nil
	}
	return nil, nil
}

type probFunc func(kind, format string, args ...any) *Problem

// feed hashes p and advances the progress.
func (c *checker) feed(h hash.Hash, p []byte) {
	h.Write(p)
	c.hashed += int64(len(p))
	c.bar.Add(int64(len(p)))
}

func (c *checker) inline(ctx context.Context, b blob, h hash.Hash, prob probFunc) (*Problem, error) {
	data, ok, err := c.db.Inline(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return prob(KindMissingContent, "blob row vanished"), nil
	}
	if int64(len(data)) != b.Size {
		return prob(KindSizeMismatch, "inline data is %d bytes, size is %d", len(data), b.Size), nil
	}
	c.feed(h, data)
	return nil, nil
}

// largeObject reads the large object with lo_get, one short statement per
// chunk (no transaction held across the blob), and checks its exact length.
func (c *checker) largeObject(ctx context.Context, b blob, h hash.Hash, prob probFunc) (*Problem, error) {
	if b.LargeObject == nil {
		return prob(KindMissingContent, "no large object recorded"), nil
	}
	oid := *b.LargeObject
	exists, err := c.content.LargeObjectExists(ctx, oid)
	if err != nil {
		return nil, err
	}
	if !exists {
		return prob(KindMissingContent, "large object %d does not exist", oid), nil
	}
	for off := int64(0); ; {
		// One byte more than is left tells a longer object from an exact one.
		want := min(b.Size-off+1, content.ChunkSize)
		got, err := c.content.ReadLargeObject(ctx, oid, off, int32(want))
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return prob(KindUnreadable, "%v", err), nil
		}
		if off+int64(len(got)) > b.Size {
			return prob(KindSizeMismatch, "large object %d is longer than the size %d", oid, b.Size), nil
		}
		c.feed(h, got)
		off += int64(len(got))
		if int64(len(got)) < want {
			if off < b.Size {
				return prob(KindSizeMismatch, "large object %d has %d bytes, size is %d", oid, off, b.Size), nil
			}
			return nil, nil
		}
	}
}

// chunks checks that rows 0..n-1 exist, each but the last of ChunkSize
// bytes, summing to the size, and hashes them one row per statement.
func (c *checker) chunks(ctx context.Context, b blob, h hash.Hash, prob probFunc) (*Problem, error) {
	seqs, sizes, err := c.content.ChunkSizes(ctx, b.ID)
	if err != nil {
		return nil, err
	}
	type chunk struct {
		seq int32
		n   int64
	}
	list := make([]chunk, len(seqs))
	for i := range seqs {
		list[i] = chunk{seqs[i], sizes[i]}
	}
	var sum int64
	for i, ch := range list {
		if ch.seq != int32(i) {
			return prob(KindMissingContent, "chunk %d missing (next row is %d)", i, ch.seq), nil
		}
		if i < len(list)-1 && ch.n != content.ChunkSize {
			return prob(KindSizeMismatch, "chunk %d is %d bytes, want %d", i, ch.n, content.ChunkSize), nil
		}
		sum += ch.n
	}
	if sum != b.Size {
		if sum < b.Size {
			return prob(KindMissingContent, "%d chunk rows hold %d bytes, size is %d", len(list), sum, b.Size), nil
		}
		return prob(KindSizeMismatch, "%d chunk rows hold %d bytes, size is %d", len(list), sum, b.Size), nil
	}
	for _, ch := range list {
		data, ok, err := c.content.Chunk(ctx, b.ID, ch.seq)
		if err != nil {
			return nil, err
		}
		if !ok {
			return prob(KindMissingContent, "chunk %d vanished", ch.seq), nil
		}
		if int64(len(data)) != ch.n {
			return prob(KindSizeMismatch, "chunk %d changed length while read", ch.seq), nil
		}
		c.feed(h, data)
	}
	return nil, nil
}

// file checks that the blob's file exists with exactly the blob's size and
// hashes it.
func (c *checker) file(ctx context.Context, b blob, h hash.Hash, prob probFunc) (*Problem, error) {
	if c.media == nil {
		return prob(KindUnreadable, "local blob, but no media (set S3GATE_DATA_DIR)"), nil
	}
	rd, err := c.media.Open(ctx, b.ID, 0, -1)
	if errors.Is(err, fs.ErrNotExist) {
		return prob(KindMissingContent, "file missing"), nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return prob(KindUnreadable, "%v", err), nil
	}
	defer rd.Close()
	var n int64
	for {
		k, err := rd.Read(c.buf)
		if k > 0 {
			n += int64(k)
			if n > b.Size {
				return prob(KindSizeMismatch, "file is longer than the size %d", b.Size), nil
			}
			c.feed(h, c.buf[:k])
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return prob(KindUnreadable, "read file: %v", err), nil
		}
	}
	if n != b.Size {
		return prob(KindSizeMismatch, "file has %d bytes, size is %d", n, b.Size), nil
	}
	return nil, nil
}
