package fleet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fakeClock is a Clock that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// manualCfg is a session config with the default timing, a fake clock and no
// checker goroutine: the test decides when checks happen and what time it is.
func manualCfg(dsn, role string, clk Clock) SessionConfig {
	return SessionConfig{DSN: dsn, Role: role, Clock: clk, Metrics: new(Metrics), manualChecks: true}
}

// fastCfg runs the real checker with short, still-safe timing.
func fastCfg(dsn, role string) SessionConfig {
	return SessionConfig{
		DSN: dsn, Role: role, Metrics: new(Metrics),
		CheckInterval: 100 * time.Millisecond, CheckTimeout: time.Second,
		Window: 3 * time.Second, Margin: time.Second,
		IdleSessionTimeout: 12 * time.Second,
	}
}

// admin opens a plain connection for the test's own SQL.
func admin(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("admin connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("admin close: %v", err)
		}
	})
	return c
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func terminate(t *testing.T, c *pgx.Conn, pid uint32) {
	t.Helper()
	var ok bool
	if err := c.QueryRow(tctx(t), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// waitClosed waits for ch with a generous safety bound: it fails the test only
// if the event never comes, it does not measure speed.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

type pgxConn = pgx.Conn

func pgtestDSN(t *testing.T) string { return pgtest.DSN(t) }
