// Package contenttest holds the tests that every chunked content engine
// (pgchunks, pglo) passes the same way. It is test support: only tests
// import it.
package contenttest

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // the S3 ETag, as the store computes it
	"errors"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
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
	data := Bytes(5, 6*content.ChunkSize+77)
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

// failingStager is a pool whose failAt-th batch (from 1) ends with a
// statement that fails in PostgreSQL (division by zero), after the chunk
// writes queued before it.
type failingStager struct {
	*pgxpool.Pool
	batches, failAt int
}

func (s *failingStager) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if s.batches++; s.batches == s.failAt {
		b.Queue(`SELECT 1/0`)
	}
	return s.Pool.SendBatch(ctx, b)
}

// cancelAfter is a body that cancels its put's context once n bytes were
// read, and goes on supplying bytes.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (r *cancelAfter) Read(b []byte) (int, error) {
	if r.n <= 0 {
		r.cancel()
	}
	k, err := r.r.Read(b)
	r.n -= k
	return k, err
}

// StageFailures checks how e's staging pipeline ends when it fails with
// chunks in flight: a statement failing in PostgreSQL mid-pipeline, and a
// context canceled mid-pipeline, each return their error once no write is
// in flight, leave no connection acquired or in a transaction and no
// goroutine behind, and what was written stays with the stage row (Unstage
// then leaves no chunk row and no large object).
func StageFailures(t *testing.T, p *pgxpool.Pool, e content.Engine) {
	data := Bytes(6, 8*content.ChunkSize+5)
	tests := []struct {
		name  string
		stage func(ctx context.Context, id int64) error
		want  func(error) bool
	}{
		{name: "statement fails mid-pipeline", stage: func(ctx context.Context, id int64) error {
			_, _, err := e.Stage(ctx, &failingStager{Pool: p, failAt: 2}, id, bytes.NewReader(data))
			return err
		}, want: func(err error) bool {
			var pe *pgconn.PgError
			return errors.As(err, &pe) && pe.Code == "22012"
		}},
		{name: "context canceled mid-pipeline", stage: func(ctx context.Context, id int64) error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			body := &cancelAfter{r: bytes.NewReader(data), n: 5 * content.ChunkSize, cancel: cancel}
			_, _, err := e.Stage(ctx, p, id, body)
			return err
		}, want: func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			id := int64(2000 + i)
			leaks := goleak.IgnoreCurrent()
			err := tc.stage(ctx, id)
			if err == nil || !tc.want(err) {
				t.Fatalf("stage: %v", err)
			}
			// A connection broken by the cancel is destroyed by the pool
			// in the background: poll for it.
			for deadline := time.Now().Add(10 * time.Second); p.Stat().AcquiredConns() != 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d connections still acquired after Stage returned", p.Stat().AcquiredConns())
				}
			}
			var busy int
			if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
				AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')`).Scan(&busy); err != nil {
				t.Fatal(err)
			}
			if busy != 0 {
				t.Errorf("%d sessions active or in a transaction after Stage returned", busy)
			}
			goleak.VerifyNone(t, leaks)
			Unstage(t, p, id)
			var chunks, los int
			if err := p.QueryRow(ctx, `SELECT (SELECT count(*) FROM blob_chunks WHERE blob_id = $1),
				(SELECT count(*) FROM pg_largeobject_metadata)`, id).Scan(&chunks, &los); err != nil {
				t.Fatal(err)
			}
			if chunks != 0 || los != 0 {
				t.Errorf("after unstage: %d chunk rows, %d large objects", chunks, los)
			}
		})
	}
}

// errBody is the error of a body that fails mid-stream (as a verifying
// reader does on a bad chunk signature).
var errBody = errors.New("body failed mid-stream")

// failAfter is a body that fails once n bytes were read.
type failAfter struct {
	r io.Reader
	n int
}

func (r *failAfter) Read(b []byte) (int, error) {
	if r.n <= 0 {
		return 0, errBody
	}
	k, err := r.r.Read(b[:min(len(b), r.n)])
	r.n -= k
	return k, err
}

// PutFailures checks, through the store on the large engine large
// (pg.LargePGChunks, pg.LargePGLO) over database dsn, that a put whose body
// fails or whose digests do not match, with chunks written or in flight,
// fails with its error and leaves nothing behind: no object, no blob row,
// no stage row, no chunk row, no large object.
func PutFailures(t *testing.T, dsn, large string) {
	ctx := context.Background()
	e, err := pg.Open(ctx, pg.Config{DatabaseURL: dsn, Large: large, InlineMax: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	if err := e.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	data := Bytes(7, 6*content.ChunkSize+11)
	// One good object, so that what must stay is not nothing.
	if _, err := e.PutObject(ctx, "b", "kept", bytes.NewReader(data[1:]), store.PutOptions{Size: int64(len(data) - 1)}); err != nil {
		t.Fatal(err)
	}
	p, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	counts := func() (c [5]int) {
		t.Helper()
		if err := p.QueryRow(ctx, `SELECT (SELECT count(*) FROM objects), (SELECT count(*) FROM blobs),
			(SELECT count(*) FROM blob_stages), (SELECT count(*) FROM blob_chunks),
			(SELECT count(*) FROM pg_largeobject_metadata)`).Scan(&c[0], &c[1], &c[2], &c[3], &c[4]); err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := counts()
	other := md5.Sum(data[1:])
	size := int64(len(data))
	tests := []struct {
		name string
		body io.Reader
		opts store.PutOptions
		want error
	}{
		{name: "bad Content-MD5", body: bytes.NewReader(data), opts: store.PutOptions{Size: size, ContentMD5: other[:]}, want: store.ErrBadDigest},
		{name: "bad x-amz-checksum", body: bytes.NewReader(data),
			opts: store.PutOptions{Size: size, Checksums: map[string]string{"SHA256": store.ChecksumOf("SHA256", data[1:])}}, want: store.ErrBadDigest},
		{name: "body fails mid-stream", body: &failAfter{r: bytes.NewReader(data), n: 5*content.ChunkSize + 3}, opts: store.PutOptions{Size: size}, want: errBody},
		{name: "body ends early", body: bytes.NewReader(data[:size-1]), opts: store.PutOptions{Size: size}, want: store.ErrIncompleteBody},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.PutObject(ctx, "b", "failed", tc.body, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("put: %v, want %v", err, tc.want)
			}
			if after := counts(); after != before {
				t.Errorf("objects, blobs, stages, chunk rows, large objects: %v after the failed put, %v before", after, before)
			}
			if _, _, _, err := e.GetObject(ctx, "b", "failed", store.GetOptions{}, true); !errors.Is(err, store.ErrNoSuchKey) {
				t.Errorf("head of the failed put: %v, want ErrNoSuchKey", err)
			}
		})
	}
}

// StageCommitLocal checks that e's stage statements turn synchronous_commit
// off for their own transaction only (content.AsyncCommit): the pooled
// connection they ran on, which the next borrower may use for a joint
// transaction whose commit must wait for its flush, keeps its setting (on
// here, whatever the test server's default).
func StageCommitLocal(t *testing.T, p *pgxpool.Pool, e content.Engine) {
	ctx := context.Background()
	cfg := p.Config()
	cfg.MaxConns = 1 // the stage and the check share one connection
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	for i, size := range []int{100, content.ChunkSize, 3*content.ChunkSize + 17} {
		id := int64(900 + i)
		data := bytes.Repeat([]byte{byte(i + 1)}, size)
		if _, n, err := e.Stage(ctx, one, id, bytes.NewReader(data)); err != nil || n != int64(size) {
			t.Fatalf("stage %d bytes: %d, %v", size, n, err)
		}
		var setting string
		if err := one.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting); err != nil {
			t.Fatal(err)
		}
		if setting != "on" {
			t.Fatalf("synchronous_commit after staging %d bytes: %q, want on", size, setting)
		}
		Unstage(t, p, id)
	}
}
