package fleet

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of SessionConfig (ADR 0043 and design §3 hazards).
const (
	DefaultCheckInterval      = 2 * time.Second
	DefaultCheckTimeout       = 2 * time.Second
	DefaultWindow             = 8 * time.Second
	DefaultMargin             = 2 * time.Second
	DefaultIdleSessionTimeout = 12 * time.Second
	DefaultKeepaliveIdle      = 5 * time.Second
	DefaultKeepaliveInterval  = 2 * time.Second
	DefaultKeepaliveCount     = 3
	DefaultTCPUserTimeout     = 11 * time.Second
	DefaultMaxRelease         = 60 * time.Second
	DefaultConnectTimeout     = 10 * time.Second
)

// ErrUnsafeSettings is wrapped by OpenSession's error when the session settings
// would let the server release the session (and its locks) before the client
// stops trusting it, or never in reasonable time.
var ErrUnsafeSettings = errors.New("unsafe session settings")

// SessionConfig configures a Session. Zero durations take the defaults above.
type SessionConfig struct {
	// DSN is the PostgreSQL URL or keyword/value string.
	DSN string
	// Role becomes the session's application_name (e.g. "s3gate-pins"), so that
	// operators find it in pg_stat_activity.
	Role string

	// CheckInterval is the pause between liveness checks; CheckTimeout bounds
	// each check and every other statement on the session.
	CheckInterval time.Duration
	CheckTimeout  time.Duration
	// Window: handles are valid only while the last successful check was sent
	// less than Window ago.
	Window time.Duration
	// Margin is how much later than Window the server may release the session
	// at the earliest.
	Margin time.Duration

	// IdleSessionTimeout is the session's idle_session_timeout: the server ends
	// the session (releasing its locks) after this long without a statement.
	IdleSessionTimeout time.Duration
	// KeepaliveIdle/Interval/Count are the TCP keepalives of both ends (client
	// socket options and the server's tcp_keepalives_*); whole seconds.
	KeepaliveIdle     time.Duration
	KeepaliveInterval time.Duration
	KeepaliveCount    int
	// TCPUserTimeout is TCP_USER_TIMEOUT on the client socket and the server's
	// tcp_user_timeout: unacknowledged data older than this kills the socket.
	TCPUserTimeout time.Duration
	// MaxRelease bounds the fastest server-side release from above: a partitioned
	// session must not keep its locks (and stall GC) for hours.
	MaxRelease time.Duration
	// ConnectTimeout bounds opening the session.
	ConnectTimeout time.Duration

	// Clock defaults to RealClock.
	Clock Clock
	// Metrics, if nil, is a private Metrics.
	Metrics *Metrics

	// manualChecks disables the checker goroutine (tests drive Check).
	manualChecks bool
	// beforeCheckQuery runs between taking a check's send time and sending it
	// (tests simulate a slow round trip with it).
	beforeCheckQuery func()
}

func (c SessionConfig) withDefaults() SessionConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.CheckInterval, DefaultCheckInterval)
	def(&c.CheckTimeout, DefaultCheckTimeout)
	def(&c.Window, DefaultWindow)
	def(&c.Margin, DefaultMargin)
	def(&c.IdleSessionTimeout, DefaultIdleSessionTimeout)
	def(&c.KeepaliveIdle, DefaultKeepaliveIdle)
	def(&c.KeepaliveInterval, DefaultKeepaliveInterval)
	def(&c.TCPUserTimeout, DefaultTCPUserTimeout)
	def(&c.MaxRelease, DefaultMaxRelease)
	def(&c.ConnectTimeout, DefaultConnectTimeout)
	if c.KeepaliveCount == 0 {
		c.KeepaliveCount = DefaultKeepaliveCount
	}
	if c.Clock == nil {
		c.Clock = RealClock
	}
	if c.Metrics == nil {
		c.Metrics = new(Metrics)
	}
	return c
}

// serverRelease is the earliest time after the last traffic at which the server
// may drop a partitioned session: idle_session_timeout, keepalives giving up, or
// its unacknowledged reply hitting tcp_user_timeout.
func (c SessionConfig) serverRelease() time.Duration {
	r := c.IdleSessionTimeout
	if ka := c.KeepaliveIdle + c.KeepaliveInterval*time.Duration(c.KeepaliveCount); ka < r {
		r = ka
	}
	if c.TCPUserTimeout < r {
		r = c.TCPUserTimeout
	}
	return r
}

// validate checks a config that has its defaults applied.
func (c SessionConfig) validate() error {
	switch {
	case c.DSN == "":
		return errors.New("session: no database URL")
	case c.Role == "":
		return errors.New("session: no role (application_name)")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"check interval", c.CheckInterval}, {"check timeout", c.CheckTimeout},
		{"window", c.Window}, {"margin", c.Margin},
		{"idle_session_timeout", c.IdleSessionTimeout}, {"keepalive idle", c.KeepaliveIdle},
		{"keepalive interval", c.KeepaliveInterval}, {"tcp user timeout", c.TCPUserTimeout},
		{"max release", c.MaxRelease}, {"connect timeout", c.ConnectTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("session %s: %w: negative %s %s", c.Role, ErrUnsafeSettings, d.name, d.v)
		}
	}
	if c.KeepaliveCount < 0 {
		return fmt.Errorf("session %s: %w: negative keepalive count", c.Role, ErrUnsafeSettings)
	}
	if c.KeepaliveIdle%time.Second != 0 || c.KeepaliveInterval%time.Second != 0 {
		return fmt.Errorf("session %s: %w: keepalive idle/interval must be whole seconds (PostgreSQL's unit)", c.Role, ErrUnsafeSettings)
	}
	// A healthy session must stay valid: the worst spacing of two good sends is
	// one interval plus one (slow but successful) check.
	if c.CheckInterval+c.CheckTimeout >= c.Window {
		return fmt.Errorf("session %s: %w: check interval %s + timeout %s must be shorter than the window %s",
			c.Role, ErrUnsafeSettings, c.CheckInterval, c.CheckTimeout, c.Window)
	}
	if rel := c.serverRelease(); rel < c.Window+c.Margin {
		return fmt.Errorf("session %s: %w: the server could release the session after %s "+
			"(min of idle_session_timeout %s, keepalives %s/%s/%d, tcp_user_timeout %s), "+
			"sooner than the validity window %s plus margin %s",
			c.Role, ErrUnsafeSettings, rel, c.IdleSessionTimeout, c.KeepaliveIdle, c.KeepaliveInterval,
			c.KeepaliveCount, c.TCPUserTimeout, c.Window, c.Margin)
	} else if rel > c.MaxRelease {
		return fmt.Errorf("session %s: %w: a partitioned session would keep its locks for %s, more than %s",
			c.Role, ErrUnsafeSettings, rel, c.MaxRelease)
	}
	return nil
}
