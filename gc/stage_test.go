package gc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
)

// gatedBody yields its first half, reports it, then blocks until released
// (a client stalled mid-body), then yields the rest.
type gatedBody struct {
	r       io.Reader
	half    int
	read    int
	reached chan struct{}
	release chan struct{}
}

func newGatedBody(data []byte) *gatedBody {
	return &gatedBody{r: bytes.NewReader(data), half: len(data) / 2,
		reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedBody) Read(p []byte) (int, error) {
	if g.read == g.half {
		close(g.reached)
		<-g.release
		g.read++ // only once
	}
	if g.read < g.half && len(p) > g.half-g.read {
		p = p[:g.half-g.read]
	}
	n, err := g.r.Read(p)
	if g.read < g.half {
		g.read += n
	}
	return n, err
}

// stagesOf counts the stage rows, staged chunk rows and large objects that
// are owned by no blob row.
func (v *env) staged(t *testing.T) (stages, chunks, los int) {
	t.Helper()
	return v.count(t, `SELECT count(*) FROM blob_stages`),
		v.count(t, `SELECT count(*) FROM blob_chunks c WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = c.blob_id)`),
		v.count(t, `SELECT count(*) FROM pg_largeobject_metadata m WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.lo_oid = m.oid)`)
}

// TestReapStages: a put stalled mid-body keeps its staged content while its
// pin holds, even with no stage grace at all, and completes byte-exact; the
// same put on an engine without a pinner loses its stage to the reaper and
// then fails with ErrUnavailable, leaving nothing visible and nothing behind.
func TestReapStages(t *testing.T) {
	data := streamContent(9) // 1–4 MiB: several chunks, above the knee
	for _, mode := range []string{pg.LargePGChunks, pg.LargePGLO} {
		t.Run(mode+"/pinned", func(t *testing.T) {
			v := newStreamEnv(t, mode)
			ctx := context.Background()
			body := newGatedBody(data)
			done := make(chan error, 1)
			go func() {
				_, err := v.eng.PutObject(ctx, "b", "k", body, store.PutOptions{Size: int64(len(data))})
				done <- err
			}()
			<-body.reached
			if s, _, _ := v.staged(t); s != 1 {
				t.Fatalf("%d stage rows mid-body, want 1", s)
			}
			st, err := collect(ctx, v.db, v.opts()) // no grace, no stage grace
			if err != nil {
				t.Fatal(err)
			}
			if st.StagesReaped != 0 {
				t.Fatalf("reaped %d stages of a running, pinned put", st.StagesReaped)
			}
			close(body.release)
			if err := <-done; err != nil {
				t.Fatalf("put: %v", err)
			}
			if err := v.check(ctx, "k", data); err != nil {
				t.Fatal(err)
			}
			if s, c, l := v.staged(t); s+c+l != 0 {
				t.Errorf("after publish: %d stage rows, %d unowned chunk rows, %d unowned large objects", s, c, l)
			}
		})
		t.Run(mode+"/unpinned", func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			body := newGatedBody(data)
			done := make(chan error, 1)
			go func() {
				_, err := v.eng.PutObject(ctx, "b", "k", body, store.PutOptions{Size: int64(len(data))})
				done <- err
			}()
			<-body.reached
			n, err := ReapStages(ctx, v.db, v.opts())
			if err != nil || n != 1 {
				t.Fatalf("ReapStages = %d, %v; want 1 abandoned-looking stage reaped", n, err)
			}
			close(body.release)
			if err := <-done; !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("put after its stage was reaped: %v, want ErrUnavailable", err)
			}
			if err := v.check(ctx, "k", nil); err != nil {
				t.Fatal(err)
			}
			if s, c, l := v.staged(t); s+c+l != 0 {
				t.Errorf("after the failed put: %d stage rows, %d unowned chunk rows, %d unowned large objects", s, c, l)
			}
			v.assertNoOrphans(t)
		})
	}
}

// TestReapStagesAfterCrash: a stage whose put died (nothing unstaged it) is
// left alone within the stage grace and reaped after it.
func TestReapStagesAfterCrash(t *testing.T) {
	for _, mode := range []string{pg.LargePGChunks, pg.LargePGLO} {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx := context.Background()
			body := newGatedBody(streamContent(10))
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := v.eng.PutObject(pctx, "b", "k", body, store.PutOptions{Size: 8 << 20})
				done <- err
			}()
			<-body.reached
			// Simulate the crash: the stage row's owner vanishes without
			// unstaging. Copy the stage so that the put's own cleanup cannot
			// remove it, then let the put fail.
			if _, err := v.pool.Exec(ctx, `INSERT INTO blob_stages (blob_id, lo_oid)
				SELECT blob_id + 1000000, lo_copy FROM (
					SELECT blob_id, CASE WHEN lo_oid IS NULL THEN NULL ELSE lo_from_bytea(0, lo_get(lo_oid)) END AS lo_copy
					FROM blob_stages) s`); err != nil {
				t.Fatal(err)
			}
			if _, err := v.pool.Exec(ctx, `INSERT INTO blob_chunks (blob_id, seq, data)
				SELECT blob_id + 1000000, seq, data FROM blob_chunks`); err != nil {
				t.Fatal(err)
			}
			cancel()
			close(body.release)
			if err := <-done; err == nil {
				t.Fatal("cancelled put succeeded")
			}
			if s, _, _ := v.staged(t); s != 1 {
				t.Fatalf("%d stage rows after the failed put, want the crashed copy only", s)
			}
			o := v.opts()
			o.StageGrace = DefaultStageGrace
			if n, err := ReapStages(ctx, v.db, o); err != nil || n != 0 {
				t.Fatalf("within the stage grace: ReapStages = %d, %v; want 0", n, err)
			}
			st, err := collect(ctx, v.db, v.opts())
			if err != nil || st.StagesReaped != 1 {
				t.Fatalf("after the grace: reaped %d stages (%v), want 1", st.StagesReaped, err)
			}
			if s, c, l := v.staged(t); s+c+l != 0 {
				t.Errorf("after GC: %d stage rows, %d unowned chunk rows, %d unowned large objects", s, c, l)
			}
			v.assertNoOrphans(t)
		})
	}
}
