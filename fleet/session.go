package fleet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Session errors. Errors of a lost session wrap ErrSessionLost and the cause.
var (
	ErrSessionLost   = errors.New("session lost")
	ErrSessionClosed = errors.New("session closed")
	ErrWindowExpired = errors.New("no successful check within the validity window")
)

// Session is one dedicated PostgreSQL connection with a liveness checker. See
// the package documentation for its validity rules. All its methods are safe
// for concurrent use.
type Session struct {
	cfg   SessionConfig
	clock Clock
	conn  *pgx.Conn
	raw   net.Conn // the socket under conn (under TLS, if any)
	pid   uint32
	base  time.Time // lastGood is measured from here

	// opSem serializes use of conn (a pgx.Conn is not concurrency-safe); it is a
	// channel so that waiting for it can honour a context.
	opSem chan struct{}

	lastGood atomic.Int64 // send time of the last good check, ns since base
	lost     atomic.Bool
	lostCh   chan struct{}
	lostOnce sync.Once
	err      error // cause of loss; written once before lostCh closes

	handles atomic.Int64

	stopChecker context.CancelFunc
	checkerDone chan struct{}
	closeOnce   sync.Once
	closeErr    error
}

// OpenSession validates cfg, connects, confirms the backend's identity with
// pg_backend_pid() and that the server applied idle_session_timeout, and starts
// the checker.
func OpenSession(ctx context.Context, cfg SessionConfig) (*Session, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pcfg, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("session %s: parse database URL: %w", cfg.Role, err)
	}
	rp := pcfg.RuntimeParams
	rp["application_name"] = cfg.Role
	rp["idle_session_timeout"] = strconv.FormatInt(cfg.IdleSessionTimeout.Milliseconds(), 10)
	rp["tcp_keepalives_idle"] = strconv.FormatInt(int64(cfg.KeepaliveIdle/time.Second), 10)
	rp["tcp_keepalives_interval"] = strconv.FormatInt(int64(cfg.KeepaliveInterval/time.Second), 10)
	rp["tcp_keepalives_count"] = strconv.Itoa(cfg.KeepaliveCount)
	rp["tcp_user_timeout"] = strconv.FormatInt(cfg.TCPUserTimeout.Milliseconds(), 10)
	pcfg.DialFunc = cfg.dialFunc()
	pcfg.ConnectTimeout = cfg.ConnectTimeout

	cctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("session %s: connect: %w", cfg.Role, err)
	}
	raw := conn.PgConn().Conn()
	if tc, ok := raw.(*tls.Conn); ok {
		// Destroy the TCP socket itself: tls.Conn.Close would first try to send
		// close_notify to a possibly partitioned server.
		raw = tc.NetConn()
	}
	s := &Session{
		cfg:         cfg,
		clock:       cfg.Clock,
		conn:        conn,
		raw:         raw,
		pid:         conn.PgConn().PID(),
		opSem:       make(chan struct{}, 1),
		lostCh:      make(chan struct{}),
		checkerDone: make(chan struct{}),
	}
	s.base = s.clock.Now()
	if err := s.confirm(); err != nil {
		_ = raw.Close() // the session never became usable; the confirm error says why
		return nil, err
	}
	cfg.Metrics.SessionsOpened.Add(1)
	cctx2, stop := context.WithCancel(context.Background())
	s.stopChecker = stop
	if cfg.manualChecks {
		close(s.checkerDone)
	} else {
		go s.checker(cctx2)
	}
	return s, nil
}

// confirm is the first check: identity and settings. Its send time starts the
// validity window.
func (s *Session) confirm() error {
	qctx, cancel := context.WithTimeout(context.Background(), s.cfg.CheckTimeout)
	defer cancel()
	sent := s.clock.Now()
	var pid uint32
	var idleMS int64
	err := s.conn.QueryRow(qctx,
		`SELECT pg_backend_pid(), (SELECT setting::bigint FROM pg_settings WHERE name = 'idle_session_timeout')`,
	).Scan(&pid, &idleMS)
	if err != nil {
		return fmt.Errorf("session %s: confirm identity: %w", s.cfg.Role, err)
	}
	// A different pid means something between us and the backend (a pooling
	// proxy) answered: session locks would not be ours.
	if pid != s.pid {
		return fmt.Errorf("session %s: pg_backend_pid() %d differs from the connection's backend %d: "+
			"a pooling proxy in between? session advisory locks need a direct session", s.cfg.Role, pid, s.pid)
	}
	if want := s.cfg.IdleSessionTimeout.Milliseconds(); idleMS != want {
		return fmt.Errorf("session %s: %w: server reports idle_session_timeout %d ms, want %d ms",
			s.cfg.Role, ErrUnsafeSettings, idleMS, want)
	}
	s.lastGood.Store(int64(sent.Sub(s.base)))
	return nil
}

// Role is the session's application_name.
func (s *Session) Role() string { return s.cfg.Role }

// BackendPID is the server process of the session (for pg_stat_activity and
// pg_terminate_backend).
func (s *Session) BackendPID() uint32 { return s.pid }

// Lost is closed when the session is lost or closed.
func (s *Session) Lost() <-chan struct{} { return s.lostCh }

// Err is nil while the session is usable, and afterwards an error wrapping
// ErrSessionLost and the cause.
func (s *Session) Err() error {
	if !s.lost.Load() {
		return nil
	}
	<-s.lostCh // err is written before lostCh closes
	return s.err
}

// Valid reports whether the session is usable: not lost, and the last good
// check was sent less than Window ago. Once false it stays false.
func (s *Session) Valid() bool {
	if s.lost.Load() {
		return false
	}
	if s.clock.Now().Sub(s.base)-time.Duration(s.lastGood.Load()) >= s.cfg.Window {
		s.fail(ErrWindowExpired)
		return false
	}
	return true
}

// fail marks the session lost (once) and destroys its transport, which makes
// the server release the session's locks.
func (s *Session) fail(cause error) {
	s.lostOnce.Do(func() {
		s.err = fmt.Errorf("session %s (backend %d): %w: %w", s.cfg.Role, s.pid, ErrSessionLost, cause)
		s.lost.Store(true)
		close(s.lostCh)
		if !errors.Is(cause, ErrSessionClosed) {
			s.cfg.Metrics.Losses.Add(1)
		}
		// The only possible error is "already closed" (pgx may have closed it
		// after a failed statement): either way the socket is gone.
		_ = s.raw.Close()
	})
}

// checker sends a check every CheckInterval (after the previous one answered,
// so checks never queue) until the session is lost or closed.
func (s *Session) checker(ctx context.Context) {
	defer close(s.checkerDone)
	t := time.NewTimer(s.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.lostCh:
			return
		case <-t.C:
		}
		if err := s.Check(ctx); err != nil {
			return
		}
		t.Reset(s.cfg.CheckInterval)
	}
}

// Check sends one liveness check now. Any failure, a timeout included, is a
// loss of the session. ctx bounds only the wait for the connection.
func (s *Session) Check(ctx context.Context) error {
	if !s.Valid() {
		return s.Err()
	}
	return s.exec(ctx, func(qctx context.Context, conn *pgx.Conn) error {
		sent := s.clock.Now()
		if s.cfg.beforeCheckQuery != nil {
			s.cfg.beforeCheckQuery()
		}
		s.cfg.Metrics.Checks.Add(1)
		var pid uint32
		if err := conn.QueryRow(qctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			s.cfg.Metrics.CheckFailures.Add(1)
			s.fail(fmt.Errorf("check: %w", err))
			return s.Err()
		}
		if pid != s.pid {
			s.cfg.Metrics.CheckFailures.Add(1)
			s.fail(fmt.Errorf("check: backend pid %d, want %d", pid, s.pid))
			return s.Err()
		}
		// No revival: if the window ran out while the check was in flight, the
		// server may already have released our locks.
		if !s.Valid() {
			return s.Err()
		}
		good := int64(sent.Sub(s.base))
		for {
			old := s.lastGood.Load()
			if good <= old || s.lastGood.CompareAndSwap(old, good) {
				return nil
			}
		}
	})
}

// exec runs fn with exclusive use of the connection. ctx bounds only the wait
// for the connection: the statement gets its own CheckTimeout deadline from
// context.Background, because pgx closes a connection whose context ends
// mid-statement, and one caller's cancellation must not kill everyone's pins.
// A broken connection after fn is a loss.
func (s *Session) exec(ctx context.Context, fn func(qctx context.Context, conn *pgx.Conn) error) error {
	select {
	case s.opSem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("session %s: wait for connection: %w", s.cfg.Role, ctx.Err())
	case <-s.lostCh:
		return s.Err()
	}
	defer func() { <-s.opSem }()
	if s.lost.Load() {
		return s.Err()
	}
	qctx, cancel := context.WithTimeout(context.Background(), s.cfg.CheckTimeout)
	defer cancel()
	err := fn(qctx, s.conn)
	if err != nil && !s.lost.Load() {
		var pgErr *pgconn.PgError
		if s.conn.IsClosed() || !errors.As(err, &pgErr) {
			// Not a clean server error: the statement's effect is unknown.
			s.fail(err)
			return s.Err()
		}
	}
	return err
}

// Hold registers a handle on the session; it fails once the session is lost.
func (s *Session) Hold() (*Handle, error) {
	s.handles.Add(1)
	if !s.Valid() {
		s.handles.Add(-1)
		return nil, s.Err()
	}
	return &Handle{s: s}, nil
}

// Handles is the number of unreleased handles.
func (s *Session) Handles() int64 { return s.handles.Load() }

// Close removes the session: it marks it lost, destroys the socket at once (a
// graceful Terminate to a partitioned server could wait forever), stops the
// checker and lets pgx tidy up. Statements in flight fail. Idempotent.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.fail(ErrSessionClosed)
		s.stopChecker()
		<-s.checkerDone
		s.opSem <- struct{}{} // in-flight statements end now that the socket is closed
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.conn.Close(ctx)
		cancel()
		<-s.opSem
		if err != nil && !errors.Is(err, net.ErrClosed) {
			s.closeErr = fmt.Errorf("session %s: close: %w", s.cfg.Role, err)
		}
	})
	return s.closeErr
}

// Handle is one protection taken on a Session (a pin's lock, the ownership
// claim). It is valid while the session is and until released; it is never
// moved to another session.
type Handle struct {
	s        *Session
	released atomic.Bool
}

// Valid reports whether the handle is unreleased and its session valid.
func (h *Handle) Valid() bool { return !h.released.Load() && h.s.Valid() }

// Session is the session the handle belongs to.
func (h *Handle) Session() *Session { return h.s }

// Release gives the handle back; later calls do nothing.
func (h *Handle) Release() {
	if h.released.CompareAndSwap(false, true) {
		h.s.handles.Add(-1)
	}
}
