package testreq

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMissing runs itself as a child process twice: without the variable the
// child skips, with it the child fails and says why.
func TestMissing(t *testing.T) {
	if os.Getenv("TESTREQ_CHILD") == "1" {
		Missing(t, "frobnicator not installed")
		return
	}
	cases := []struct {
		name    string
		require string
		wantErr bool
		want    string
	}{
		{"developer machine skips", "", false, "--- SKIP: TestMissing"},
		{"CI fails", "1", true, "--- FAIL: TestMissing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMissing$", "-test.v")
			env := []string{"TESTREQ_CHILD=1"}
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, EnvRequire+"=") {
					env = append(env, kv)
				}
			}
			if tc.require != "" {
				env = append(env, EnvRequire+"="+tc.require)
			}
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.wantErr {
				t.Fatalf("child error = %v, want error %v; output:\n%s", err, tc.wantErr, out)
			}
			if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "frobnicator not installed") {
				t.Fatalf("child output lacks %q and the message:\n%s", tc.want, out)
			}
		})
	}
}
