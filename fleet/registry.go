package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// InstanceID identifies one running instance of a fleet: its row in the
// instances table (store/pg migration 0005) and the owner of its row pins.
// It is unique per process start: a restarted instance registers anew.
type InstanceID string

// DefaultInstanceTTL is how long a registration lives without a heartbeat.
const DefaultInstanceTTL = 30 * time.Second

// RegistryMetrics count what the registry does, as plain atomics (the caller
// exports them).
type RegistryMetrics struct {
	// Heartbeats counts heartbeats that reached the database.
	Heartbeats atomic.Int64
	// HeartbeatFailures counts heartbeats that failed (the session was lost,
	// a statement failed, or the row had been reaped and was inserted again).
	HeartbeatFailures atomic.Int64
	// Live is the number of unexpired registrations (this one included) seen
	// by the last heartbeat.
	Live atomic.Int64
}

// RegistryConfig configures Register.
type RegistryConfig struct {
	// Session configures the registry's own session; Role defaults to
	// "s3gate-registry".
	Session SessionConfig
	// TTL is the registration's lifetime without a heartbeat
	// (DefaultInstanceTTL); heartbeats go every TTL/3.
	TTL time.Duration
	// Metrics, if nil, is a private RegistryMetrics.
	Metrics *RegistryMetrics
	// OnError receives the errors of heartbeats (the caller logs them); a
	// failed heartbeat is retried at the next one, it never stops the
	// instance.
	OnError func(error)
	// ClaimKey is the single-instance writer claim's key (0:
	// OwnerLockKey()): Register refuses while it is held.
	ClaimKey int64
}

// Registry is this instance's registration in the fleet: a row in instances
// kept fresh by heartbeats on a dedicated, checked session (ADR 009). The
// registration is informational — nothing is fenced on it — so a lost
// session is simply replaced at the next heartbeat.
type Registry struct {
	cfg  RegistryConfig
	id   InstanceID
	host string
	pid  int

	mu   sync.Mutex // guards sess
	sess *Session

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Register inserts this instance's row and starts its heartbeat.
func Register(ctx context.Context, cfg RegistryConfig) (*Registry, error) {
	if cfg.Session.Role == "" {
		cfg.Session.Role = "s3gate-registry"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultInstanceTTL
	}
	if cfg.Metrics == nil {
		cfg.Metrics = new(RegistryMetrics)
	}
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	r := &Registry{cfg: cfg, host: host, pid: os.Getpid(), stop: make(chan struct{}), done: make(chan struct{})}
	r.id = newInstanceID(host, r.pid)
	if _, err := r.heartbeat(ctx); err != nil {
		r.closeSession()
		return nil, fmt.Errorf("register instance: %w", err)
	}
	// After the row is in, so that a single instance claiming at the same
	// moment sees one of the two: its claim here, or this row there.
	var held bool
	err = r.exec(ctx, func(qctx context.Context, conn *pgx.Conn) (err error) {
		held, err = claimHeld(qctx, conn, cfg.ClaimKey)
		return err
	})
	if err == nil && held {
		err = fmt.Errorf("%w: a single-instance gateway holds the writer claim on this database; stop it, or run every instance with S3GATE_FLEET=true", ErrModeConflict)
	}
	if err != nil {
		close(r.done) // no loop runs: Close must not wait for one
		return nil, errors.Join(fmt.Errorf("register instance: %w", err), r.Close(ctx))
	}
	go r.loop()
	return r, nil
}

// ErrModeConflict is a fleet instance and a single-instance gateway on one
// database: a single instance's writer claim assumes that no other instance
// writes, so each refuses to start beside the other.
var ErrModeConflict = errors.New("fleet and single-instance gateways on one database")

// claimHeld reports whether a single-instance gateway holds the writer
// claim key (0: OwnerLockKey()) on this database.
func claimHeld(ctx context.Context, conn *pgx.Conn, key int64) (bool, error) {
	if key == 0 {
		key = OwnerLockKey()
	}
	var held bool
	// A bigint advisory key shows in pg_locks as classid (high half), objid
	// (low half) and objsubid 1; advisory keys are per database.
	err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = (($1::bigint >> 32) & 4294967295)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1 AND granted)`,
		key).Scan(&held)
	if err != nil {
		return false, fmt.Errorf("look up the writer claim: %w", err)
	}
	return held, nil
}

// newInstanceID is host:pid and 8 random hex digits: readable in listings,
// unique across restarts and hosts.
func newInstanceID(host string, pid int) InstanceID {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	return InstanceID(fmt.Sprintf("%s:%d:%s", host, pid, hex.EncodeToString(b[:])))
}

// ID is this instance's id.
func (r *Registry) ID() InstanceID { return r.id }

// TTL is the registration's lifetime without a heartbeat.
func (r *Registry) TTL() time.Duration { return r.cfg.TTL }

// Metrics are the registry's counters.
func (r *Registry) Metrics() *RegistryMetrics { return r.cfg.Metrics }

// loop heartbeats every TTL/3 after the previous answer (never queued).
func (r *Registry) loop() {
	defer close(r.done)
	t := time.NewTimer(r.cfg.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.TTL/3)
		reinserted, err := r.heartbeat(ctx)
		cancel()
		switch {
		case err != nil:
			r.cfg.Metrics.HeartbeatFailures.Add(1)
			r.report(fmt.Errorf("instance %s: heartbeat: %w", r.id, err))
		case reinserted:
			// Our heartbeats stopped for longer than the TTL and the sweeper
			// reaped the row: the gap is a failure even though we are back.
			r.cfg.Metrics.HeartbeatFailures.Add(1)
			r.report(fmt.Errorf("instance %s: the registration had expired and was reaped; registered again", r.id))
		}
		t.Reset(r.cfg.TTL / 3)
	}
}

func (r *Registry) report(err error) {
	if r.cfg.OnError != nil {
		r.cfg.OnError(err)
	}
}

// heartbeat upserts the row (inserting it if it is missing) in database
// time and reads how many registrations are live; inserted reports whether
// the row had to be inserted.
func (r *Registry) heartbeat(ctx context.Context) (inserted bool, err error) {
	var live int64
	err = r.exec(ctx, func(qctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(qctx, `WITH up AS (
			INSERT INTO instances AS i (id, host, pid, ttl) VALUES ($1, $2, $3, $4::bigint * interval '1 microsecond')
			ON CONFLICT (id) DO UPDATE SET heartbeat_at = clock_timestamp()
			RETURNING (xmax = 0) AS inserted)
		SELECT inserted, 1 + (SELECT count(*) FROM instances
			WHERE id <> $1 AND heartbeat_at + ttl > clock_timestamp()) FROM up`,
			string(r.id), r.host, r.pid, r.cfg.TTL.Microseconds()).Scan(&inserted, &live)
	})
	if err != nil {
		return false, err
	}
	r.cfg.Metrics.Heartbeats.Add(1)
	r.cfg.Metrics.Live.Store(live)
	return inserted, nil
}

// exec runs fn on the registry's session, opening a new one if there is none
// or the last one was lost (the registration holds no lock, so nothing is
// lost with a session).
func (r *Registry) exec(ctx context.Context, fn func(context.Context, *pgx.Conn) error) error {
	r.mu.Lock()
	if r.sess != nil && !r.sess.Valid() {
		_ = r.sess.Close() // lost already: its error was the cause
		r.sess = nil
	}
	if r.sess == nil {
		s, err := OpenSession(ctx, r.cfg.Session)
		if err != nil {
			r.mu.Unlock()
			return err
		}
		r.sess = s
	}
	s := r.sess
	r.mu.Unlock()
	return s.exec(ctx, fn)
}

func (r *Registry) closeSession() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sess == nil {
		return nil
	}
	err := r.sess.Close()
	r.sess = nil
	return err
}

// Close stops the heartbeat, deletes the registration (a clean shutdown
// leaves no row behind) and closes the session. ctx bounds the deletion.
// Idempotent.
func (r *Registry) Close(ctx context.Context) error {
	var err error
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		derr := r.exec(ctx, func(qctx context.Context, conn *pgx.Conn) error {
			_, err := conn.Exec(qctx, `DELETE FROM instances WHERE id = $1`, string(r.id))
			return err
		})
		if derr != nil {
			derr = fmt.Errorf("instance %s: deregister (the sweeper reaps the row once it expires): %w", r.id, derr)
		}
		err = errors.Join(derr, r.closeSession())
	})
	return err
}

// Instance is one row of the registry, as `s3gate admin instances` shows it.
type Instance struct {
	ID          InstanceID
	Host        string
	PID         int
	StartedAt   time.Time
	HeartbeatAt time.Time
	TTL         time.Duration
	// Live: the last heartbeat is younger than the TTL (in database time).
	Live bool
}

// Querier is what ListInstances and ReapInstances need: a pool or a
// connection.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ListInstances returns the registry's rows, oldest start first, with their
// state in database time.
func ListInstances(ctx context.Context, q Querier) ([]Instance, error) {
	rows, err := q.Query(ctx, `SELECT id, host, pid, started_at, heartbeat_at,
			(extract(epoch FROM ttl) * 1e6)::bigint, heartbeat_at + ttl > clock_timestamp()
		FROM instances ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Instance, error) {
		var in Instance
		var ttlMicros int64
		err := row.Scan(&in.ID, &in.Host, &in.PID, &in.StartedAt, &in.HeartbeatAt, &ttlMicros, &in.Live)
		in.TTL = time.Duration(ttlMicros) * time.Microsecond
		return in, err
	})
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return out, nil
}
