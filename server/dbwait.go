package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/s3gate/s3gate/config"
)

// Backoff of the start-up wait for PostgreSQL.
const (
	dbWaitFirst   = 250 * time.Millisecond
	dbWaitMax     = 5 * time.Second
	dbWaitAttempt = 5 * time.Second // deadline of one connection attempt
)

// WaitForDatabase waits, with backoff, up to cfg.DBWait for PostgreSQL to
// accept a connection, logging each wait once with its next delay: a gateway
// started with (or before) its database serves without a supervisor. Errors
// that waiting cannot cure (a bad URL, wrong password, no such database) fail
// at once. The error is one line naming DATABASE_URL.
func WaitForDatabase(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if cfg.DatabaseURL == "" {
		return nil
	}
	pcfg, err := pgx.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("%sDATABASE_URL: %w", config.Prefix, err)
	}
	start := time.Now()
	deadline := start.Add(time.Duration(cfg.DBWait))
	delay := dbWaitFirst
	for attempt := 1; ; attempt++ {
		err := tryConnect(ctx, pcfg)
		if err == nil {
			if attempt > 1 {
				log.Info("PostgreSQL is up", "waited", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if !transient(err) {
			return fmt.Errorf("%sDATABASE_URL: cannot connect to PostgreSQL at %s:%d: %w", config.Prefix, pcfg.Host, pcfg.Port, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%sDATABASE_URL: PostgreSQL at %s:%d not reachable after %s (%sDB_WAIT): %w",
				config.Prefix, pcfg.Host, pcfg.Port, time.Since(start).Round(time.Second), config.Prefix, err)
		}
		delay = min(delay, left)
		log.Warn("waiting for PostgreSQL", "attempt", attempt, "next_in", delay.Round(time.Millisecond), "err", Flatten(err))
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for PostgreSQL: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, dbWaitMax)
	}
}

func tryConnect(ctx context.Context, pcfg *pgx.ConnConfig) error {
	actx, cancel := context.WithTimeout(ctx, dbWaitAttempt)
	defer cancel()
	conn, err := pgx.ConnectConfig(actx, pcfg)
	if err != nil {
		return err
	}
	return conn.Close(actx)
}

// transient reports an error that a later attempt may not meet: the server
// is not listening, starting up, shutting down or out of connections.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08") ||
			pgErr.Code == "53300" || pgErr.Code == "53400"
	}
	// No answer from a server at all: refused, reset, unreachable, timed out.
	return true
}
