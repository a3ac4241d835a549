package pgchunks_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/pg"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/pg/content/contenttest"
	"github.com/s3gate/s3gate/store/pgchunks"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// pool returns a pool on a fresh database with the s3gate schema (which
// creates blob_chunks).
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

// write stages data as the chunks of blob id (owned by its stage row).
func write(tb testing.TB, p *pgxpool.Pool, id int64, data []byte) {
	tb.Helper()
	_, n, err := pgchunks.New().Stage(context.Background(), p, id, bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("stage: %v", err)
	}
	if n != int64(len(data)) {
		tb.Fatalf("stage reported %d bytes, want %d", n, len(data))
	}
}

// unstage drops blob id's stage row and content.
func unstage(tb testing.TB, p *pgxpool.Pool, id int64) { contenttest.Unstage(tb, p, id) }

func TestStageOpenDrop(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	e := pgchunks.New()
	size := 2*content.ChunkSize + 333
	data := randBytes(1, size)
	for i, d := range [][]byte{{}, data[:10], data[:content.ChunkSize], data} {
		id := int64(i + 1)
		write(t, p, id, d)
		var rows int
		if err := p.QueryRow(ctx, `SELECT count(*) FROM blob_chunks WHERE blob_id = $1`, id).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if want := (len(d) + content.ChunkSize - 1) / content.ChunkSize; rows != want {
			t.Errorf("%d bytes stored in %d rows, want %d", len(d), rows, want)
		}
		spans := []struct{ off, n int64 }{{0, int64(len(d))}}
		if len(d) == size {
			spans = append(spans, struct{ off, n int64 }{content.ChunkSize - 1, 2}, struct{ off, n int64 }{5, content.ChunkSize * 2}, struct{ off, n int64 }{int64(size) - 1, 1},
				// whole rows sliced at both ends
				struct{ off, n int64 }{content.ChunkSize / 2, content.ChunkSize})
		}
		for _, s := range spans {
			rd, err := e.Open(ctx, p, id, 0, s.off, s.n)
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
		rd, _ := e.Open(ctx, p, id, 0, 0, int64(len(d))+1)
		if _, err := io.ReadAll(rd); err == nil {
			t.Errorf("read past the end of %d bytes succeeded", len(d))
		}
		tx, err := p.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Drop(ctx, tx, id, 0); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.QueryRow(ctx, `SELECT count(*) FROM blob_chunks WHERE blob_id = $1`, id).Scan(&rows); err != nil || rows != 0 {
			t.Errorf("rows left after Drop: %d (%v)", rows, err)
		}
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

// TestStageLost checks that a chunk write finds its stage row or writes
// nothing: content reaped mid-stage is not resurrected by the put.
func TestStageLost(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	body := &reapAfter{tb: t, p: p, id: 7, r: bytes.NewReader(randBytes(4, 3*content.ChunkSize))}
	_, _, err := pgchunks.New().Stage(ctx, p, 7, body)
	if !errors.Is(err, content.ErrStageLost) {
		t.Fatalf("stage after reap: %v, want ErrStageLost", err)
	}
	var rows int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM blob_chunks WHERE blob_id = 7`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("chunk rows left: %d (%v)", rows, err)
	}
}

// TestReadAhead: contenttest.ReadAhead; a deleted row is io.ErrUnexpectedEOF.
func TestReadAhead(t *testing.T) {
	contenttest.ReadAhead(t, pool(t), pgchunks.New(), io.ErrUnexpectedEOF)
}

// TestOpenGap: a row missing in the middle of what one statement reads ends
// the stream with io.ErrUnexpectedEOF after exactly the bytes before it.
func TestOpenGap(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	data := randBytes(6, 6*content.ChunkSize)
	tests := []struct {
		name   string
		gap    int64 // the deleted row
		off, n int64
	}{
		{name: "second row of a statement", gap: 1, n: int64(len(data))},
		{name: "last row of the span", gap: 5, n: int64(len(data))},
		{name: "range starting mid-row", gap: 4, off: content.ChunkSize / 2, n: 4 * content.ChunkSize},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := int64(2000 + i)
			write(t, p, id, data)
			if _, err := p.Exec(ctx, `DELETE FROM blob_chunks WHERE blob_id = $1 AND seq = $2`, id, tc.gap); err != nil {
				t.Fatal(err)
			}
			rd, err := pgchunks.New().Open(ctx, p, id, 0, tc.off, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			got, err := io.ReadAll(rd)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("read over a gap: %d bytes, err %v, want ErrUnexpectedEOF", len(got), err)
			}
			if want := tc.gap*content.ChunkSize - tc.off; int64(len(got)) != want || !bytes.Equal(got, data[tc.off:tc.off+want]) {
				t.Fatalf("read over a gap: %d bytes, want the %d before it", len(got), want)
			}
		})
	}
}

const benchSize = 64 << 20

// BenchmarkPGChunksWrite measures staging 64 MiB as 1 MiB rows, one
// autocommit statement each.
func BenchmarkPGChunksWrite(b *testing.B) {
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

// BenchmarkPGChunksRead measures reading 64 MiB, one row per statement.
func BenchmarkPGChunksRead(b *testing.B) {
	p := pool(b)
	write(b, p, 1, randBytes(3, benchSize))
	e := pgchunks.New()
	b.SetBytes(benchSize)
	for b.Loop() {
		rd, err := e.Open(context.Background(), p, 1, 0, 0, benchSize)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, rd); err != nil || n != benchSize {
			b.Fatalf("read %d: %v", n, err)
		}
	}
}

// TestStageFailures: contenttest.StageFailures.
func TestStageFailures(t *testing.T) { contenttest.StageFailures(t, pool(t), pgchunks.New()) }

// TestStageCommitLocal: contenttest.StageCommitLocal.
func TestStageCommitLocal(t *testing.T) { contenttest.StageCommitLocal(t, pool(t), pgchunks.New()) }

// TestPutFailures: contenttest.PutFailures.
func TestPutFailures(t *testing.T) { contenttest.PutFailures(t, pgtest.DSN(t), pg.LargePGChunks) }
