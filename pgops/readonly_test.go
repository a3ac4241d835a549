package pgops

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
)

// TestReadOnlySetting: S3GATE_READ_ONLY=true on a database that is not a
// standby serves reads and refuses writes.
func TestReadOnlySetting(t *testing.T) {
	dsn := pgtest.DSN(t)
	objs := sizeClasses("", 9)[:3]
	t.Run("primary writes", func(t *testing.T) {
		c := client(start(t, config.EnginePGChunks, dsn))
		createBucket(t, c, "bkt")
		putAll(t, c, "bkt", objs)
	})
	gw := start(t, config.EnginePGChunks, dsn, "S3GATE_READ_ONLY=true")
	c := client(gw)
	expectExactly(t, c, "bkt", objs)
	if v := scrapeValue(t, gw, `s3gate_role{role="replica"}`); v != 1 {
		t.Errorf(`s3gate_role{role="replica"} = %v, want 1`, v)
	}
	// No writer claim and no pin session: the sessions a primary's gateway
	// opens (the pin session on its first streamed GET, just done).
	var sessions int
	if err := connect(t, dsn).QueryRow(ctxT(t), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name IN ('s3gate-owner', 's3gate-pins')`).Scan(&sessions); err != nil || sessions != 0 {
		t.Fatalf("claim or pin sessions of the read-only gateway: %d, %v; want none", sessions, err)
	}
	_, err := c.PutObject(ctxT(t), &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("new"), Body: strings.NewReader("x")})
	if code, msg := apiCode(err); code != "AccessDenied" || !strings.Contains(msg, "read-only replica") {
		t.Fatalf("PUT on a READ_ONLY gateway: %v; want AccessDenied naming the read-only replica", err)
	}
	expectExactly(t, c, "bkt", objs)
}

// TestReadOnlySchemaCheck: a read-only instance never migrates, so it
// refuses a schema at another version than the one it knows: none at all
// (it does not create one), or a newer one.
func TestReadOnlySchemaCheck(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dsn string)
		want  string
	}{
		{"empty database", func(*testing.T, string) {}, "schema version 0"},
		{"newer schema", func(t *testing.T, dsn string) {
			t.Run("primary migrates", func(t *testing.T) { start(t, config.EnginePGChunks, dsn) })
			if _, err := connect(t, dsn).Exec(ctxT(t), `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
				t.Fatal(err)
			}
		}, "schema version 9999"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.DSN(t)
			tc.setup(t, dsn)
			var before string
			db := connect(t, dsn)
			state := `SELECT coalesce((SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_migrations), 'none')`
			if tc.name == "empty database" {
				state = `SELECT coalesce(to_regclass('schema_migrations')::text, 'none')`
			}
			if err := db.QueryRow(ctxT(t), state).Scan(&before); err != nil {
				t.Fatal(err)
			}
			if err := readOnlyStartErr(t, dsn); !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "never migrates") {
				t.Fatalf("start-up error %q; want it to name %q and that a replica never migrates", err, tc.want)
			}
			var after string
			if err := db.QueryRow(ctxT(t), state).Scan(&after); err != nil || after != before {
				t.Fatalf("schema state %q, %v after the refused start; want %q unchanged", after, err, before)
			}
		})
	}
}

// readOnlyStartErr starts a read-only gateway on dsn as `s3gate serve` would
// and returns why it refused to start; it fails the test if it started.
func readOnlyStartErr(t *testing.T, dsn string) error {
	t.Helper()
	cfg, err := config.Load(nil, []string{"S3GATE_DATABASE_URL=" + dsn, "S3GATE_READ_ONLY=true", "S3GATE_DATA_DIR=" + t.TempDir(),
		"S3GATE_ROOT_ACCESS_KEY=" + testgw.AccessKey, "S3GATE_ROOT_SECRET_KEY=" + testgw.SecretKey, "S3GATE_METRICS_ADDR=off"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		srv.Close()
		t.Fatal("the read-only gateway started")
	}
	return err
}
