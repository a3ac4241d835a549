package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/freeport"
	"github.com/s3gate/s3gate/internal/metricsdoc"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/internal/testreq"
)

// metricsDoc is the operator's reference of every exported metric.
const metricsDoc = "../docs/metrics.md"

// exercise makes one bucket, one PUT and one GET, so that the request
// metrics (vectors without series until a request) are exported too.
func exercise(t *testing.T, gw *testgw.Gateway) {
	t.Helper()
	ctx := context.Background()
	cli := sdkClient(gw)
	if _, err := cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("doc")}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("doc"), Key: aws.String("k"), Body: bytes.NewReader([]byte("content"))}); err != nil {
		t.Fatal(err)
	}
	out, err := cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("doc"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	_ = out.Body.Close()
	// An unsigned GET (refused: no bucket policy) feeds the anonymous series.
	resp, err := http.Get(gw.Endpoint + "/doc/k")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous GET: HTTP %d, want 403", resp.StatusCode)
	}
}

// TestMetricsDocumented scrapes live gateways on both metadata engines,
// checks the instance state series (build info, readiness, role, pin cap),
// and fails on any s3gate_* family that docs/metrics.md does not list, and
// on any metric the doc's tables list that no gateway exports.
func TestMetricsDocumented(t *testing.T) {
	documented, err := metricsdoc.Names(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, engine := range []string{testgw.Embedded, config.EnginePGChunks} {
		gw := testgw.Start(t, testgw.Options{Engine: engine, Env: []string{config.Prefix + "GC_INTERVAL=1h", config.Prefix + "MAX_PINS=77"}})
		exercise(t, gw)
		sc := scrapeMetrics(t, gw.MetricsURL)
		for _, c := range []struct {
			name   string
			labels []string
			want   float64
		}{
			{"s3gate_build_info", []string{"version", "dev"}, 1},
			{"s3gate_ready", nil, 1},
			{"s3gate_role", []string{"role", "owner"}, 1},
			{"s3gate_pins_max", nil, 77},
			{"s3gate_requests_total", []string{"operation", "PutObject", "status_class", "2xx"}, 1},
			{"s3gate_anonymous_requests_total", []string{"operation", "GetObject", "status_class", "4xx"}, 1},
		} {
			if got, ok := sc.value(c.name, c.labels...); !ok || got != c.want {
				t.Errorf("%s: %s%v = %v (present %v), want %v", engine, c.name, c.labels, got, ok, c.want)
			}
		}
		for name := range sc {
			if strings.HasPrefix(name, "s3gate_") {
				exported[name] = true
			}
		}
	}
	var missing, stale []string
	for name := range exported {
		if !documented[name] {
			missing = append(missing, name)
		}
	}
	for name := range documented {
		if !exported[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("exported but not in %s (add a row for each): %s", metricsDoc, strings.Join(missing, ", "))
	}
	if len(stale) > 0 {
		t.Errorf("in %s but exported by no gateway: %s", metricsDoc, strings.Join(stale, ", "))
	}
}

// TestPrometheusScrapesGateway runs a real Prometheus server against a live
// gateway's metrics listener and waits until its query API returns the
// gateway's build info and request counter.
func TestPrometheusScrapesGateway(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testreq.Missing(t, "prometheus not found: apt-get install prometheus")
	}
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded})
	exercise(t, gw)
	target, err := url.Parse(gw.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: s3gate
    static_configs:
      - targets: ['`+target.Host+`']
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	logs, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	cmd := exec.Command(bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		// By its PID; Prometheus shuts down cleanly on SIGTERM and exits 0.
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Errorf("stop prometheus (pid %d): %v", cmd.Process.Pid, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("prometheus (pid %d): %v\n%s", cmd.Process.Pid, err, readLog(logs.Name()))
		}
	}
	t.Cleanup(stop)

	api := "http://" + addr + "/api/v1/query?query="
	for _, q := range []string{
		`s3gate_build_info{job="s3gate"}`,
		`s3gate_requests_total{job="s3gate",operation="PutObject",status_class="2xx"}`,
	} {
		waitSeries(t, api+url.QueryEscape(q), q, logs.Name())
	}
	stop()
}

// readLog returns a log file's text, or why it could not be read.
func readLog(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return "log unreadable: " + err.Error()
	}
	return string(b)
}

// freeAddr returns a loopback address with a port free a moment ago, below
// the ephemeral range (internal/freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.Addr(t)
}

// waitSeries polls a Prometheus instant query until it returns a series.
func waitSeries(t *testing.T, queryURL, q, logFile string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	last := "no answer"
	for {
		resp, err := http.Get(queryURL)
		if err == nil {
			var body struct {
				Status string `json:"status"`
				Data   struct {
					Result []json.RawMessage `json:"result"`
				} `json:"data"`
			}
			err = json.NewDecoder(resp.Body).Decode(&body)
			_ = resp.Body.Close()
			if err == nil && body.Status == "success" && len(body.Data.Result) > 0 {
				return
			}
			last = "status " + resp.Status
		}
		if err != nil {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus never returned %s (last: %s)\n%s", q, last, readLog(logFile))
		}
		time.Sleep(100 * time.Millisecond) // the poll interval, not a synchronisation
	}
}
