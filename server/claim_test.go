package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
)

// logSink collects a server's log lines (text format) for the test to wait on.
type logSink struct {
	mu      sync.Mutex
	text    strings.Builder
	changed chan struct{} // closed and replaced on every write
}

func newLogSink() *logSink { return &logSink{changed: make(chan struct{})} }

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.text.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

func (l *logSink) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

// waitFor waits until the log holds s.
func (l *logSink) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		l.mu.Lock()
		found, changed := strings.Contains(l.text.String(), s), l.changed
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %q in the log:\n%s", s, l)
		}
	}
}

func pgEnv(t *testing.T, dsn string, extra ...string) []string {
	return append([]string{"S3GATE_DATABASE_URL=" + dsn, "S3GATE_DATA_DIR=" + t.TempDir(),
		"S3GATE_DRAIN_TIMEOUT=5s", "S3GATE_METRICS_ADDR=off"}, extra...)
}

// claimHolder is the backend that holds the writer claim on dsn's database
// (0 if none): the session advisory lock on fleet.OwnerLockKey.
func claimHolder(t *testing.T, conn *pgx.Conn) uint32 {
	t.Helper()
	key := fleet.OwnerLockKey()
	var pids []uint32
	rows, err := conn.Query(context.Background(), `SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND granted
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid = $1 AND objid = $2 AND objsubid = 1`, uint32(uint64(key)>>32), uint32(key))
	if err == nil {
		pids, err = pgx.CollectRows(rows, pgx.RowTo[uint32])
	}
	if err != nil || len(pids) > 1 {
		t.Fatalf("claim holders %v: %v", pids, err)
	}
	if len(pids) == 0 {
		return 0
	}
	return pids[0]
}

// TestClaimInProcess: an in-process server on PostgreSQL holds the writer
// claim; a second one on the same database refuses with STANDBY=refuse or
// waits as a standby; terminating the owner's claim session stops its work
// (Serve returns ErrClaimLost, an in-flight PUT is not stored) and the
// standby takes over.
func TestClaimInProcess(t *testing.T) {
	dsn := pgtest.DSN(t)
	ownerLog := newLogSink()
	owner := startGateway(t, gatewaySetup{env: pgEnv(t, dsn, "S3GATE_DRAIN_TIMEOUT=2s"), log: ownerLog.logger()})
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	pid := claimHolder(t, conn)
	if pid == 0 {
		t.Fatal("nobody holds the writer claim while an in-process server serves")
	}
	ownerLog.waitFor(t, `msg="owner of the database"`)

	refuse, err := config.Load(nil, pgEnv(t, dsn, "S3GATE_STANDBY=refuse",
		"S3GATE_ROOT_ACCESS_KEY="+testgw.AccessKey, "S3GATE_ROOT_SECRET_KEY="+testgw.SecretKey), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	refuseLog := newLogSink()
	if srv, err := server.New(context.Background(), refuse, refuseLog.logger()); !errors.Is(err, server.ErrNoClaim) {
		if srv != nil {
			srv.Close()
		}
		t.Fatalf("a second server with STANDBY=refuse: %v, want ErrNoClaim", err)
	}
	refuseLog.waitFor(t, "another instance owns this database (S3GATE_STANDBY=refuse)")

	standby := refuse
	standby.Standby = "wait"
	standbyLog := newLogSink()
	type built struct {
		srv *server.Server
		err error
	}
	took := make(chan built, 1)
	go func() {
		srv, err := server.New(context.Background(), standby, standbyLog.logger())
		took <- built{srv, err}
	}()
	standbyLog.waitFor(t, "standby: another instance owns this database")

	content := bytes.Repeat([]byte("claimed "), 10000)
	pw, resps, errs := startSlowPut(t, owner, content)
	defer pw.Close()
	if got := claimHolder(t, conn); got != pid {
		t.Fatalf("claim holder %d while the standby waits, want the owner's %d", got, pid)
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(pg_terminate_backend($1))`, pid).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate the owner's claim session: %d, %v", n, err)
	}

	select {
	case err := <-owner.served:
		if !errors.Is(err, server.ErrClaimLost) {
			t.Fatalf("the owner's Serve after the loss: %v, want ErrClaimLost", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the owner still serves after its claim session was terminated")
	}
	ownerLog.waitFor(t, "ownership of the database lost: stopping all work")
	// The rest of the body arrives too late: the request's work was cancelled.
	_, _ = pw.Write(content[len(content)/2:])
	_ = pw.Close()
	select {
	case resp := <-resps:
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("a PUT in flight when the claim was lost was acknowledged")
		}
	case <-errs: // the connection was closed
	}

	b := <-took
	if b.err != nil {
		t.Fatalf("the standby after the owner lost its claim: %v", b.err)
	}
	defer b.srv.Close()
	standbyLog.waitFor(t, `msg="owner of the database"`)
	if claimHolder(t, conn) == pid {
		t.Fatal("the old owner's backend still holds the claim")
	}
	rec := httptest.NewRecorder()
	b.srv.Handler().ServeHTTP(rec, owner.request(t, http.MethodGet, "/drain/slow", nil, 0, emptyHash()))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("GET of the PUT cut by the loss: %d, want 404", rec.Code)
	}
}
