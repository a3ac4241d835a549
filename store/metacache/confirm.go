package metacache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// AckChannel carries the gateways' answers to a Confirm.
const AckChannel = "s3gate_metadata_ack"

// syncPrefix marks a Confirm's request on Channel: it changes nothing.
const syncPrefix = "sync:"

// Confirm waits until every gateway that listens on the database at dsn
// (a direct URL: LISTEN is session state) has applied every change committed
// before the call, and returns how many confirmed out of how many listened.
// Notifications are delivered in commit order, so a gateway that answers a
// request sent after the change has dropped what the change named. ctx's
// deadline bounds the wait: a gateway that does not answer by then (busy,
// partitioned) is counted as not confirmed, and drops the entry when it
// hears the change, or empties its cache when its session is found dead.
func Confirm(ctx context.Context, dsn string) (confirmed, listening int, err error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, 0, fmt.Errorf("confirm: connect: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }() // nothing pending
	if _, err := conn.Exec(ctx, "LISTEN "+AckChannel); err != nil {
		return 0, 0, fmt.Errorf("confirm: listen: %w", err)
	}
	var pids []int32
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()`, ApplicationName)
	if err == nil {
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	if err != nil {
		return 0, 0, fmt.Errorf("confirm: listening gateways: %w", err)
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand does not fail
	token := hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, syncPrefix+token); err != nil {
		return 0, len(pids), fmt.Errorf("confirm: request: %w", err)
	}
	waiting := map[string]bool{}
	for _, p := range pids {
		waiting[fmt.Sprint(p)] = true
	}
	for len(waiting) > 0 {
		n, err := conn.WaitForNotification(ctx)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			break
		}
		if err != nil {
			return len(pids) - len(waiting), len(pids), fmt.Errorf("confirm: wait: %w", err)
		}
		if tok, pid, _ := strings.Cut(n.Payload, ":"); tok == token {
			delete(waiting, pid)
		}
	}
	return len(pids) - len(waiting), len(pids), nil
}

// answer acknowledges a Confirm request heard on conn (payload without its
// prefix), naming this session by its backend pid.
func answer(ctx context.Context, conn *pgx.Conn, token string) error {
	pid := conn.PgConn().PID()
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if _, err := conn.Exec(ctx, `SELECT pg_notify($1, $2)`, AckChannel, fmt.Sprintf("%s:%d", token, pid)); err != nil {
		return fmt.Errorf("answer a confirmation: %w", err)
	}
	return nil
}
