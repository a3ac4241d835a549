package server

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/metrics"
)

// directProbeTimeout bounds the start-up probe of the direct URL.
const directProbeTimeout = 10 * time.Second

// checkDirect refuses a configuration whose direct sessions go through a
// proxy (see checkDirectURL). The tests that put a TCP proxy between a
// gateway and PostgreSQL to cut it opt out with the claim (WithoutClaim).
func (s *Server) checkDirect(ctx context.Context) error {
	if skipClaim(s.cfg.DatabaseURL) {
		return nil
	}
	if err := checkDirectURL(ctx, s.cfg.DirectURL()); err != nil {
		s.log.Error("the sessions that hold advisory locks go through a proxy", "err", err)
		return fmt.Errorf("%s: %w", config.Name(directSetting(s.cfg)), err)
	}
	return nil
}

// checkDirectURL refuses a direct URL (the writer claim's, the pin session's,
// the migrations') that visibly goes through a proxy: session advisory locks
// do not survive a transaction-pooling proxy such as pgbouncer (design §3).
// It connects once and compares the ends of the connection as the server
// sees them with ours: a proxy terminates the connection, so the server
// listens on another port than the URL names and sees another client port
// than ours. A Unix socket, or a proxy on the server's own port, cannot be
// told apart, and passes (docs/adr/010-row-pins.md).
func checkDirectURL(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, directProbeTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }() // a probe: nothing to lose
	local, ok := conn.PgConn().Conn().LocalAddr().(*net.TCPAddr)
	if !ok {
		return nil // a Unix socket: no proxy we can see
	}
	var serverPort, clientPort *int
	// Simple protocol: a transaction pooler without prepared statements must
	// still answer the probe.
	if err := conn.QueryRow(ctx, `SELECT inet_server_port(), inet_client_port()`, pgx.QueryExecModeSimpleProtocol).
		Scan(&serverPort, &clientPort); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	urlPort := int(conn.Config().Port)
	if serverPort == nil || clientPort == nil || *serverPort == urlPort || *clientPort == local.Port {
		return nil
	}
	return fmt.Errorf("it goes through a proxy (the URL names port %d, the server listens on %d and sees this client at port %d, not %d): "+
		"the sessions that hold advisory locks need a direct connection; point %s at PostgreSQL itself",
		urlPort, *serverPort, *clientPort, local.Port, config.Name("DIRECT_DATABASE_URL"))
}

// directSetting names the setting whose URL the direct sessions use.
func directSetting(cfg config.Config) string {
	if cfg.DirectDatabaseURL != "" {
		return "DIRECT_DATABASE_URL"
	}
	return "DATABASE_URL"
}

// rowPins is the engine's row pin configuration: on with PIN_MODE=rows (GETs
// included), and in fleet mode for the puts, whose joint transaction commits
// the pin row with the entry and the object row (issue: the fleet put). The
// owner is the fleet registration's instance id, or outside a fleet a random
// one made at start (fleet.NewOwnerID): either is unique per process, so
// that a restarted instance never renews the rows of its previous life.
func (s *Server) rowPins() (cfg *fleet.RowPinsConfig, reads bool) {
	reads = s.cfg.PinMode == config.PinModeRows
	if !reads && s.registry == nil {
		return nil, false
	}
	owner := fleet.NewOwnerID()
	if s.registry != nil {
		owner = string(s.registry.ID())
	}
	return &fleet.RowPinsConfig{
		Owner:   owner,
		TTL:     time.Duration(s.cfg.PinTTL),
		Metrics: s.rt.rowMetrics,
		OnError: func(err error) { s.log.Warn("row pins", "err", err) },
	}, reads
}

// poolURL is DATABASE_URL with the pool size and, in PIN_MODE=rows (where
// the pool may go through a transaction pooler), the cache_describe query
// mode unless the URL chose one: pgx's default caches named prepared
// statements, which live on one server session while a transaction pooler
// hands each transaction to any; cache_describe sends every statement as an
// unnamed Parse, Bind and Execute in one round trip (the cached parameter
// types hold on every session of the database), and still encodes the
// gateway's JSON and checksum types, which the exec and simple modes cannot.
func poolURL(cfg config.Config) (string, error) {
	u, err := withPoolSize(cfg.DatabaseURL, cfg.MaxConns)
	if err != nil || cfg.PinMode != config.PinModeRows {
		return u, err
	}
	return withDefaultQuery(u, "default_query_exec_mode", "cache_describe")
}

// withDefaultQuery sets a query parameter of a PostgreSQL URL unless the
// operator set it.
func withDefaultQuery(dbURL, name, value string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	q := u.Query()
	if q.Get(name) == "" {
		q.Set(name, value)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// registerPinMetrics exports the pins by kind and the row pins' renewals
// (docs/metrics.md).
func registerPinMetrics(reg prometheus.Registerer, session *fleet.Metrics, rows *fleet.RowPinMetrics) error {
	load := func(v *atomic.Int64) func() float64 { return func() float64 { return float64(v.Load()) } }
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: metrics.Namespace, Name: name, Help: help}
	}
	pins := func(kind string, v *atomic.Int64) prometheus.Collector {
		o := opts("pins", "Blobs this instance pins, by kind: session (shared advisory locks) or row (pin rows).")
		o.ConstLabels = prometheus.Labels{"kind": kind}
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts(o), load(v))
	}
	for _, c := range []prometheus.Collector{
		pins("session", &session.PinsHeld),
		pins("row", &rows.Held),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("pin_renewals_total",
			"Pin rows renewed (every PIN_TTL/3 while a guard holds them).")), load(&rows.Renewals)),
		prometheus.NewCounterFunc(prometheus.CounterOpts(opts("pin_renewal_failures_total",
			"Renewal statements of pin rows that failed; their rows expire unless a later renewal comes in time.")), load(&rows.RenewalFailures)),
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: pins: %w", err)
		}
	}
	return nil
}
