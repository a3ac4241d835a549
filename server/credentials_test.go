package server_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/server"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
)

// TestLoadRootKey: where each start's root key comes from. The environment
// wins; on PostgreSQL the generated pair is kept in the database, so a second
// instance (another data directory) gets the same pair without a banner, and a
// pair an earlier version kept in the data directory is moved in, not
// replaced; the embedded default keeps its file.
func TestLoadRootKey(t *testing.T) {
	ctx := context.Background()
	oldFile := "S3GATE_ROOT_ACCESS_KEY=OLDROOTKEY\nS3GATE_ROOT_SECRET_KEY=old-root-secret\n"
	tests := []struct {
		name     string
		pg       bool
		env      []string
		file     string // DATA_DIR/root-credentials of the first start
		origin   server.KeyOrigin
		wantAK   string // "" : generated
		banner   bool   // the first start shows the secret
		samePair bool   // a second start, on a fresh data dir, gets the same pair
	}{
		{"environment wins on postgres", true, []string{"S3GATE_ROOT_ACCESS_KEY=ENVKEY", "S3GATE_ROOT_SECRET_KEY=env-secret"}, oldFile, server.OriginEnvironment, "ENVKEY", false, true},
		{"generated in the database", true, nil, "", server.OriginDatabase, "", true, true},
		{"data dir file moved into the database", true, nil, oldFile, server.OriginDatabase, "OLDROOTKEY", false, true},
		{"embedded keeps its file", false, nil, "", server.OriginDataDir, "", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var db store.RootKeyStore
			if tt.pg {
				e, err := pg.Open(ctx, pg.Config{DatabaseURL: pgtest.DSN(t), Large: pg.LargePGChunks})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(e.Close)
				db = e
			}
			load := func(file string) server.RootKey {
				t.Helper()
				dir := t.TempDir()
				if file != "" {
					if err := os.WriteFile(filepath.Join(dir, server.CredentialsFile), []byte(file), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				cfg, err := config.Load(nil, append([]string{"S3GATE_DATA_DIR=" + dir}, tt.env...), nil)
				if err != nil {
					t.Fatal(err)
				}
				// What admin sees before the start: the pair the start will
				// use, if one exists already.
				before, found, err := server.FindRootKey(ctx, cfg, db)
				if err != nil {
					t.Fatal(err)
				}
				k, err := server.LoadRootKey(ctx, cfg, db)
				if err != nil {
					t.Fatal(err)
				}
				if found == k.Generated || (found && before.AccessKey != k.AccessKey) {
					t.Fatalf("FindRootKey before the start: %+v (found %v); the start used %+v", before, found, k)
				}
				return k
			}
			first := load(tt.file)
			if first.Origin != tt.origin || (tt.wantAK != "" && first.AccessKey != tt.wantAK) || first.Generated != tt.banner {
				t.Fatalf("first start: %+v, want origin %s, access key %q, banner %v", first, tt.origin, tt.wantAK, tt.banner)
			}
			second := load("")
			if same := second.AccessKey == first.AccessKey && second.SecretKey == first.SecretKey; same != tt.samePair || second.Generated != !tt.samePair {
				t.Fatalf("second start: %+v after %+v: same pair %v (want %v), banner %v", second, first, same, tt.samePair, second.Generated)
			}
		})
	}
}
