package admin

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// runAdmin runs the command with a clean environment plus env.
func runAdmin(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runAdminStdin(t, env, "", args...)
}

// runAdminStdin is runAdmin with stdin as the command's standard input.
func runAdminStdin(t *testing.T, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, env, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// field returns the value after "label:" in create's output.
func field(out, label string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, label+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func TestSplitArgs(t *testing.T) {
	tests := []struct {
		args          []string
		key, cfg, pos []string
	}{
		{[]string{"-buckets", "a,b", "-read-only", "-data-dir", "/d"}, []string{"-buckets", "a,b", "-read-only"}, []string{"-data-dir", "/d"}, nil},
		{[]string{"--secret=x y", "-database-url=", "ID"}, []string{"--secret=x y"}, []string{"-database-url="}, []string{"ID"}},
		{[]string{"ID", "-read-only=false", "-region", "eu-west-1"}, []string{"-read-only=false"}, []string{"-region", "eu-west-1"}, []string{"ID"}},
		{[]string{"-secret", "-starts-with-dash", "--", "-odd-id"}, []string{"-secret", "-starts-with-dash"}, nil, []string{"-odd-id"}},
	}
	for _, tt := range tests {
		k, c, p := splitArgs(tt.args)
		if !slices.Equal(k, tt.key) || !slices.Equal(c, tt.cfg) || !slices.Equal(p, tt.pos) {
			t.Errorf("splitArgs(%q) = %q %q %q, want %q %q %q", tt.args, k, c, p, tt.key, tt.cfg, tt.pos)
		}
	}
}

func TestKeyCommandsEmbedded(t *testing.T) {
	env := []string{"S3GATE_DATA_DIR=" + t.TempDir(), "S3GATE_ROOT_ACCESS_KEY=rootkey", "S3GATE_ROOT_SECRET_KEY=root-secret-123"}

	code, out, errOut := runAdmin(t, env, "key", "create", "-buckets", "alpha, beta,alpha", "-read-only")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}
	id, secret := field(out, "access key id"), field(out, "secret access key")
	if !keyIDPattern.MatchString(id) || len(secret) != 40 || !secretPattern.MatchString(secret) {
		t.Fatalf("generated id %q secret %q", id, secret)
	}
	if b, a := field(out, "buckets"), field(out, "access"); b != "alpha,beta" || a != "read-only" {
		t.Errorf("buckets %q access %q", b, a)
	}

	given := "given-secret-value"
	code, out, errOut = runAdmin(t, env, "key", "create", "-access-key", "OPERATORKEY", "-secret", given)
	if code != 0 {
		t.Fatalf("create with id and secret: exit %d: %s", code, errOut)
	}
	if strings.Contains(out, given) || field(out, "access key id") != "OPERATORKEY" {
		t.Errorf("create with a given secret printed %q", out)
	}

	code, out, errOut = runAdmin(t, env, "key", "list")
	if code != 0 {
		t.Fatalf("list: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, id) || !strings.Contains(out, "OPERATORKEY") || !strings.HasPrefix(out, "ACCESS KEY ID") {
		t.Errorf("list output:\n%s", out)
	}
	if strings.Contains(out, secret) || strings.Contains(out, given) {
		t.Errorf("list shows a secret:\n%s", out)
	}

	failures := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"duplicate id", []string{"key", "create", "-access-key", "OPERATORKEY"}, 1, "already exists"},
		{"root id", []string{"key", "create", "-access-key", "rootkey"}, 2, "root"},
		{"bad id", []string{"key", "create", "-access-key", "a/b"}, 2, "-access-key"},
		{"short secret", []string{"key", "create", "-secret", "short"}, 2, "-secret"},
		{"secret with space", []string{"key", "create", "-secret", "has a space"}, 2, "-secret"},
		{"bad bucket", []string{"key", "create", "-buckets", "Bad_Bucket"}, 2, "-buckets"},
		{"delete missing", []string{"key", "delete", "NOSUCHKEY"}, 1, "no such access key"},
		{"delete root", []string{"key", "delete", "rootkey"}, 2, "root"},
		{"delete without id", []string{"key", "delete"}, 2, "argument"},
		{"list with create flag", []string{"key", "list", "-read-only"}, 2, "not defined"},
		{"unknown command", []string{"key", "rotate"}, 2, "unknown command"},
		{"no command", nil, 2, "usage"},
		{"bad config", []string{"key", "list", "-log-format", "xml"}, 2, "LOG_FORMAT"},
	}
	for _, f := range failures {
		code, _, errOut := runAdmin(t, env, f.args...)
		if code != f.code || !strings.Contains(errOut, f.msg) {
			t.Errorf("%s: exit %d (want %d), stderr %q (want %q)", f.name, code, f.code, errOut, f.msg)
		}
	}
	// Nothing the failures tried was stored.
	if _, out, _ := runAdmin(t, env, "key", "list"); strings.Count(out, "\n") != 3 {
		t.Errorf("after refused commands, list:\n%s", out)
	}

	if code, out, errOut := runAdmin(t, env, "key", "delete", "OPERATORKEY"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: exit %d: %s %s", code, out, errOut)
	}
	if _, out, _ := runAdmin(t, env, "key", "list"); strings.Contains(out, "OPERATORKEY") || !strings.Contains(out, id) {
		t.Errorf("after delete, list:\n%s", out)
	}
	if code, out, _ := runAdmin(t, env, "key", "create", "-h"); code != 0 || !strings.Contains(out, "-read-only") || !strings.Contains(out, "database-url") {
		t.Errorf("help: exit %d:\n%s", code, out)
	}
}
