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
	c := client(start(t, config.EnginePGChunks, dsn, "S3GATE_READ_ONLY=true"))
	expectExactly(t, c, "bkt", objs)
	_, err := c.PutObject(ctxT(t), &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("new"), Body: strings.NewReader("x")})
	if code, msg := apiCode(err); code != "AccessDenied" || !strings.Contains(msg, "read-only replica") {
		t.Fatalf("PUT on a READ_ONLY gateway: %v; want AccessDenied naming the read-only replica", err)
	}
	expectExactly(t, c, "bkt", objs)
}

// TestReadOnlySchemaCheck: a read-only instance never migrates, so it
// refuses a schema at another version than the one it knows, older or newer.
func TestReadOnlySchemaCheck(t *testing.T) {
	dsn := pgtest.DSN(t)
	t.Run("primary migrates", func(t *testing.T) { start(t, config.EnginePGChunks, dsn) })
	db := connect(t, dsn)
	if _, err := db.Exec(ctxT(t), `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(nil, []string{"S3GATE_DATABASE_URL=" + dsn, "S3GATE_READ_ONLY=true", "S3GATE_DATA_DIR=" + t.TempDir(),
		"S3GATE_ROOT_ACCESS_KEY=" + testgw.AccessKey, "S3GATE_ROOT_SECRET_KEY=" + testgw.SecretKey, "S3GATE_METRICS_ADDR=off"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		srv.Close()
		t.Fatal("a read-only gateway started on a schema newer than it knows")
	}
	if !strings.Contains(err.Error(), "schema version 9999") || !strings.Contains(err.Error(), "never migrates") {
		t.Fatalf("start-up error %q; want it to name the schema version and that a replica never migrates", err)
	}
	var n int
	if err := db.QueryRow(ctxT(t), `SELECT count(*) FROM schema_migrations WHERE version = 9999`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("schema_migrations changed: %d, %v", n, err)
	}
}
