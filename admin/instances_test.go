package admin

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/pg"
)

// TestInstancesCommand: `admin instances` lists the registry with each row's
// state in database time, as text and as JSON; the embedded default has no
// fleet and is refused; a config flag that is boolean (-fleet) does not eat
// the next argument.
func TestInstancesCommand(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	if err := pg.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	reg, err := fleet.Register(ctx, fleet.RegistryConfig{Session: fleet.SessionConfig{DSN: dsn}, TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close(ctx)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO instances (id, host, pid, started_at, heartbeat_at, ttl)
		VALUES ('old:1:dead', 'old', 1, clock_timestamp() - interval '2 hours', clock_timestamp() - interval '1 hour', interval '30 seconds')`); err != nil {
		t.Fatal(err)
	}
	env := []string{"S3GATE_DATABASE_URL=" + dsn}

	code, out, errOut := runAdmin(t, env, "instances", "-fleet")
	if code != 0 {
		t.Fatalf("instances: %d %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "INSTANCE") {
		t.Fatalf("text output:\n%s", out)
	}
	// Oldest start first: the expired one, then this instance.
	if f := strings.Fields(lines[1]); f[0] != "old:1:dead" || f[len(f)-1] != "expired" || f[len(f)-2] != "30s" {
		t.Errorf("expired row: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != string(reg.ID()) || f[len(f)-1] != "live" {
		t.Errorf("live row: %q", lines[2])
	}

	code, out, errOut = runAdmin(t, env, "instances", "-json")
	if code != 0 {
		t.Fatalf("instances -json: %d %s", code, errOut)
	}
	var got []struct {
		ID         string  `json:"id"`
		Host       string  `json:"host"`
		PID        int     `json:"pid"`
		TTLSeconds float64 `json:"ttl_seconds"`
		State      string  `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got) != 2 || got[0].ID != "old:1:dead" || got[0].State != "expired" || got[0].PID != 1 || got[0].TTLSeconds != 30 ||
		got[1].ID != string(reg.ID()) || got[1].State != "live" {
		t.Fatalf("json: %+v", got)
	}

	if code, out, _ := runAdmin(t, nil, "instances", "-h"); code != 0 || !strings.HasPrefix(out, "usage: s3gate admin instances [-json] [settings]") {
		t.Errorf("help: %d %q", code, out)
	}
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{[]string{"S3GATE_DATA_DIR=" + t.TempDir()}, []string{"instances"}, 2,
			"s3gate admin instances: needs S3GATE_DATABASE_URL (-database-url): the embedded default runs no fleet\n"},
		{env, []string{"instances", "extra"}, 2, "s3gate admin instances: unexpected argument \"extra\"\n"},
	} {
		if code, _, errOut := runAdmin(t, tc.env, tc.args...); code != tc.code || errOut != tc.want {
			t.Errorf("%v: %d %q, want %d %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
}
