// Package contenttest holds the tests that every chunked content engine
// (pgchunks, pglo) passes the same way. It is test support: only tests
// import it.
package contenttest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store/pg/content"
)

// ReadAhead checks the read-ahead's bounds on e over p (a database with the
// s3gate schema): a reader that stalls holds no connection while it waits
// (its fetches are short statements), Close mid-stream returns every
// connection, and a blob deleted under the read-ahead ends the stream with an
// error after a prefix of its bytes, never with other bytes; the error is
// deleted where that is not nil.
func ReadAhead(t *testing.T, p *pgxpool.Pool, e content.Engine, deleted error) {
	ctx := context.Background()
	data := make([]byte, 6*content.ChunkSize+77)
	r := rand.New(rand.NewPCG(5, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	idle := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for p.Stat().AcquiredConns() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d connections still acquired", what, p.Stat().AcquiredConns())
			}
			time.Sleep(time.Millisecond) // polls the pool's state
		}
	}
	tests := []struct {
		name  string
		after func(t *testing.T, id int64, rd io.ReadCloser, first []byte)
	}{
		{name: "stalled reader holds no connection", after: func(t *testing.T, _ int64, rd io.ReadCloser, first []byte) {
			idle("stalled reader")
			rest, err := io.ReadAll(rd)
			if err != nil || !bytes.Equal(append(first, rest...), data) {
				t.Fatalf("read after stall: %d bytes, %v", len(first)+len(rest), err)
			}
		}},
		{name: "close mid-stream", after: func(t *testing.T, _ int64, rd io.ReadCloser, _ []byte) {
			if err := rd.Close(); err != nil {
				t.Fatal(err)
			}
			idle("closed reader")
			if _, err := rd.Read(make([]byte, 1)); err == nil {
				t.Error("read after close succeeded")
			}
		}},
		{name: "deleted under read-ahead", after: func(t *testing.T, id int64, rd io.ReadCloser, first []byte) {
			Unstage(t, p, id)
			rest, err := io.ReadAll(rd)
			if err == nil || deleted != nil && !errors.Is(err, deleted) {
				t.Fatalf("read of a deleted blob: %d bytes, err %v, want %v", len(rest), err, deleted)
			}
			if got := append(first, rest...); !bytes.Equal(got, data[:len(got)]) {
				t.Fatalf("read of a deleted blob returned other bytes than its content")
			}
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := int64(1000 + i)
			ref, n, err := e.Stage(ctx, p, id, bytes.NewReader(data))
			if err != nil || n != int64(len(data)) {
				t.Fatalf("stage: %d bytes, %v", n, err)
			}
			rd, err := e.Open(ctx, p, id, ref, 0, int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close() //nolint:errcheck // closed again after the case
			first := make([]byte, 1000)
			if _, err := io.ReadFull(rd, first); err != nil {
				t.Fatal(err)
			}
			tc.after(t, id, rd, first)
		})
	}
}

// Unstage drops blob id's stage row and content, as GC's stage reaper does.
func Unstage(tb testing.TB, p *pgxpool.Pool, id int64) {
	tb.Helper()
	ctx := context.Background()
	tx, err := p.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if ok, err := content.Unstage(ctx, tx, id, -1); err != nil || !ok {
		tb.Fatalf("unstage %d: %v, %v", id, ok, err)
	}
	if err := tx.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
}
