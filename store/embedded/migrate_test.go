package embedded

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// TestMigrateMovesCORSRules: migration 5 moves the CORS rules that version
// 4 kept in bucket_cors into bucket_configs, where the engine reads them: a
// bucket's rules survive the upgrade as they were, and a bucket without
// rules still has none.
func TestMigrateMovesCORSRules(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, MetaFile), true))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version > 4 {
			break
		}
		if _, err := db.ExecContext(ctx, m.SQL); err != nil {
			t.Fatalf("apply %s: %v", m.Name, err)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	rules := `[{"id":"web","allowed_origins":["https://a.example"],"allowed_methods":["GET","PUT"],"max_age_seconds":3000},` +
		`{"allowed_origins":["*"],"allowed_methods":["HEAD"]}]`
	for _, q := range []string{
		`INSERT INTO buckets (name, region, created_at) VALUES ('with-cors', 'us-east-1', 0), ('without', 'us-east-1', 0)`,
		`INSERT INTO bucket_cors (bucket, rules) VALUES ('with-cors', '` + rules + `')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	e := openAt(t, dir)
	age := 3000
	want := []store.CORSRule{
		{ID: "web", AllowedOrigins: []string{"https://a.example"}, AllowedMethods: []string{"GET", "PUT"}, MaxAgeSeconds: &age},
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"HEAD"}},
	}
	got, err := e.GetBucketCors(ctx, "with-cors")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("rules after the upgrade: %+v, %v; want %+v", got, err, want)
	}
	if _, err := e.GetBucketCors(ctx, "without"); !errors.Is(err, store.ErrNoSuchCORSConfiguration) {
		t.Fatalf("a bucket without rules after the upgrade: %v", err)
	}
}
