package pg

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
)

// migrateTo applies the migrations up to version to, as a binary that knew
// no later ones would have.
func migrateTo(t *testing.T, ctx context.Context, conn *pgx.Conn, to int) {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version int PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > to {
			break
		}
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("apply %s: %v", m.Name, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMigrateMovesCORSRules: migration 10 moves the CORS rules that version
// 8 kept in bucket_cors into bucket_configs, where the engine reads them:
// a bucket's rules survive the upgrade as they were, and a bucket without
// rules still has none.
func TestMigrateMovesCORSRules(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	migrateTo(t, ctx, conn, 8)
	age := 3000
	want := []store.CORSRule{
		{ID: "web", AllowedOrigins: []string{"https://a.example"}, AllowedMethods: []string{"GET", "PUT"},
			AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: &age},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"HEAD"}},
	}
	for _, b := range []string{"with-cors", "without"} {
		if _, err := conn.Exec(ctx, `INSERT INTO buckets (name, region) VALUES ($1, 'us-east-1')`, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO bucket_cors (bucket, rules) VALUES ('with-cors', $1)`, want); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, LargePGChunks, dsn, nil).e
	got, err := e.GetBucketCors(ctx, "with-cors")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("rules after the upgrade: %+v, %v; want %+v", got, err, want)
	}
	if _, err := e.GetBucketCors(ctx, "without"); !errors.Is(err, store.ErrNoSuchCORSConfiguration) {
		t.Fatalf("a bucket without rules after the upgrade: %v", err)
	}
	var tables int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'bucket_cors'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("bucket_cors after the upgrade: %d tables, %v", tables, err)
	}
}
