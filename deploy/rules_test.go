// Package deploy holds what an operator deploys beside the binary (the
// systemd unit, Prometheus alert rules, a Grafana dashboard); its tests check
// them with the real tools.
package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/internal/metricsdoc"
	"github.com/s3gate/s3gate/internal/testreq"
)

// TestAlertRules checks alerts.yml and runs its unit tests (alerts_test.yml)
// with promtool, from Debian's prometheus package; the dashboard's queries
// are checked the same way, as recording rules.
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testreq.Missing(t, "promtool not found: apt-get install prometheus")
	}
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
		{"check", "rules", dashboardRules(t)},
	} {
		t.Run(strings.Join(args[:2], " ")+" "+filepath.Base(args[2]), func(t *testing.T) {
			out, err := exec.Command(promtool, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		})
	}
}

// grafanaVars stand for the dashboard's variables in its queries.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$job", "s3gate", "$instance", ".*")

// dashboardRules writes the dashboard's queries as a rule file, so that
// promtool parses each one, and returns its path.
func dashboardRules(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			expr, err := json.Marshal(grafanaVars.Replace(tg.Expr)) // a JSON string is a YAML string
			if err != nil {
				t.Fatal(err)
			}
			n++
			fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", n, expr)
		}
	}
	if n == 0 {
		t.Fatal("grafana-dashboard.json has no queries")
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// metricName matches a gateway series name in a query; histogram suffixes
// are trimmed to their family.
var metricName = regexp.MustCompile(`\bs3gate_[a-z0-9_]+`)

// TestQueriesUseDocumentedMetrics fails when the dashboard or the alert
// rules query an s3gate_* series that docs/metrics.md does not list (a
// renamed or removed metric would leave a silent panel or a dead alert), and
// checks that the dashboard is valid JSON with panels.
func TestQueriesUseDocumentedMetrics(t *testing.T) {
	documented, err := metricsdoc.Names("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	dash, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string            `json:"title"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("grafana-dashboard.json: title %q, %d panels", d.Title, len(d.Panels))
	}
	for _, file := range []string{"alerts.yml", "grafana-dashboard.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		unknown := map[string]bool{}
		for _, name := range metricName.FindAllString(string(b), -1) {
			family := name
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if f, ok := strings.CutSuffix(name, suffix); ok && documented[f] {
					family = f
				}
			}
			if !documented[family] {
				unknown[name] = true
			}
		}
		if len(unknown) > 0 {
			names := make([]string, 0, len(unknown))
			for n := range unknown {
				names = append(names, n)
			}
			sort.Strings(names)
			t.Errorf("%s queries series not in docs/metrics.md: %s", file, strings.Join(names, ", "))
		}
	}
}
