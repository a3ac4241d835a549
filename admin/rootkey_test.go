package admin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/server"
	"github.com/s3gate/s3gate/store"
)

// TestRootKeyAndSecretInput: on each store, with the root key from the
// environment or generated (in the data directory, in the database), `admin
// key create` and `delete` refuse the root key's id, `list -json` shows its id
// and origin, and create reads a secret from standard input or a file.
func TestRootKeyAndSecretInput(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	tests := []struct {
		name   string
		env    func(t *testing.T) []string
		origin server.KeyOrigin
	}{
		{"environment", func(t *testing.T) []string {
			return []string{"S3GATE_DATA_DIR=" + t.TempDir(), "S3GATE_ROOT_ACCESS_KEY=ENVROOT", "S3GATE_ROOT_SECRET_KEY=env-root-secret"}
		}, server.OriginEnvironment},
		{"data dir", func(t *testing.T) []string { return []string{"S3GATE_DATA_DIR=" + t.TempDir()} }, server.OriginDataDir},
		{"database", func(t *testing.T) []string {
			return []string{"S3GATE_DATA_DIR=" + t.TempDir(), "S3GATE_DATABASE_URL=" + dsn}
		}, server.OriginDatabase},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env(t)
			cfg, err := config.Load(nil, env, nil)
			if err != nil {
				t.Fatal(err)
			}
			keys, closeStore, err := openStore(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer closeStore()
			rks, _ := keys.(store.RootKeyStore)
			if tt.origin != server.OriginEnvironment {
				// Before the gateway's first start there is no root key.
				code, out, errOut := runAdmin(t, env, "key", "list", "-json")
				if code != 0 || !strings.Contains(out, `"root": null`) {
					t.Fatalf("list -json before any root key: exit %d: %s %s", code, out, errOut)
				}
			}
			root, err := server.LoadRootKey(ctx, cfg, rks) // what serve does on first start
			if err != nil || root.Origin != tt.origin {
				t.Fatalf("LoadRootKey: %+v, %v; want origin %s", root, err, tt.origin)
			}

			secrets := []struct {
				name, id, stdin string
				args            []string
			}{
				{"stdin", "FROMSTDIN", "stdin-secret-1\n", []string{"-secret-stdin"}},
				{"stdin without newline", "FROMSTDIN2", "stdin-secret-2", []string{"-secret-stdin"}},
				{"file", "FROMFILE", "", []string{"-secret-file", writeFile(t, "file-secret-3\r\n")}},
			}
			for _, s := range secrets {
				args := append([]string{"key", "create", "-access-key", s.id}, s.args...)
				code, out, errOut := runAdminStdin(t, env, s.stdin, args...)
				if code != 0 {
					t.Fatalf("%s: exit %d: %s", s.name, code, errOut)
				}
				k, err := keys.GetKey(ctx, s.id)
				want := strings.TrimRight(s.stdin, "\n")
				if s.stdin == "" {
					want = "file-secret-3"
				}
				if err != nil || k.Secret != want {
					t.Fatalf("%s: stored %+v, %v; want secret %q", s.name, k, err, want)
				}
				if strings.Contains(out, want) {
					t.Errorf("%s: create echoed the secret: %s", s.name, out)
				}
			}

			failures := []struct {
				name, stdin string
				args        []string
				msg         string
			}{
				{"create root id", "", []string{"key", "create", "-access-key", root.AccessKey}, "root"},
				{"create root id with stdin secret", "another-secret\n", []string{"key", "create", "-access-key", root.AccessKey, "-secret-stdin"}, "root"},
				{"delete root id", "", []string{"key", "delete", root.AccessKey}, "root"},
				{"empty stdin", "", []string{"key", "create", "-secret-stdin"}, "-secret-stdin"},
				{"two lines on stdin", "one-secret\ntwo-secret\n", []string{"key", "create", "-secret-stdin"}, "one line"},
				{"short secret on stdin", "short\n", []string{"key", "create", "-secret-stdin"}, "-secret"},
				{"stdin and argv", "stdin-secret\n", []string{"key", "create", "-secret-stdin", "-secret", "argv-secret"}, "exclude"},
				{"missing file", "", []string{"key", "create", "-secret-file", filepath.Join(t.TempDir(), "none")}, "-secret-file"},
			}
			for _, f := range failures {
				code, _, errOut := runAdminStdin(t, env, f.stdin, f.args...)
				if code != exitUsage || !strings.Contains(errOut, f.msg) {
					t.Errorf("%s: exit %d (want %d), stderr %q (want %q)", f.name, code, exitUsage, errOut, f.msg)
				}
			}
			if _, err := keys.GetKey(ctx, root.AccessKey); err == nil {
				t.Error("a key with the root key's id was stored")
			}

			code, out, errOut := runAdmin(t, env, "key", "list", "-json")
			if code != 0 {
				t.Fatalf("list -json: exit %d: %s", code, errOut)
			}
			var l listJSON
			if err := json.Unmarshal([]byte(out), &l); err != nil {
				t.Fatalf("list -json: %v:\n%s", err, out)
			}
			if l.Root == nil || l.Root.ID != root.AccessKey || l.Root.Origin != tt.origin {
				t.Errorf("list -json root = %+v, want %s from %s", l.Root, root.AccessKey, tt.origin)
			}
			if len(l.Keys) != len(secrets) || l.Keys[0].ID != "FROMFILE" || l.Keys[0].Buckets == nil || l.Keys[0].Created.IsZero() {
				t.Errorf("list -json keys = %+v", l.Keys)
			}
			if strings.Contains(out, root.SecretKey) || strings.Contains(out, "secret-1") {
				t.Errorf("list -json shows a secret:\n%s", out)
			}
		})
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
