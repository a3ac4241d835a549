package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
)

// waitMetric scrapes base until the series has the value want.
func waitMetric(t *testing.T, base, name string, want float64, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		got, ok := scrapeMetrics(t, base).value(name, labels...)
		if ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v (present %v), want %v", name, labels, got, ok, want)
		}
		time.Sleep(50 * time.Millisecond) // the poll interval, not a synchronisation
	}
}

// newServer builds a server on PostgreSQL (dsn) without serving S3, with its
// metrics handler on a test listener.
func newServer(t *testing.T, dsn string) (*server.Server, string) {
	t.Helper()
	cfg, err := config.Load(nil, pgEnv(t, dsn,
		"S3GATE_ROOT_ACCESS_KEY="+testgw.AccessKey, "S3GATE_ROOT_SECRET_KEY="+testgw.SecretKey), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.MetricsHandler())
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

// TestRoleMetricFollowsClaim: s3gate_role{role="owner"} is 1 while the
// server holds the writer claim and 0 once its claim session is terminated.
func TestRoleMetricFollowsClaim(t *testing.T) {
	dsn := pgtest.DSN(t)
	_, base := newServer(t, dsn)
	waitMetric(t, base, "s3gate_role", 1, "role", "owner")
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	pid := claimHolder(t, conn)
	if pid == 0 {
		t.Fatal("nobody holds the writer claim")
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(pg_terminate_backend($1))`, pid).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate the claim session: %d, %v", n, err)
	}
	waitMetric(t, base, "s3gate_role", 0, "role", "owner")
}

// TestReadyMetricFollowsDatabase: s3gate_ready is 0 while PostgreSQL is down
// and 1 again once it is back, as /readyz answers.
func TestReadyMetricFollowsDatabase(t *testing.T) {
	pg := pgtest.NewServer(t)
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	server.WithoutClaim(t, pg.DSN()) // stopping PostgreSQL would cost the claim
	_, base := newServer(t, pg.DSN())
	waitMetric(t, base, "s3gate_ready", 1)
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, base, "s3gate_ready", 0)
	if code, _ := get(t, base+"/readyz"); code != 503 {
		t.Errorf("/readyz with PostgreSQL down: %d, want 503", code)
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, base, "s3gate_ready", 1)
}
