package pglo_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/pglo"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	p, err := pgxpool.New(context.Background(), pgtest.DSN(tb))
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

// write stores data in a committed large object and returns its OID.
func write(tb testing.TB, p *pgxpool.Pool, e *pglo.Engine, data []byte) int64 {
	tb.Helper()
	ctx := context.Background()
	tx, err := p.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	ref, n, err := e.Write(ctx, tx, 1, bytes.NewReader(data))
	if err != nil {
		tb.Fatalf("write: %v", err)
	}
	if n != int64(len(data)) {
		tb.Fatalf("write reported %d bytes, want %d", n, len(data))
	}
	if err := tx.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
	return ref
}

func TestWriteOpenDrop(t *testing.T) {
	p := pool(t)
	ctx := context.Background()
	size := 2*content.ChunkSize + 333
	data := randBytes(1, size)
	for _, mode := range []pglo.WriteMode{pglo.WriteLOPut, pglo.WriteLOAPI} {
		t.Run(mode.String(), func(t *testing.T) {
			e := &pglo.Engine{Mode: mode}
			for _, d := range [][]byte{{}, data[:10], data} {
				ref := write(t, p, e, d)
				spans := []struct{ off, n int64 }{{0, int64(len(d))}}
				if len(d) == size {
					spans = append(spans, struct{ off, n int64 }{content.ChunkSize - 1, 2}, struct{ off, n int64 }{5, content.ChunkSize * 2})
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
				tx, err := p.Begin(ctx)
				if err != nil {
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
		})
	}
}

const benchSize = 64 << 20

// BenchmarkPGLOWrite measures writing 64 MiB into a large object inside a
// transaction, for each write path.
func BenchmarkPGLOWrite(b *testing.B) {
	p := pool(b)
	data := randBytes(2, benchSize)
	for _, mode := range []pglo.WriteMode{pglo.WriteLOPut, pglo.WriteLOAPI} {
		b.Run(mode.String(), func(b *testing.B) {
			e := &pglo.Engine{Mode: mode}
			b.SetBytes(benchSize)
			for b.Loop() {
				ref := write(b, p, e, data)
				b.StopTimer()
				if _, err := p.Exec(context.Background(), `SELECT lo_unlink($1)`, uint32(ref)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkPGLORead measures reading 64 MiB with lo_get in autocommit.
func BenchmarkPGLORead(b *testing.B) {
	p := pool(b)
	e := pglo.New()
	ref := write(b, p, e, randBytes(3, benchSize))
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
