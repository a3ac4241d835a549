package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/pgtest"
)

// TestMigrateStatus: --status reports pending migrations on a fresh
// database (exit 3), none after migrate (0), and a version applied by a
// newer binary (4), and changes nothing itself.
func TestMigrateStatus(t *testing.T) {
	dsn := pgtest.DSN(t)
	status := func() (int, string) {
		var out, errb bytes.Buffer
		code := run([]string{"migrate", "--status", "-database-url", dsn}, &out, &errb)
		return code, out.String() + errb.String()
	}
	steps := []struct {
		name   string
		before func(t *testing.T)
		code   int
		want   []string
	}{
		{"fresh", nil, exitPending, []string{"pending  0001 0001_init.sql", "pending (this binary knows up to"}},
		{"again, unchanged", nil, exitPending, []string{"pending  0001 0001_init.sql"}},
		{"after migrate", func(t *testing.T) {
			var out bytes.Buffer
			if code := run([]string{"migrate", "-database-url", dsn}, &out, &out); code != 0 {
				t.Fatalf("migrate: exit %d\n%s", code, out.String())
			}
		}, 0, []string{"applied  0001 0001_init.sql", "migrate: up to date at"}},
		{"newer database", func(t *testing.T) {
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES (9999, '9999_future.sql')`); err != nil {
				t.Fatal(err)
			}
		}, exitNewer, []string{"unknown  9999 9999_future.sql: applied by a newer binary", "newer than this binary"}},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before(t)
		}
		code, out := status()
		if code != s.code {
			t.Fatalf("%s: exit %d, want %d\n%s", s.name, code, s.code, out)
		}
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", s.name, w, out)
			}
		}
	}
}
