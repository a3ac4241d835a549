package admin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyPolicyFlags: -policy and -policy-file store a validated document
// with the key; list shows which keys have one; a bad document is refused
// before anything is stored.
func TestKeyPolicyFlags(t *testing.T) {
	env := []string{"S3GATE_DATA_DIR=" + t.TempDir(), "S3GATE_ROOT_ACCESS_KEY=rootkey", "S3GATE_ROOT_SECRET_KEY=root-secret-123"}
	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/uploads/*"}]}`
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"inline", []string{"-access-key", "INLINEKEY", "-policy", doc}, 0, ""},
		{"file", []string{"-access-key", "FILEKEY", "-policy-file", file}, 0, ""},
		{"both", []string{"-access-key", "BOTHKEY", "-policy", doc, "-policy-file", file}, 2, "exclude each other"},
		{"missing file", []string{"-access-key", "NOFILEKEY", "-policy-file", file + ".none"}, 2, "-policy-file"},
		{"not JSON", []string{"-access-key", "BADKEY", "-policy", "allow all"}, 2, "Policies must be valid JSON"},
		{"with a principal", []string{"-access-key", "BADKEY2", "-policy", `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:*","Resource":"*"}]}`}, 2, "should not specify a principal"},
		{"unknown action", []string{"-access-key", "BADKEY3", "-policy", `{"Statement":[{"Effect":"Allow","Action":"s3:Fly","Resource":"*"}]}`}, 2, "invalid action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runAdmin(t, env, append([]string{"key", "create"}, tc.args...)...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Fatalf("exit %d (%s), want %d with %q", code, errOut, tc.code, tc.msg)
			}
			if code == 0 && field(out, "policy") != "yes" {
				t.Errorf("create printed policy %q:\n%s", field(out, "policy"), out)
			}
		})
	}
	if code, _, _ := runAdmin(t, env, "key", "create", "-access-key", "PLAINKEY"); code != 0 {
		t.Fatal("create PLAINKEY failed")
	}
	code, out, errOut := runAdmin(t, env, "key", "list")
	if code != 0 {
		t.Fatalf("list: %d %s", code, errOut)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		want := map[string]string{"INLINEKEY": "yes", "FILEKEY": "yes", "PLAINKEY": "none"}[f[0]]
		if want != "" && f[3] != want {
			t.Errorf("list line %q: policy column %q, want %q", line, f[3], want)
		}
		if strings.HasPrefix(f[0], "BAD") || f[0] == "BOTHKEY" || f[0] == "NOFILEKEY" {
			t.Errorf("a refused key was stored: %q", line)
		}
	}
	code, out, _ = runAdmin(t, env, "key", "list", "-json")
	var l listJSON
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil {
		t.Fatalf("list -json: %d %s", code, out)
	}
	for _, k := range l.Keys {
		if (k.ID == "PLAINKEY") != (len(k.Policy) == 0) {
			t.Errorf("list -json key %s policy %s", k.ID, k.Policy)
		}
	}
}
