package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareScript runs compare.sh against another endpoint with a stand-in
// go (whose "test -c" writes a script that records its -test.bench pattern
// and prints one result line, or none) and a stand-in benchstat: a WORKLOAD
// alternation must reach both sides whole, below the engine level, and a
// side that ran no benchmark must fail the comparison instead of printing an
// empty table.
func TestCompareScript(t *testing.T) {
	script, err := filepath.Abs("compare.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		workload string
		results  bool // the stand-in test binary prints a result line
		wantOK   bool
		want     []string // the -test.bench patterns, in order
	}{
		{"alternation", "put-4KiB$|get-4KiB$", true, true, []string{
			"Gateway/engine=pgchunks/(put-4KiB$|get-4KiB$)", "Gateway/engine=external/(put-4KiB$|get-4KiB$)",
		}},
		{"default", "", true, true, []string{"Gateway/engine=pgchunks/(.)", "Gateway/engine=external/(.)"}},
		{"nothing-ran", "no-such-workload", false, false, []string{
			"Gateway/engine=pgchunks/(no-such-workload)", "Gateway/engine=external/(no-such-workload)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// compare.sh writes into the top of its git tree: a tree of its own.
			git := exec.Command("git", "init", "-q", dir)
			if out, err := git.CombinedOutput(); err != nil {
				t.Fatalf("git init: %v: %s", err, out)
			}
			if err := os.Mkdir(filepath.Join(dir, "bench"), 0o755); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(dir, "patterns")
			line := ""
			if tc.results {
				line = `echo "BenchmarkGateway/engine=x/put-4KiB 1 100 ops/s"`
			}
			fakeTest := "#!/bin/sh\n" +
				`while [ $# -gt 0 ]; do [ "$1" = -test.bench ] && printf '%s\n' "$2" >>` + log + "; shift; done\n" + line + "\n"
			fakeGo := "#!/bin/sh\n" +
				`[ "$1 $2 $3" = "test -c -o" ] || exit 3` + "\n" +
				"cat >\"$4\" <<'EOF'\n" + fakeTest + "EOF\nchmod +x \"$4\"\n"
			writeExec(t, filepath.Join(dir, "go"), fakeGo)
			writeExec(t, filepath.Join(dir, "benchstat"), "#!/bin/sh\nexit 0\n")

			cmd := exec.Command("sh", script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GO="+filepath.Join(dir, "go"), "BENCHSTAT="+filepath.Join(dir, "benchstat"),
				"COUNT=1", "B_ENDPOINT=http://127.0.0.1:1", "B_ACCESS_KEY=k", "B_SECRET_KEY=s", "ENGINE=", "WORKLOAD="+tc.workload)
			out, err := cmd.CombinedOutput()
			if ok := err == nil; ok != tc.wantOK {
				t.Fatalf("compare.sh: err %v, want success %v; output:\n%s", err, tc.wantOK, out)
			}
			if !tc.wantOK && !strings.Contains(string(out), "ran no benchmark") {
				t.Errorf("compare.sh failed without saying why:\n%s", out)
			}
			got, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := strings.TrimSpace(string(got)), strings.Join(tc.want, "\n"); g != w {
				t.Errorf("-test.bench patterns:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

func writeExec(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}
