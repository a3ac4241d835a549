package pglo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/pg"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/pg/content/contenttest"
	"github.com/s3gate/s3gate/store/pglo"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// pool returns a pool on a fresh database with the s3gate schema (which
// creates blob_stages).
func pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	dsn := pgtest.DSN(tb)
	if err := pg.Migrate(context.Background(), dsn); err != nil {
		tb.Fatal(err)
	}
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// write stages data in a large object owned by the stage row of blob id and
// returns its OID.
func write(tb testing.TB, p *pgxpool.Pool, id int64, data []byte) int64 {
	tb.Helper()
	ref, n, err := pglo.New().Stage(context.Background(), p, id, bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("stage: %v", err)
	}
	if n != int64(len(data)) {
		tb.Fatalf("stage reported %d bytes, want %d", n, len(data))
	}
	return ref
}

// unstage drops blob id's stage row and content.
func unstage(tb testing.TB, p *pgxpool.Pool, id int64) { contenttest.Unstage(tb, p, id) }

func TestStageOpenDrop(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	e := pglo.New()
	size := 2*content.ChunkSize + 333
	data := randBytes(1, size)
	for i, d := range [][]byte{{}, data[:10], data[:content.ChunkSize], data} {
		id := int64(i + 1)
		ref := write(t, p, id, d)
		spans := []struct{ off, n int64 }{{0, int64(len(d))}}
		if len(d) == size {
			// Range edges: across a chunk boundary, starting or ending on one,
			// inside the last partial chunk, the last byte, nothing mid-blob.
			const c = content.ChunkSize
			spans = append(spans, []struct{ off, n int64 }{{c - 1, 2}, {5, c * 2}, {c, c}, {c, c + 333}, {1, c - 1},
				{2*c + 10, 323}, {int64(size) - 1, 1}, {c + 7, 0}, {3, int64(size) - 3}}...)
		}
		for _, s := range spans {
			rd, err := e.Open(ctx, p, 0, ref, s.off, s.n)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rd)
			if err != nil {
				t.Fatalf("read %d+%d: %v", s.off, s.n, err)
			}
			if err := rd.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, d[s.off:s.off+s.n]) {
				t.Errorf("span %d+%d of %d bytes: content differs", s.off, s.n, len(d))
			}
		}
		// Reading beyond the end is an error, never short data.
		rd, _ := e.Open(ctx, p, 0, ref, 0, int64(len(d))+1)
		if _, err := io.ReadAll(rd); err == nil {
			t.Errorf("read past the end of %d bytes succeeded", len(d))
		}
		if i%2 == 0 {
			unstage(t, p, id)
			continue
		}
		tx, err := p.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := content.Claim(ctx, tx, id); err != nil {
			t.Fatal(err)
		}
		if err := e.Drop(ctx, tx, 0, ref); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_largeobject_metadata`).Scan(&n); err != nil || n != 0 {
		t.Errorf("large objects left: %d (%v)", n, err)
	}
}

// reapAfter is a body that unstages blob id (as GC's stage reaper would)
// once the first chunk has been read and written.
type reapAfter struct {
	tb   testing.TB
	p    *pgxpool.Pool
	id   int64
	r    io.Reader
	read int
}

func (r *reapAfter) Read(b []byte) (int, error) {
	if r.read >= content.ChunkSize && r.id != 0 {
		unstage(r.tb, r.p, r.id)
		r.id = 0
	}
	n, err := r.r.Read(b)
	r.read += n
	return n, err
}

// TestStageLost checks that a write finds its stage row or writes nothing:
// a large object reaped mid-stage is not resurrected by the put.
func TestStageLost(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	body := &reapAfter{tb: t, p: p, id: 7, r: bytes.NewReader(randBytes(4, 3*content.ChunkSize))}
	_, _, err := pglo.New().Stage(ctx, p, 7, body)
	if !errors.Is(err, content.ErrStageLost) {
		t.Fatalf("stage after reap: %v, want ErrStageLost", err)
	}
	var n int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_largeobject_metadata`).Scan(&n); err != nil || n != 0 {
		t.Errorf("large objects left: %d (%v)", n, err)
	}
}

// TestReadAhead: contenttest.ReadAhead (a deleted large object is
// PostgreSQL's error).
func TestReadAhead(t *testing.T) { contenttest.ReadAhead(t, pool(t), pglo.New(), nil) }

const benchSize = 64 << 20

// BenchmarkPGLOWrite measures staging 64 MiB into a large object, one
// autocommit lo_put per 1 MiB.
func BenchmarkPGLOWrite(b *testing.B) {
	p := pool(b)
	data := randBytes(2, benchSize)
	b.SetBytes(benchSize)
	id := int64(1000)
	for b.Loop() {
		id++
		write(b, p, id, data)
		b.StopTimer()
		unstage(b, p, id)
		b.StartTimer()
	}
}

// BenchmarkPGLORead measures reading 64 MiB with lo_get in autocommit.
func BenchmarkPGLORead(b *testing.B) {
	p := pool(b)
	e := pglo.New()
	ref := write(b, p, 1, randBytes(3, benchSize))
	b.SetBytes(benchSize)
	for b.Loop() {
		rd, err := e.Open(context.Background(), p, 0, ref, 0, benchSize)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, rd)
		if err != nil || n != benchSize {
			b.Fatal(fmt.Errorf("read %d: %w", n, err))
		}
	}
}

// TestStageFailures: contenttest.StageFailures.
func TestStageFailures(t *testing.T) { contenttest.StageFailures(t, pool(t), pglo.New()) }

// TestPutFailures: contenttest.PutFailures.
func TestPutFailures(t *testing.T) { contenttest.PutFailures(t, pgtest.DSN(t), pg.LargePGLO) }

// TestStageCommitLocal: contenttest.StageCommitLocal.
func TestStageCommitLocal(t *testing.T) { contenttest.StageCommitLocal(t, pool(t), pglo.New()) }
