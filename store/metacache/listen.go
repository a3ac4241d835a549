package metacache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ApplicationName names the notification session in pg_stat_activity.
const ApplicationName = "s3gate metadata cache"

// Timings of Listen.
const (
	// pingEvery: a session idle this long is pinged, so that a connection
	// that died without a word (no FIN, no error) turns the cache off within
	// pingEvery + pingTimeout instead of at TCP's keepalive.
	pingEvery   = 5 * time.Second
	pingTimeout = 2 * time.Second
	// retryEvery spaces reconnection attempts; the cache is off meanwhile.
	retryEvery  = time.Second
	dialTimeout = 10 * time.Second
)

// Listen keeps c on while a LISTEN session on dsn is up, until ctx ends:
// it connects (a dedicated session, never a pool's: a transaction-pooling
// proxy would hand LISTEN's session to someone else), LISTENs on Channel,
// turns c on, and applies every notification. When the session fails, c
// turns off (emptied) and Listen reconnects. It returns when ctx ends, with
// c off.
func Listen(ctx context.Context, dsn string, c *Cache, log *slog.Logger) {
	defer c.SetOff()
	for ctx.Err() == nil {
		err := listenOnce(ctx, dsn, c)
		wasOn := c.On()
		c.SetOff()
		if ctx.Err() != nil {
			return
		}
		if wasOn { // once per outage, not once per attempt
			log.Warn("metadata cache off: the notification session failed; reconnecting", "err", err)
		} else {
			log.Debug("metadata cache: cannot listen yet", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(retryEvery):
		}
	}
}

// listenOnce runs one session: it returns why it ended.
func listenOnce(ctx context.Context, dsn string, c *Cache) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("listen: database URL: %w", err)
	}
	cfg.RuntimeParams["application_name"] = ApplicationName
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	conn, err := pgx.ConnectConfig(dctx, cfg)
	if err == nil {
		_, err = conn.Exec(dctx, "LISTEN "+Channel)
	}
	cancel()
	if conn != nil {
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
			defer cancel()
			_ = conn.Close(cctx) // the session is given up: nothing to keep
		}()
	}
	if err != nil {
		return fmt.Errorf("listen on %s: %w", Channel, err)
	}
	// From here every commit notifies this session: entries filled from now
	// on will be dropped by the notification of any later change.
	c.SetOn()
	for {
		wctx, cancel := context.WithTimeout(ctx, pingEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil && strings.HasPrefix(n.Payload, syncPrefix):
			if err := answer(ctx, conn, strings.TrimPrefix(n.Payload, syncPrefix)); err != nil {
				return err
			}
		case err == nil:
			c.notified(n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping the notification session: %w", err)
			}
		default:
			return fmt.Errorf("wait for notifications: %w", err)
		}
	}
}
