package pg

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
)

// trickle is a slow client's body: it sends step bytes per tick of its
// ticker, and once gateAt bytes are sent it reports that on reached and
// waits for gate to close (a client stalled mid-body) before going on.
type trickle struct {
	ctx     context.Context
	data    []byte
	off     int
	step    int
	tick    *time.Ticker
	gateAt  int
	reached func()
	gate    <-chan struct{}
}

func newTrickle(ctx context.Context, data []byte, step int, every time.Duration, gateAt int, reached func(), gate <-chan struct{}) *trickle {
	return &trickle{ctx: ctx, data: data, step: step, tick: time.NewTicker(every), gateAt: gateAt, reached: reached, gate: gate}
}

func (r *trickle) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		r.tick.Stop()
		return 0, io.EOF
	}
	if r.off == r.gateAt && r.reached != nil {
		r.reached()
		r.reached = nil
		select {
		case <-r.gate:
		case <-r.ctx.Done():
			return 0, r.ctx.Err()
		}
	}
	select {
	case <-r.tick.C:
	case <-r.ctx.Done():
		return 0, r.ctx.Err()
	}
	end := min(r.off+r.step, len(r.data), r.off+len(p))
	if r.off < r.gateAt {
		end = min(end, r.gateAt)
	}
	n := copy(p, r.data[r.off:end])
	r.off += n
	return n, nil
}

// activityWatch polls pg_stat_activity on a connection of its own (not a
// pool member). It counts sessions seen idle in a transaction for more than a
// second (a publishing transaction is idle only for the instants between its
// statements; one that waits on a client idles for as long as the client
// does), and the largest number of pool connections seen in use.
type activityWatch struct {
	idleInTx, polls atomic.Int64
	maxAcquired     atomic.Int32
	stop            chan struct{}
	done            chan error
}

func watchActivity(t testing.TB, v *env) *activityWatch {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, v.dsn)
	if err != nil {
		t.Fatal(err)
	}
	w := &activityWatch{stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		defer conn.Close(context.Background()) //nolint:errcheck // a watcher's own session
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			var n int64
			err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid()
				  AND state LIKE 'idle in transaction%' AND state_change < now() - interval '1 second'`).Scan(&n)
			if err != nil {
				w.done <- err
				return
			}
			w.idleInTx.Add(n)
			w.polls.Add(1)
			if a := v.e.pool.Stat().AcquiredConns(); a > w.maxAcquired.Load() {
				w.maxAcquired.Store(a)
			}
			select {
			case <-w.stop:
				w.done <- nil
				return
			case <-tk.C:
			}
		}
	}()
	return w
}

func (w *activityWatch) finish(t testing.TB) {
	t.Helper()
	close(w.stop)
	if err := <-w.done; err != nil {
		t.Fatalf("pg_stat_activity watch: %v", err)
	}
}

// pauseReq asks smallOps to stop between requests: it closes paused, then
// waits for resume to close.
type pauseReq struct{ resume, paused chan struct{} }

// smallOps runs PUT+GET pairs of 4 KiB objects until stop closes (or max
// pairs, if positive), and returns each pair's latency.
func smallOps(ctx context.Context, v *env, stop <-chan struct{}, pause <-chan pauseReq, max int) ([]time.Duration, error) {
	var lats []time.Duration
	data := randBytes(99, 4<<10)
	for i := 0; max <= 0 || i < max; i++ {
		select {
		case <-stop:
			return lats, nil
		case p := <-pause:
			close(p.paused)
			<-p.resume
		default:
		}
		key := fmt.Sprintf("small/%d", i%16)
		t0 := time.Now()
		if _, err := v.e.PutObject(ctx, "b", key, bytes.NewReader(data), store.PutOptions{Size: int64(len(data))}); err != nil {
			return lats, fmt.Errorf("small put %d: %w", i, err)
		}
		_, _, rd, err := v.e.GetObject(ctx, "b", key, store.GetOptions{}, false)
		if err != nil {
			return lats, fmt.Errorf("small get %d: %w", i, err)
		}
		b, err := io.ReadAll(rd)
		_ = rd.Close()
		if err != nil || !bytes.Equal(b, data) {
			return lats, fmt.Errorf("small get %d: %d bytes, %v", i, len(b), err)
		}
		lats = append(lats, time.Since(t0))
	}
	return lats, nil
}

const (
	slowUploads = 40
	slowStep    = 8 << 10
	slowEvery   = 10 * time.Millisecond // 800 KB/s per upload: under two seconds per body
)

// TestSlowUploadsHoldNoConnection is issue 9's done-when test: 40 uploads
// trickle their bodies (and then stall mid-body) while another client does
// small PUTs and GETs. No session of the pool is ever idle in a transaction,
// no pool connection is held while the uploads wait on their clients, the
// small requests complete while all 40 uploads are mid-body, and the uploads
// finally complete byte-exact.
func TestSlowUploadsHoldNoConnection(t *testing.T) {
	for _, mode := range []string{LargePGChunks, LargePGLO} {
		t.Run(mode, func(t *testing.T) {
			v := newEnv(t, mode)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			size := content1MiBPlus(t)
			gateAt := size - 64<<10 // past the first chunk: content is staged
			w := watchActivity(t, v)
			gate := make(chan struct{})
			var reached sync.WaitGroup
			reached.Add(slowUploads)
			datas := make([][]byte, slowUploads)
			errs := make(chan error, slowUploads)
			for i := range slowUploads {
				datas[i] = randBytes(uint64(1000+i), size)
				body := newTrickle(ctx, datas[i], slowStep, slowEvery, gateAt, reached.Done, gate)
				go func() {
					_, err := v.e.PutObject(ctx, "b", fmt.Sprintf("slow/%d", i), body, store.PutOptions{Size: int64(size)})
					errs <- err
				}()
			}
			stopSmall := make(chan struct{})
			pauseSmall := make(chan pauseReq)
			smallDone := make(chan error, 1)
			var lats []time.Duration
			go func() {
				var err error
				lats, err = smallOps(ctx, v, stopSmall, pauseSmall, 0)
				smallDone <- err
			}()
			reached.Wait() // every upload is mid-body, stalled by its client
			if n := v.count(t, `SELECT count(*) FROM blob_stages`); n != slowUploads {
				t.Errorf("%d stage rows mid-body, want %d", n, slowUploads)
			}
			// With the small client paused, nothing at all may be in
			// PostgreSQL for the stalled uploads: no transaction, no session in
			// use, however often one looks.
			pause, paused := make(chan struct{}), make(chan struct{})
			pauseSmall <- pauseReq{pause, paused}
			<-paused
			for i := range 10 {
				// The activity watcher's own polls are excluded: they run on a
				// session of their own, at any moment; so are the server's
				// own workers (an autovacuum worker shows as active in the
				// database it vacuums, and the stages fill pg_largeobject).
				if n := v.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
					AND pid <> pg_backend_pid() AND backend_type = 'client backend' AND (state LIKE 'idle in transaction%' OR state = 'active')
					AND query NOT LIKE '%pg_stat_activity%'`); n != 0 {
					t.Errorf("look %d: %d sessions active or idle in transaction while every upload waits on its client: %s", i, n, v.sessions(t))
				}
				if a := v.e.pool.Stat().AcquiredConns(); a > 1 { // 1: this count's own borrow
					t.Errorf("look %d: %d pool connections held while every upload waits on its client", i, a)
				}
			}
			close(pause)
			// The small client must get through while all uploads are mid-body.
			more, err := smallOps(ctx, v, nil, nil, 20)
			if err != nil {
				t.Fatalf("small requests while %d uploads are mid-body: %v", slowUploads, err)
			}
			close(stopSmall)
			if err := <-smallDone; err != nil {
				t.Fatalf("small requests during the uploads: %v", err)
			}
			close(gate)
			for range slowUploads {
				if err := <-errs; err != nil {
					t.Errorf("slow upload: %v", err)
				}
			}
			w.finish(t)
			if n := w.idleInTx.Load(); n != 0 {
				t.Errorf("pg_stat_activity showed %d sessions idle in transaction over %d polls", n, w.polls.Load())
			}
			if w.polls.Load() < 2 {
				t.Errorf("only %d polls of pg_stat_activity", w.polls.Load())
			}
			if m, max := w.maxAcquired.Load(), v.e.pool.Stat().MaxConns(); m >= max {
				t.Errorf("pool ran out: %d of %d connections in use", m, max)
			}
			for i, d := range datas {
				_, _, got := v.get(t, fmt.Sprintf("slow/%d", i), store.GetOptions{})
				if sha256.Sum256(got) != sha256.Sum256(d) {
					t.Errorf("slow/%d: content differs", i)
				}
			}
			if n := v.count(t, `SELECT count(*) FROM blob_stages`); n != 0 {
				t.Errorf("%d stage rows left after the uploads", n)
			}
			v.assertPoolClean(t)
			all := append(lats, more...)
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			t.Logf("%d small PUT+GET pairs during %d slow uploads, p50 %v; max pool connections in use %d; %d activity polls",
				len(all), slowUploads, all[len(all)/2], w.maxAcquired.Load(), w.polls.Load())
		})
	}
}

// content1MiBPlus is the slow bodies' size: past one chunk (so that a chunk
// is staged before the stall) and past the knee.
func content1MiBPlus(t testing.TB) int {
	if testKnee >= 1<<20 {
		t.Fatal("knee above a chunk")
	}
	return 1<<20 + 256<<10
}

// sessions describes the sessions of the test's database other than this
// one, for a failure message.
func (v *env) sessions(t *testing.T) string {
	t.Helper()
	var out string
	if err := v.e.pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(format('[%s %s %s: %s]', backend_type, state, wait_event, left(query, 120)), ' '), '')
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&out); err != nil {
		t.Fatalf("sessions: %v", err)
	}
	return out
}
