// Package server wires the gateway together from a config.Config: the
// metadata engine, the content engine, the store, authentication and the S3
// HTTP API. cmd/s3gate and the test harness both build the gateway through it.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/s3gate/s3gate/auth"
	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/lifecycle"
	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/s3api"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
)

// engine is a metadata engine: the PostgreSQL one or the embedded one.
type engine interface {
	store.ObjectStore
	Ping(ctx context.Context) error
	// Ready checks database, schema version and storage (for /readyz).
	Ready(ctx context.Context) error
	// BlobStats computes blob counts and bytes (for metrics).
	BlobStats(ctx context.Context) (store.BlobStats, error)
	// KeyStore keeps the access keys that `s3gate admin key` manages.
	store.KeyStore
}

// Server is one running gateway instance.
type Server struct {
	cfg     config.Config
	log     *slog.Logger
	engine  engine
	handler http.Handler
	metrics *metrics.Metrics
	rt      runtimeParts
	media   *localfs.Media // PostgreSQL with the local engine only
	// gcMetrics counts what online GC does.
	gcMetrics *gc.Metrics
	// lcMetrics counts what the lifecycle runner does (lifecycle.go).
	lcMetrics *lifecycle.Metrics
	// work is the parent context of every request and background job;
	// CancelWork cancels it (lost ownership), unlike a graceful drain.
	work       context.Context
	cancelWork context.CancelFunc
	// draining is set once Serve stops accepting: /readyz answers 503.
	draining atomic.Bool
	// claim is the writer claim (PostgreSQL only).
	claim *claim
	// parts are what Close releases, in the order they were opened.
	parts []part
	// stopBy is the end of the shutdown budget, set when Serve stops
	// accepting (shutdown.go).
	stopBy atomic.Pointer[time.Time]
	// stepHook, if set, runs first in every shutdown step with its name (a
	// test hook that blocks a step).
	stepHook func(step string)
	// RootKey is the root key pair in use.
	RootKey RootKey
	// role is RoleOwner or RoleStandby (s3gate_role).
	role atomic.Value
	// started is set when New returns the server: /readyz consults Ready.
	started atomic.Bool
	// standbyMetrics serves METRICS_ADDR from the standby's wait on.
	standbyMetrics *metricsServer
	// registry is this instance's registration in fleet mode (nil
	// otherwise); regMetrics its counters (fleet.go).
	registry   *fleet.Registry
	regMetrics *fleet.RegistryMetrics
	// readOnly: a read replica (readonly.go), set before anything opens.
	readOnly bool
}

// New opens the engines (migrating the schema) and builds the HTTP handler.
// Without a database URL it runs on the embedded default: metadata in
// DATA_DIR/meta.db, content in local files. On PostgreSQL it first takes the
// writer claim, waiting as a standby while another instance holds it
// (STANDBY=wait); an error wrapping ErrNoClaim means it did not get it.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *Server, err error) {
	s := &Server{cfg: cfg, log: log}
	s.work, s.cancelWork = context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			s.Close()
			if s.RootKey.Generated {
				err = &keyError{key: s.RootKey, err: err} // for GeneratedKey
			}
		}
	}()
	if err := s.newMetrics(); err != nil {
		return nil, err
	}
	s.regMetrics = &fleet.RegistryMetrics{}
	if err := s.registerFleetMetrics(s.metrics.Registry()); err != nil {
		return nil, err
	}
	// Fleet mode refuses, before anything waits or opens, a configuration
	// under which the instances could not share the storage (fleet.go).
	if err := fleetRefusal(cfg); err != nil {
		return nil, err
	}
	if cfg.DatabaseURL != "" {
		if err := s.detectReadOnly(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.DatabaseURL != "" && !s.readOnly {
		if err := s.checkDirect(ctx); err != nil {
			return nil, err
		}
		// Before anything else: a standby touches neither schema nor files.
		if err := s.takeClaim(ctx); err != nil {
			return nil, err
		}
	} else if s.RootKey, err = LoadRootKey(ctx, cfg, nil); err != nil { // on PostgreSQL, openPG loads it
		return nil, fmt.Errorf("root key: %w", err)
	}
	if err := s.openRuntime(); err != nil {
		return nil, err
	}
	if cfg.DatabaseURL == "" {
		s.rt.localPins = fleet.NewLocalPins(cfg.MaxPins, s.rt.pinMetrics)
		eng, err := embedded.Open(ctx, embedded.Config{Dir: cfg.DataDir, InlineMax: int(cfg.InlineMax), Region: cfg.Region,
			Governor: s.rt.gov, Pins: s.rt.localPins})
		if err != nil {
			return nil, fmt.Errorf("open embedded store in %sDATA_DIR: %w", config.Prefix, err)
		}
		s.engine = eng
		s.onClose("close embedded store", eng.Close)
	} else if err := s.openPG(ctx); err != nil {
		return nil, err
	}
	// Keys and bucket configurations are read through the metadata cache
	// where it can be kept valid (metacache.go): a key created or deleted
	// with `s3gate admin key` takes effect as soon as its commit is heard.
	meta, err := s.metadataStore()
	if err != nil {
		return nil, err
	}
	keys := &auth.Keyring{RootAccessKey: s.RootKey.AccessKey, RootSecretKey: s.RootKey.SecretKey, Keys: meta}
	verifier := &auth.Verifier{Region: cfg.Region, Creds: keys}
	anonymous, err := registerAnonymousMetrics(s.metrics.Registry())
	if err != nil {
		return nil, err
	}
	s.handler = s3api.New(s3api.Config{Region: cfg.Region, Domain: cfg.Domain,
		Identities:        s3api.KeyIdentities{Root: keys.RootAccessKey, Keys: meta},
		BlockPublicAccess: cfg.BlockPublicAccess, Anonymous: anonymous,
		ReadIdleTimeout: time.Duration(cfg.ReadIdleTimeout), WriteIdleTimeout: time.Duration(cfg.WriteIdleTimeout),
		ReadOnly: s.readOnly, LifecycleDay: time.Duration(cfg.LifecycleDay)},
		store.New(meta), verifier, log)
	if err := s.instrument(); err != nil {
		return nil, err
	}
	if err := registerRuntimeMetrics(s.metrics.Registry(), s.rt.pinMetrics, s.rt.gov.Metrics()); err != nil {
		return nil, err
	}
	if err := registerPinMetrics(s.metrics.Registry(), s.rt.pinMetrics, s.rt.rowMetrics); err != nil {
		return nil, err
	}
	if cfg.DatabaseURL != "" {
		s.gcMetrics = &gc.Metrics{}
		if err := registerGCMetrics(s.metrics.Registry(), s.gcMetrics); err != nil {
			return nil, err
		}
	}
	s.lcMetrics = &lifecycle.Metrics{}
	if err := registerLifecycleMetrics(s.metrics.Registry(), s.lcMetrics); err != nil {
		return nil, err
	}
	s.started.Store(true)
	return s, nil
}

func (s *Server) openPG(ctx context.Context) error {
	cfg := s.cfg
	dbURL, err := poolURL(cfg)
	if err != nil {
		return fmt.Errorf("%sDATABASE_URL: %w", config.Prefix, err)
	}
	var pins fleet.Pinner // none on a replica: the primary's GC cannot see its locks (ADR 013)
	if s.readOnly {
		if dbURL, err = s.openReplica(ctx, dbURL); err != nil {
			return err
		}
	} else {
		if err := pg.Migrate(ctx, cfg.DirectURL()); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if err := s.openSessionPins(); err != nil {
			return err
		}
		pins = s.rt.sessPins
	}
	var media *localfs.Media
	if cfg.LargeEngine == config.EngineLocal {
		media, err = localfs.Open(cfg.DataDir, false)
		if err != nil {
			return fmt.Errorf("%sDATA_DIR: %w", config.Prefix, err)
		}
	}
	// A replica writes nothing, registrations included: it serves reads
	// beside the fleet without joining it (ADR 013).
	if cfg.Fleet && !s.readOnly { // the instance id exists before the engine that may use it
		if err := s.register(ctx); err != nil {
			return err
		}
	}
	pgCfg := pg.Config{
		DatabaseURL: dbURL,
		InlineMax:   int(cfg.InlineMax),
		Large:       cfg.LargeEngine,
		Media:       media,
		Region:      cfg.Region,
		SkipMigrate: true, // migrated above, without the pool options in the URL
		Pins:        pins,
		Governor:    s.rt.gov,
		ReadLanes:   cfg.ReadLanes,
	}
	if pgCfg.ObserveReadBatch, err = registerReadBatchMetrics(s.metrics.Registry()); err != nil {
		return err
	}
	if cfg.ReadLanes == 0 {
		pgCfg.ReadLanes = -1 // off: every read alone
	}
	pgCfg.RowPins, pgCfg.ReadRowPins = s.rowPins()
	eng, err := pg.Open(ctx, pgCfg)
	if err != nil {
		return fmt.Errorf("open metadata engine: %w", err)
	}
	s.engine, s.media = eng, media
	s.onClose("close database pool", func() error { eng.Close(); return nil })
	if cfg.Fleet && !s.readOnly && media != nil {
		if err := s.probeSharedMedia(ctx, eng); err != nil {
			return err
		}
	}
	// The generated pair is kept in the database, shared by every instance.
	if s.readOnly {
		s.RootKey, err = replicaRootKey(ctx, cfg, eng)
	} else {
		s.RootKey, err = LoadRootKey(ctx, cfg, eng)
	}
	if err != nil {
		return fmt.Errorf("root key: %w", err)
	}
	return nil
}

// withPoolSize sets pool_max_conns on the URL unless the operator set it.
func withPoolSize(dbURL string, n int) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", errors.New("must start with postgres://")
	}
	q := u.Query()
	if q.Get("pool_max_conns") == "" {
		q.Set("pool_max_conns", strconv.Itoa(n))
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Handler is the S3 API handler, instrumented with the request metrics.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve answers S3 requests on ln until ctx is cancelled or the writer claim
// is lost, then stops accepting and lets in-flight requests finish. The whole
// shutdown — this drain, the GC stop here, and the caller's ServeMetrics stop
// and Close after it — ends within the drain timeout (shutdown.go). After a
// lost claim Serve returns ErrClaimLost (joined with a drain error, if any).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// Requests outlive ctx (a graceful drain lets them finish) but not
		// CancelWork.
		BaseContext: func(net.Listener) context.Context { return s.work },
	}
	var open openRequests // for the drain's log lines
	hs.ConnState = open.track
	// Beyond MAX_CONNS a connection is answered 503 SlowDown, not queued.
	ln = newLimitListener(ln, s.cfg.MaxClientConns, s.cfg.TLSCertFile == "")
	gcCtx, stopGC := context.WithCancel(ctx)
	defer stopGC()
	gcDone := s.startGC(gcCtx)
	lcDone := s.startLifecycle(gcCtx)
	errc := make(chan error, 1)
	go func() {
		if s.cfg.TLSCertFile != "" {
			errc <- hs.ServeTLS(ln, s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	var err error
	select {
	case serr := <-errc:
		err = fmt.Errorf("serve: %w", serr)
	case <-ctx.Done():
	case <-s.lostClaim():
	}
	end := s.startShutdown()
	s.draining.Store(true)
	stopGC()
	if err == nil {
		d := time.Duration(s.cfg.DrainTimeout)
		drain, cancel := context.WithDeadline(context.Background(), end.Add(-d/afterDrainShare))
		start := time.Now()
		s.log.Info("drain started: no new connections; waiting for the open requests",
			"open_requests", open.count(), "drain_timeout", d)
		if derr := hs.Shutdown(drain); derr != nil {
			s.log.Warn("drain cut short at the deadline", "open_requests", open.count(), "took", time.Since(start).Round(time.Millisecond))
			err = errors.Join(fmt.Errorf("drain: %w", derr), hs.Close())
		} else {
			s.log.Info("drain done", "open_requests", open.count(), "took", time.Since(start).Round(time.Millisecond))
		}
		cancel()
	}
	s.within(end, "stop online GC", func() error { <-gcDone; return nil })
	s.within(end, "stop the lifecycle runner", func() error { <-lcDone; return nil })
	select {
	case <-s.lostClaim():
		if err == nil {
			return ErrClaimLost
		}
		return errors.Join(ErrClaimLost, err)
	default:
		return err
	}
}

// CancelWork cancels every in-flight request and background job at once: the
// instance lost what entitled it to work (its ownership claim). Serve then
// drains what is left within the drain timeout.
func (s *Server) CancelWork() { s.cancelWork() }

// Close cancels what still runs and releases the engines, the pin session and
// the writer claim, within what is left of the shutdown budget (the drain
// timeout from now if Serve did not start one). Call it after Serve returned.
func (s *Server) Close() {
	s.cancelWork()
	s.release(s.deadline(time.Duration(s.cfg.DrainTimeout)))
}
