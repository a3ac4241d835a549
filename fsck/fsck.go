// Package fsck verifies stored content: that every reference has its blob,
// that every blob has all of its bytes (inline data, large object, chunk rows
// covering its size, or a file of its size), and that those bytes still hash
// to the blob's SHA-256 address (bitrot, truncation, lost writes). It reports
// and never repairs: a repair would have to guess, and guessing with stored
// data is how it gets lost.
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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
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
}

// Check verifies every reference and every blob. Problems are in the
// report; the error is for failures of the check itself (the database went
// away, ctx ended).
func Check(ctx context.Context, db *pgxpool.Pool, opts Options) (Report, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	var r Report
	if err := checkReferences(ctx, db, &r); err != nil {
		return r, err
	}
	var total int64
	if err := db.QueryRow(ctx, `SELECT coalesce(sum(size), 0)::bigint FROM blobs`).Scan(&total); err != nil {
		return r, fmt.Errorf("fsck: total size: %w", err)
	}
	bar := gc.NewProgress(opts.Progress, "fsck", total, "B")
	defer bar.Done()
	c := &checker{db: db, media: opts.Media, bar: bar, buf: make([]byte, content.ChunkSize)}
	after := int64(0)
	for {
		rows, err := db.Query(ctx, `SELECT id, sha256, size, tier, lo_oid FROM blobs WHERE id > $1 ORDER BY id LIMIT $2`,
			after, opts.BatchSize)
		if err != nil {
			return r, fmt.Errorf("fsck: list blobs: %w", err)
		}
		blobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (blob, error) {
			var b blob
			err := row.Scan(&b.id, &b.sha, &b.size, &b.tier, &b.oid)
			return b, err
		})
		if err != nil {
			return r, fmt.Errorf("fsck: list blobs: %w", err)
		}
		if len(blobs) == 0 {
			return r, nil
		}
		for _, b := range blobs {
			p, err := c.check(ctx, b)
			if err != nil {
				return r, fmt.Errorf("fsck: blob %d: %w", b.id, err)
			}
			r.BlobsChecked++
			r.BytesHashed += c.hashed
			if p == nil {
				continue
			}
			// A blob that GC deleted while we read it is not damage.
			exists, err := c.exists(ctx, b.id)
			if err != nil {
				return r, fmt.Errorf("fsck: blob %d: %w", b.id, err)
			}
			if !exists {
				r.Vanished++
				continue
			}
			r.Problems = append(r.Problems, *p)
		}
		after = blobs[len(blobs)-1].id
	}
}

// checkReferences finds references without their blob row (the foreign keys
// forbid them; a damaged or hand-edited database may still have them) and
// objects whose size disagrees with their content.
func checkReferences(ctx context.Context, db *pgxpool.Pool, r *Report) error {
	queries := []struct{ kind, sql string }{
		{KindMissingBlob, `SELECT 'object ' || o.bucket || '/' || o.key, o.blob_id, 'no blob row' FROM objects o
			WHERE o.blob_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = o.blob_id)`},
		{KindMissingBlob, `SELECT 'object ' || p.bucket || '/' || p.key || ' part ' || p.part_number, p.blob_id, 'no blob row'
			FROM object_parts p WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = p.blob_id)`},
		{KindMissingBlob, `SELECT 'upload ' || u.upload_id || ' part ' || u.part_number, u.blob_id, 'no blob row'
			FROM upload_parts u WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = u.blob_id)`},
		{KindObjectSize, `SELECT 'object ' || o.bucket || '/' || o.key, o.blob_id,
			format('object size %s, blob size %s', o.size, b.size)
			FROM objects o JOIN blobs b ON b.id = o.blob_id WHERE o.size <> b.size`},
		{KindObjectSize, `SELECT 'object ' || p.bucket || '/' || p.key || ' part ' || p.part_number, p.blob_id,
			format('part size %s, blob size %s', p.size, b.size)
			FROM object_parts p JOIN blobs b ON b.id = p.blob_id WHERE p.size <> b.size`},
		{KindObjectSize, `SELECT 'object ' || o.bucket || '/' || o.key, 0::bigint,
			format('object size %s with %s parts, parts sum to %s in %s rows', o.size, o.part_count,
			       coalesce(sum(p.size), 0), count(p.part_number))
			FROM objects o LEFT JOIN object_parts p ON p.bucket = o.bucket AND p.key = o.key
			WHERE o.part_count > 0 GROUP BY o.bucket, o.key, o.size, o.part_count
			HAVING coalesce(sum(p.size), 0) <> o.size OR count(p.part_number) <> o.part_count`},
	}
	for _, q := range queries {
		rows, err := db.Query(ctx, q.sql)
		if err != nil {
			return fmt.Errorf("fsck: references: %w", err)
		}
		ps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Problem, error) {
			p := Problem{Kind: q.kind}
			var id *int64
			err := row.Scan(&p.Where, &id, &p.Detail)
			if id != nil && q.kind == KindMissingBlob {
				p.Detail = fmt.Sprintf("blob %d: %s", *id, p.Detail)
			}
			return p, err
		})
		if err != nil {
			return fmt.Errorf("fsck: references: %w", err)
		}
		r.Problems = append(r.Problems, ps...)
	}
	return nil
}

type blob struct {
	id   int64
	sha  []byte
	size int64
	tier string
	oid  *uint32
}

type checker struct {
	db     *pgxpool.Pool
	media  *localfs.Media
	bar    *gc.Progress
	buf    []byte
	hashed int64 // bytes hashed by the last check
}

func (c *checker) exists(ctx context.Context, id int64) (bool, error) {
	var ok bool
	if err := c.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM blobs WHERE id = $1)`, id).Scan(&ok); err != nil {
		return false, fmt.Errorf("re-check blob row: %w", err)
	}
	return ok, nil
}

// check verifies one blob. It returns a problem, or an error if the check
// itself could not run (ctx ended, connection lost).
func (c *checker) check(ctx context.Context, b blob) (*Problem, error) {
	c.hashed = 0
	prob := func(kind, format string, args ...any) *Problem {
		return &Problem{Kind: kind, BlobID: b.id, Tier: b.tier, Detail: fmt.Sprintf(format, args...)}
	}
	h := sha256.New()
	var p *Problem
	var err error
	switch b.tier {
	case store.TierInline:
		p, err = c.inline(ctx, b, h, prob)
	case store.TierPGLO:
		p, err = c.largeObject(ctx, b, h, prob)
	case store.TierPGChunks:
		p, err = c.chunks(ctx, b, h, prob)
	case store.TierLocal:
		p, err = c.file(ctx, b, h, prob)
	default:
		return prob(KindUnreadable, "unknown tier %q", b.tier), nil
	}
	if err != nil || p != nil {
		return p, err
	}
	if got := h.Sum(nil); !bytes.Equal(got, b.sha) {
		return prob(KindHashMismatch, "content hashes to %x, address is %x", got, b.sha), nil
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
	var data []byte
	err := c.db.QueryRow(ctx, `SELECT inline_data FROM blobs WHERE id = $1`, b.id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return prob(KindMissingContent, "blob row vanished"), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read inline data: %w", err)
	}
	if int64(len(data)) != b.size {
		return prob(KindSizeMismatch, "inline data is %d bytes, size is %d", len(data), b.size), nil
	}
	c.feed(h, data)
	return nil, nil
}

// largeObject reads the large object with lo_get, one short statement per
// chunk (no transaction held across the blob), and checks its exact length.
func (c *checker) largeObject(ctx context.Context, b blob, h hash.Hash, prob probFunc) (*Problem, error) {
	if b.oid == nil {
		return prob(KindMissingContent, "no large object recorded"), nil
	}
	var exists bool
	if err := c.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_largeobject_metadata WHERE oid = $1)`, *b.oid).Scan(&exists); err != nil {
		return nil, fmt.Errorf("look up large object: %w", err)
	}
	if !exists {
		return prob(KindMissingContent, "large object %d does not exist", *b.oid), nil
	}
	for off := int64(0); ; {
		// One byte more than is left tells a longer object from an exact one.
		want := min(b.size-off+1, content.ChunkSize)
		var got []byte
		if err := c.db.QueryRow(ctx, `SELECT lo_get($1, $2, $3)`, *b.oid, off, int32(want)).Scan(&got); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("lo_get: %w", err)
			}
			return prob(KindUnreadable, "lo_get %d at %d: %v", *b.oid, off, err), nil
		}
		if off+int64(len(got)) > b.size {
			return prob(KindSizeMismatch, "large object %d is longer than the size %d", *b.oid, b.size), nil
		}
		c.feed(h, got)
		off += int64(len(got))
		if int64(len(got)) < want {
			if off < b.size {
				return prob(KindSizeMismatch, "large object %d has %d bytes, size is %d", *b.oid, off, b.size), nil
			}
			return nil, nil
		}
	}
}

// chunks checks that rows 0..n-1 exist, each but the last of ChunkSize
// bytes, summing to the size, and hashes them one row per statement.
func (c *checker) chunks(ctx context.Context, b blob, h hash.Hash, prob probFunc) (*Problem, error) {
	rows, err := c.db.Query(ctx, `SELECT seq, octet_length(data) FROM blob_chunks WHERE blob_id = $1 ORDER BY seq`, b.id)
	if err != nil {
		return nil, fmt.Errorf("list chunks: %w", err)
	}
	type chunk struct {
		seq int32
		n   int64
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (chunk, error) {
		var ch chunk
		err := row.Scan(&ch.seq, &ch.n)
		return ch, err
	})
	if err != nil {
		return nil, fmt.Errorf("list chunks: %w", err)
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
	if sum != b.size {
		if sum < b.size {
			return prob(KindMissingContent, "%d chunk rows hold %d bytes, size is %d", len(list), sum, b.size), nil
		}
		return prob(KindSizeMismatch, "%d chunk rows hold %d bytes, size is %d", len(list), sum, b.size), nil
	}
	for _, ch := range list {
		var data []byte
		err := c.db.QueryRow(ctx, `SELECT data FROM blob_chunks WHERE blob_id = $1 AND seq = $2`, b.id, ch.seq).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return prob(KindMissingContent, "chunk %d vanished", ch.seq), nil
		}
		if err != nil {
			return nil, fmt.Errorf("read chunk %d: %w", ch.seq, err)
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
	rd, err := c.media.Open(ctx, b.id, 0, -1)
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
			if n > b.size {
				return prob(KindSizeMismatch, "file is longer than the size %d", b.size), nil
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
	if n != b.size {
		return prob(KindSizeMismatch, "file has %d bytes, size is %d", n, b.size), nil
	}
	return nil, nil
}
