package fleet

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	base := SessionConfig{DSN: "postgres://x/y", Role: "s3gate-test"}
	tests := []struct {
		name   string
		mutate func(*SessionConfig)
		ok     bool
	}{
		{"defaults", func(*SessionConfig) {}, true},
		{"idle timeout below window+margin", func(c *SessionConfig) { c.IdleSessionTimeout = 9 * time.Second }, false},
		{"measured-fast keepalives 2/1/3", func(c *SessionConfig) {
			c.KeepaliveIdle, c.KeepaliveInterval, c.KeepaliveCount = 2*time.Second, time.Second, 3
		}, false},
		{"short tcp user timeout", func(c *SessionConfig) { c.TCPUserTimeout = 5 * time.Second }, false},
		{"release in hours", func(c *SessionConfig) {
			c.IdleSessionTimeout, c.TCPUserTimeout, c.KeepaliveIdle = 2*time.Hour, 2*time.Hour, time.Hour
		}, false},
		{"check cadence breaks window", func(c *SessionConfig) { c.CheckInterval = 7 * time.Second }, false},
		{"fractional keepalive", func(c *SessionConfig) { c.KeepaliveIdle = 5500 * time.Millisecond }, false},
		{"negative", func(c *SessionConfig) { c.Margin = -time.Second }, false},
		{"no role", func(c *SessionConfig) { c.Role = "" }, false},
		{"larger window, larger timeouts", func(c *SessionConfig) {
			c.Window, c.IdleSessionTimeout, c.TCPUserTimeout, c.KeepaliveIdle = 20*time.Second, 30*time.Second, 30*time.Second, 20*time.Second
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mutate(&c)
			err := c.withDefaults().validate()
			if (err == nil) != tc.ok {
				t.Fatalf("validate: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && tc.name != "no role" && !errors.Is(err, ErrUnsafeSettings) {
				t.Errorf("error does not wrap ErrUnsafeSettings: %v", err)
			}
		})
	}
	// OpenSession refuses before connecting (the DSN points nowhere).
	bad := base
	bad.IdleSessionTimeout = 5 * time.Second
	if _, err := OpenSession(context.Background(), bad); !errors.Is(err, ErrUnsafeSettings) {
		t.Errorf("OpenSession with unsafe settings: %v", err)
	}
}

func TestSessionIdentityAndSettings(t *testing.T) {
	dsn := pgtestDSN(t)
	s, err := OpenSession(tctx(t), manualCfg(dsn, "s3gate-pins", newFakeClock()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	adm := admin(t, dsn)
	var app string
	if err := adm.QueryRow(tctx(t), `SELECT application_name FROM pg_stat_activity WHERE pid = $1`, int32(s.BackendPID())).Scan(&app); err != nil {
		t.Fatal(err)
	}
	if app != "s3gate-pins" {
		t.Errorf("application_name %q", app)
	}
	want := map[string]string{
		"idle_session_timeout": "12s", "tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2",
		"tcp_keepalives_count": "3", "tcp_user_timeout": "11000",
	}
	for name, w := range want {
		var got string
		err := s.exec(tctx(t), func(qctx context.Context, conn *pgxConn) error {
			return conn.QueryRow(qctx, `SELECT current_setting($1)`, name).Scan(&got)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
	}
	if err := s.Check(tctx(t)); err != nil {
		t.Errorf("check: %v", err)
	}
}

// The window is measured from the send time of the last good check, handles die
// exactly when it runs out, and a later successful check never revives them.
func TestWindowDeterministic(t *testing.T) {
	dsn := pgtestDSN(t)
	clk := newFakeClock()
	cfg := manualCfg(dsn, "s3gate-pins", clk)
	var slow time.Duration // simulated round trip of the next check
	cfg.beforeCheckQuery = func() { clk.Advance(slow) }
	s, err := OpenSession(tctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.Hold()
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		advance   time.Duration
		check     bool
		slow      time.Duration
		wantValid bool
	}{
		{7*time.Second + 999*time.Millisecond, false, 0, true}, // t=7.999 after open's check
		{0, true, 0, true}, // good check sent at 7.999
		{1*time.Second + time.Millisecond, false, 0, true},     // t=9
		{0, true, 5 * time.Second, true},                       // sent at 9, answered at 14
		{2*time.Second + 999*time.Millisecond, false, 0, true}, // t=16.999: 7.999 after the send
		{time.Millisecond, false, 0, false},                    // t=17: 8 s after the send, 3 s after the answer
		{0, true, 0, false},                                    // a check now must not revive it
	}
	for i, st := range steps {
		clk.Advance(st.advance)
		if st.check {
			slow = st.slow
			err := s.Check(tctx(t))
			if st.wantValid && err != nil {
				t.Fatalf("step %d: check: %v", i, err)
			}
			if !st.wantValid && !errors.Is(err, ErrSessionLost) {
				t.Fatalf("step %d: check after expiry: %v, want ErrSessionLost", i, err)
			}
		}
		if got := h.Valid(); got != st.wantValid {
			t.Fatalf("step %d: handle valid %v, want %v", i, got, st.wantValid)
		}
	}
	if !errors.Is(s.Err(), ErrWindowExpired) {
		t.Errorf("Err() = %v, want ErrWindowExpired", s.Err())
	}
	waitClosed(t, s.Lost(), "Lost")
	if _, err := s.Hold(); !errors.Is(err, ErrSessionLost) {
		t.Errorf("Hold on a lost session: %v", err)
	}
	// Expiry destroyed the transport: the backend is gone.
	adm := admin(t, dsn)
	waitGone(t, adm, s.BackendPID())
}

// A check that is sent inside the window but answered after it ran out does
// not count: the server may have released the locks meanwhile.
func TestCheckAnsweredAfterWindow(t *testing.T) {
	dsn := pgtestDSN(t)
	clk := newFakeClock()
	cfg := manualCfg(dsn, "s3gate-pins", clk)
	cfg.beforeCheckQuery = func() { clk.Advance(2 * time.Second) }
	s, err := OpenSession(tctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clk.Advance(7 * time.Second)
	if err := s.Check(tctx(t)); !errors.Is(err, ErrWindowExpired) {
		t.Fatalf("check sent at 7 s, answered at 9 s: %v, want ErrWindowExpired", err)
	}
	if s.Valid() {
		t.Error("session valid")
	}
}

// waitGone waits until the backend has left pg_stat_activity.
func waitGone(t *testing.T, adm *pgxConn, pid uint32) {
	t.Helper()
	for i := 0; ; i++ {
		var n int
		if err := adm.QueryRow(tctx(t), `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, int32(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if i > 300 {
			t.Fatalf("backend %d still present", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTerminateBackendIsLoss(t *testing.T) {
	dsn := pgtestDSN(t)
	adm := admin(t, dsn)
	t.Run("next check", func(t *testing.T) {
		clk := newFakeClock()
		s, err := OpenSession(tctx(t), manualCfg(dsn, "s3gate-pins", clk))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		h, err := s.Hold()
		if err != nil {
			t.Fatal(err)
		}
		terminate(t, adm, s.BackendPID())
		clk.Advance(time.Second) // well inside the window: only the check can tell
		if err := s.Check(tctx(t)); !errors.Is(err, ErrSessionLost) {
			t.Fatalf("check after terminate: %v", err)
		}
		if h.Valid() {
			t.Error("handle valid after the failed check")
		}
		if n := s.cfg.Metrics.Losses.Load(); n != 1 {
			t.Errorf("losses %d, want 1", n)
		}
	})
	t.Run("checker goroutine", func(t *testing.T) {
		s, err := OpenSession(tctx(t), fastCfg(dsn, "s3gate-pins"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		h, err := s.Hold()
		if err != nil {
			t.Fatal(err)
		}
		terminate(t, adm, s.BackendPID())
		waitClosed(t, s.Lost(), "loss after pg_terminate_backend")
		if h.Valid() {
			t.Error("handle valid after loss")
		}
		if !errors.Is(s.Err(), ErrSessionLost) || errors.Is(s.Err(), ErrWindowExpired) {
			t.Errorf("Err() = %v: want a failed check, not an expired window", s.Err())
		}
		if s.cfg.Metrics.Checks.Load() == 0 || s.cfg.Metrics.CheckFailures.Load() != 1 {
			t.Errorf("checks %d, failures %d", s.cfg.Metrics.Checks.Load(), s.cfg.Metrics.CheckFailures.Load())
		}
	})
}

// A check that times out is a loss at once, long before the window ends.
func TestTimedOutCheckIsLoss(t *testing.T) {
	dsn := pgtestDSN(t)
	px := startProxy(t, proxyTarget(t, dsn))
	cfg := manualCfg(px.DSN(t, dsn), "s3gate-pins", newFakeClock())
	cfg.CheckTimeout = 300 * time.Millisecond
	s, err := OpenSession(tctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.Hold()
	if err != nil {
		t.Fatal(err)
	}
	px.Blackhole()
	if err := s.Check(tctx(t)); !errors.Is(err, ErrSessionLost) {
		t.Fatalf("check through a blackhole: %v", err)
	}
	if h.Valid() {
		t.Error("handle valid after a timed-out check")
	}
	waitClosed(t, px.Pair(0).clientClosed, "transport destroyed after the timed-out check")
}

// Close of a session whose server is partitioned destroys the socket instead of
// waiting for the server: a statement in flight ends, Close returns, and the
// proxy sees the client side closed.
func TestCloseBlackholed(t *testing.T) {
	dsn := pgtestDSN(t)
	px := startProxy(t, proxyTarget(t, dsn))
	// A check that would wait for an hour, and settings consistent with it.
	cfg := manualCfg(px.DSN(t, dsn), "s3gate-pins", newFakeClock())
	cfg.CheckTimeout, cfg.CheckInterval = time.Hour, time.Hour
	cfg.Window, cfg.Margin = 3*time.Hour, time.Hour
	cfg.IdleSessionTimeout, cfg.TCPUserTimeout, cfg.KeepaliveIdle = 5*time.Hour, 5*time.Hour, 5*time.Hour
	cfg.MaxRelease = 10 * time.Hour
	s, err := OpenSession(tctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	pair := px.Pair(0)
	px.Blackhole()
	checkDone := make(chan error, 1)
	go func() { checkDone <- s.Check(context.Background()) }()
	waitClosed(t, pair.droppedSignal, "check sent into the blackhole")

	closed := make(chan struct{})
	var closeErr error
	go func() { closeErr = s.Close(); close(closed) }()
	// A bound that only a hang can break (the check alone would wait an hour).
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close blocked on a blackholed connection")
	}
	if closeErr != nil {
		t.Errorf("Close: %v", closeErr)
	}
	select {
	case err := <-checkDone:
		if !errors.Is(err, ErrSessionLost) {
			t.Errorf("in-flight check ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight check still blocked after Close")
	}
	waitClosed(t, pair.clientClosed, "client socket closed")
	if !errors.Is(s.Err(), ErrSessionClosed) {
		t.Errorf("Err() = %v, want ErrSessionClosed", s.Err())
	}
	if n := cfg.Metrics.Losses.Load(); n != 0 {
		t.Errorf("a deliberate Close counted as %d loss(es)", n)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestKeys(t *testing.T) {
	// Golden values: GC and pins of different versions must agree on keys.
	for _, g := range []struct{ got, want int64 }{
		{BlobLockKey(1), 8649144570545339768},
		{BlobLockKey(-5), 1083923059544057412},
		{OwnerLockKey(), -3390009251700294281},
	} {
		if g.got != g.want {
			t.Errorf("key %d, want %d", g.got, g.want)
		}
	}
	seen := map[int64]int64{OwnerLockKey(): -1}
	for id := int64(0); id < 20000; id++ {
		k := BlobLockKey(id)
		if prev, dup := seen[k]; dup {
			t.Fatalf("key collision: blob %d and %d", id, prev)
		}
		seen[k] = id
	}
	if LockKey("a", "b/c") == LockKey("a/b", "c") || LockKey("a", "bc") == LockKey("a", "b", "c") {
		t.Error("part boundaries do not separate keys")
	}
}
