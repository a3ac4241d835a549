package fleet_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/pg"
)

// registryDB is a migrated database and a pool on it for the test's SQL.
func registryDB(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	dsn := pgtest.DSN(t)
	if err := pg.Migrate(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return dsn, pool
}

// waitUntil polls cond every 20 ms until it holds (30 s hang guard).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRegistryLifecycle: Register inserts the row (database time, the
// instance's host and pid), heartbeats it every TTL/3 on its own session
// (which a lost session does not stop: the next heartbeat opens another),
// inserts it again after a reap (counted as a failure), and Close deletes it.
func TestRegistryLifecycle(t *testing.T) {
	dsn, pool := registryDB(t)
	ctx := context.Background()
	m := new(fleet.RegistryMetrics)
	reg, err := fleet.Register(ctx, fleet.RegistryConfig{Session: fleet.SessionConfig{DSN: dsn}, TTL: 3 * time.Second, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	id := reg.ID()
	list, err := fleet.ListInstances(ctx, pool)
	if err != nil || len(list) != 1 || list[0].ID != id || !list[0].Live || list[0].TTL != 3*time.Second || list[0].PID <= 0 {
		t.Fatalf("instances %+v, %v; want one live row %s with TTL 3s", list, err, id)
	}
	if !strings.HasPrefix(string(id), list[0].Host+":") {
		t.Errorf("id %s does not start with its host %s", id, list[0].Host)
	}
	// The heartbeat every second (TTL/3) moves heartbeat_at in database time.
	heartbeat := func() time.Time {
		var at time.Time
		if err := pool.QueryRow(ctx, `SELECT heartbeat_at FROM instances WHERE id = $1`, string(id)).Scan(&at); err != nil {
			return time.Time{}
		}
		return at
	}
	first := heartbeat()
	start := time.Now()
	waitUntil(t, "two heartbeats", func() bool { return m.Heartbeats.Load() >= 3 })
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("two heartbeats after the first took %s: the interval is TTL/3 = 1s", took)
	}
	if h := heartbeat(); !h.After(first) {
		t.Errorf("heartbeat_at %v did not move past %v", h, first)
	}
	if m.Live.Load() != 1 {
		t.Errorf("live = %d, want 1", m.Live.Load())
	}

	// A lost session: the next heartbeat runs on a new one.
	if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 's3gate-registry'`); err != nil {
		t.Fatal(err)
	}
	n := m.Heartbeats.Load()
	waitUntil(t, "a heartbeat after the session loss", func() bool { return m.Heartbeats.Load() >= n+2 })

	// Reaped meanwhile (another instance's sweeper): inserted again, and
	// counted as a failed heartbeat.
	fails := m.HeartbeatFailures.Load()
	if _, err := pool.Exec(ctx, `DELETE FROM instances WHERE id = $1`, string(id)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the registration inserted again", func() bool { return !heartbeat().IsZero() })
	waitUntil(t, "the failure counted", func() bool { return m.HeartbeatFailures.Load() > fails })

	if err := reg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if list, err := fleet.ListInstances(ctx, pool); err != nil || len(list) != 0 {
		t.Fatalf("after Close: instances %+v, %v; want none", list, err)
	}
	// The server ends a closed session's backend on its own time: poll.
	waitUntil(t, "no registry session left after Close", func() bool {
		var sessions int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 's3gate-registry'`).Scan(&sessions)
		return err == nil && sessions == 0
	})
}

// TestReapInstances: GC's reaper deletes exactly the registrations whose
// heartbeat is older than their TTL (database time), in bounded batches, and
// leaves live ones; ListInstances tells the two apart.
func TestReapInstances(t *testing.T) {
	dsn, pool := registryDB(t)
	ctx := context.Background()
	reg, err := fleet.Register(ctx, fleet.RegistryConfig{Session: fleet.SessionConfig{DSN: dsn}, TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	// Five expired rows, and one whose heartbeat is old but whose TTL is long.
	if _, err := pool.Exec(ctx, `INSERT INTO instances (id, host, pid, heartbeat_at, ttl)
		SELECT 'gone-' || i, 'h', i, clock_timestamp() - interval '1 minute', interval '10 seconds' FROM generate_series(1, 5) i
		UNION ALL SELECT 'slow', 'h', 9, clock_timestamp() - interval '1 minute', interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	list, err := fleet.ListInstances(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	live := map[fleet.InstanceID]bool{}
	for _, in := range list {
		live[in.ID] = in.Live
	}
	if len(live) != 7 || !live[reg.ID()] || !live["slow"] || live["gone-1"] {
		t.Fatalf("states %v", live)
	}
	g := pg.NewGC(pool)
	if n, err := g.ReapInstances(ctx, 2); err != nil || n != 2 {
		t.Fatalf("first batch of 2: %d, %v", n, err)
	}
	if n, err := g.ReapInstances(ctx, 100); err != nil || n != 3 {
		t.Fatalf("second batch: %d, %v; want the 3 left", n, err)
	}
	var ids []string
	rows, err := pool.Query(ctx, `SELECT id FROM instances ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != 2 || !(ids[0] == "slow" || ids[1] == "slow") {
		t.Fatalf("left %v; want this instance and slow", ids)
	}
}

// TestModeConflict: a fleet instance and a single-instance gateway never
// serve one database together. Whichever starts second is refused with
// ErrModeConflict (the single instance without waiting as a standby), the
// refused one leaves no registration and no claim behind, and when both
// start at once at most one of them gets in.
func TestModeConflict(t *testing.T) {
	dsn, pool := registryDB(t)
	ctx := context.Background()
	key := fleet.LockKey("test", t.Name())
	sess := fleet.SessionConfig{DSN: dsn}
	register := func() (*fleet.Registry, error) {
		return fleet.Register(ctx, fleet.RegistryConfig{Session: sess, TTL: 3 * time.Second, ClaimKey: key})
	}
	claim := func() (*fleet.Ownership, error) {
		o, err := fleet.NewOwnership(fleet.OwnershipConfig{Session: sess, Key: key, PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Claim(ctx, true); err != nil {
			return nil, errors.Join(err, o.Close())
		}
		return o, nil
	}
	rows := func() int {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM instances`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	claimHeld := func() bool {
		var held bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
			AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1)`, key).Scan(&held); err != nil {
			t.Fatal(err)
		}
		return held
	}

	t.Run("single first", func(t *testing.T) {
		o, err := claim()
		if err != nil {
			t.Fatal(err)
		}
		if r, err := register(); !errors.Is(err, fleet.ErrModeConflict) {
			if r != nil {
				r.Close(ctx)
			}
			t.Fatalf("fleet instance beside a single instance: %v, want ErrModeConflict", err)
		}
		if n := rows(); n != 0 {
			t.Errorf("the refused fleet instance left %d registrations", n)
		}
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("fleet first", func(t *testing.T) {
		// A closed session's locks go when its backend exits, just after.
		waitUntil(t, "the closed claim's release", func() bool { return !claimHeld() })
		r, err := register()
		if err != nil {
			t.Fatal(err)
		}
		if o, err := claim(); !errors.Is(err, fleet.ErrModeConflict) {
			if o != nil {
				o.Close()
			}
			t.Fatalf("single instance beside a fleet instance: %v, want ErrModeConflict at once", err)
		}
		if claimHeld() {
			t.Error("the refused single instance kept the claim")
		}
		if err := r.Close(ctx); err != nil {
			t.Fatal(err)
		}
		o, err := claim()
		if err != nil {
			t.Fatalf("claim once the fleet is gone: %v", err)
		}
		o.Close()
	})
	t.Run("at once", func(t *testing.T) {
		for i := range 20 {
			var wg sync.WaitGroup
			var r *fleet.Registry
			var o *fleet.Ownership
			var rerr, oerr error
			wg.Add(2)
			go func() { defer wg.Done(); r, rerr = register() }()
			go func() { defer wg.Done(); o, oerr = claim() }()
			wg.Wait()
			for _, err := range []error{rerr, oerr} {
				if err != nil && !errors.Is(err, fleet.ErrModeConflict) {
					t.Fatalf("round %d: %v", i, err)
				}
			}
			if r != nil && o != nil {
				t.Fatalf("round %d: a fleet instance and a single instance both started", i)
			}
			if r != nil {
				r.Close(ctx)
			}
			if o != nil {
				o.Close()
			}
		}
	})
}
