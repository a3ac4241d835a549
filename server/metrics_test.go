package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
)

// inlineMax puts the test's small object inline and its large one in the
// engine's large tier.
const inlineMax = 1024

// TestMetricsFollowRequests drives a real gateway with the AWS SDK and checks
// that /metrics, scraped before and after, counts exactly those requests, and
// that the blob collector sees the stored content and its dedup.
func TestMetricsFollowRequests(t *testing.T) {
	for _, tc := range []struct{ engine, largeTier string }{
		{testgw.Embedded, config.EngineLocal},
		{config.EnginePGChunks, config.EnginePGChunks},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			gw := testgw.Start(t, testgw.Options{Engine: tc.engine, InlineMax: inlineMax})
			if gw.MetricsURL == "" {
				t.Fatal("testgw gave no metrics URL")
			}
			if code, body := get(t, gw.MetricsURL+"/healthz"); code != 200 || body != "ok" {
				t.Fatalf("/healthz: %d %q", code, body)
			}
			if code, body := get(t, gw.MetricsURL+"/readyz"); code != 200 || body != "ready" {
				t.Fatalf("/readyz: %d %q", code, body)
			}

			before := scrapeMetrics(t, gw.MetricsURL)
			if n, ok := before.value("s3gate_blobs", "tier", "inline"); !ok || n != 0 {
				t.Fatalf("fresh store: s3gate_blobs{tier=inline} = %v (present %v), want 0", n, ok)
			}
			small := bytes.Repeat([]byte("s3gate "), 100)[:700]
			large := make([]byte, 8192)
			_, _ = rand.Read(large)

			ctx := context.Background()
			cli := sdkClient(gw)
			must := func(_ any, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(cli.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("metrics")}))
			for _, k := range []string{"a", "b"} { // same content twice: one blob
				must(cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("metrics"), Key: aws.String(k), Body: bytes.NewReader(small)}))
			}
			must(cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("metrics"), Key: aws.String("large"), Body: bytes.NewReader(large)}))
			out, err := cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("metrics"), Key: aws.String("a")})
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(out.Body)
			_ = out.Body.Close()
			if err != nil || !bytes.Equal(got, small) {
				t.Fatalf("GetObject: %d bytes, %v", len(got), err)
			}
			_, err = cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("metrics"), Key: aws.String("missing")})
			var re *smithyhttp.ResponseError
			if !errors.As(err, &re) || re.HTTPStatusCode() != 404 {
				t.Fatalf("HeadObject of a missing key: %v", err)
			}

			after := scrapeMetrics(t, gw.MetricsURL)
			delta := func(name string, labels ...string) float64 {
				return after.v(name, labels...) - before.v(name, labels...)
			}
			for _, c := range []struct {
				op, class string
				want      float64
			}{
				{"CreateBucket", "2xx", 1},
				{"PutObject", "2xx", 3},
				{"GetObject", "2xx", 1},
				{"HeadObject", "4xx", 1},
				{"HeadObject", "2xx", 0},
			} {
				if d := delta("s3gate_requests_total", "operation", c.op, "status_class", c.class); d != c.want {
					t.Errorf("s3gate_requests_total{%s,%s} grew by %v, want %v", c.op, c.class, d, c.want)
				}
			}
			if d := delta("s3gate_request_duration_seconds", "operation", "PutObject"); d != 3 {
				t.Errorf("PutObject duration observations grew by %v, want 3", d)
			}
			// The SDK's body may carry chunk framing: at least the content.
			if d := delta("s3gate_request_bytes_total", "operation", "PutObject"); d < float64(2*len(small)+len(large)) {
				t.Errorf("PutObject request bytes grew by %v, want >= %d", d, 2*len(small)+len(large))
			}
			if d := delta("s3gate_response_bytes_total", "operation", "GetObject"); d != float64(len(small)) {
				t.Errorf("GetObject response bytes grew by %v, want %d", d, len(small))
			}
			if n := after.v("s3gate_requests_in_flight"); n != 0 {
				t.Errorf("requests in flight between requests: %v", n)
			}
			for _, c := range []struct {
				name, tier string
				want       float64
			}{
				{"s3gate_blobs", "inline", 1},
				{"s3gate_blob_bytes", "inline", float64(len(small))},
				{"s3gate_blobs", tc.largeTier, 1},
				{"s3gate_blob_bytes", tc.largeTier, float64(len(large))},
			} {
				if n, ok := after.value(c.name, "tier", c.tier); !ok || n != c.want {
					t.Errorf("%s{tier=%q} = %v (present %v), want %v", c.name, c.tier, n, ok, c.want)
				}
			}
			if n := after.v("s3gate_object_logical_bytes"); n != float64(2*len(small)+len(large)) {
				t.Errorf("logical bytes %v, want %d", n, 2*len(small)+len(large))
			}
			if n := after.v("s3gate_dedup_saved_bytes"); n != float64(len(small)) {
				t.Errorf("dedup saved %v bytes, want %d", n, len(small))
			}
			maxConns, hasPool := after.value("s3gate_db_pool_max_connections")
			if tc.engine == testgw.Embedded {
				if hasPool {
					t.Error("the embedded engine exports PostgreSQL pool metrics")
				}
			} else {
				if !hasPool || maxConns <= 0 {
					t.Errorf("pool max connections %v (present %v)", maxConns, hasPool)
				}
				if after.v("s3gate_db_pool_acquires_total") <= before.v("s3gate_db_pool_acquires_total") {
					t.Error("pool acquisitions did not grow with the requests")
				}
			}
			if _, ok := after.value("go_goroutines"); !ok {
				t.Error("no Go runtime metrics")
			}
		})
	}
}

// TestReadyzFollowsPostgreSQL cuts the gateway's way to PostgreSQL (a TCP
// proxy between them): /readyz turns 503 naming the database while /healthz
// stays 200, and turns 200 again when the connection is restored. The shared
// pgtest server is never stopped.
func TestReadyzFollowsPostgreSQL(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.Addr()
	server.WithoutClaim(t, u.String()) // the cut costs the claim (TestClaimLossStopsWork)
	gw := testgw.Start(t, testgw.Options{Engine: config.EnginePGChunks, DatabaseURL: u.String()})
	ready := gw.MetricsURL + "/readyz"

	if code, body := get(t, ready); code != 200 {
		t.Fatalf("/readyz before the cut: %d %q", code, body)
	}
	proxy.Cut()
	body := waitStatus(t, ready, 503)
	if !strings.Contains(body, "database") {
		t.Fatalf("/readyz reason %q does not name the database", body)
	}
	if code, _ := get(t, gw.MetricsURL+"/healthz"); code != 200 {
		t.Fatalf("/healthz %d while the database is away: the process is alive", code)
	}
	// The scrape survives a failing blob collector.
	s := scrapeMetrics(t, gw.MetricsURL)
	if _, ok := s.value("s3gate_blobs", "tier", "inline"); ok {
		t.Error("blob metrics reported while the database is unreachable")
	}
	if s.v("s3gate_blob_stats_errors_total") < 1 {
		t.Error("the failed blob statistics were not counted")
	}
	proxy.Restore()
	waitStatus(t, ready, 200)
	if _, err := sdkClient(gw).ListBuckets(context.Background(), &s3.ListBucketsInput{}); err != nil {
		t.Fatalf("ListBuckets after the database returned: %v", err)
	}
}

// TestReadyzFollowsStorage takes the embedded engine's stage directory away:
// the storage is not writable and /readyz says so; putting it back heals it.
func TestReadyzFollowsStorage(t *testing.T) {
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded})
	ready := gw.MetricsURL + "/readyz"
	if code, body := get(t, ready); code != 200 {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	stage := filepath.Join(gw.DataDir, "stage")
	if err := os.Rename(stage, stage+".away"); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, ready)
	if code != 503 || !strings.Contains(body, "storage") {
		t.Fatalf("/readyz without a stage directory: %d %q, want 503 naming the storage", code, body)
	}
	if err := os.Rename(stage+".away", stage); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, ready); code != 200 {
		t.Fatalf("/readyz after the stage directory returned: %d %q", code, body)
	}
}

// TestRoleMetric: a serving instance reports the owner role, on the embedded
// default and on PostgreSQL (a standby's role is asserted with real processes
// in cmd/s3gate).
func TestRoleMetric(t *testing.T) {
	for _, engine := range []string{testgw.Embedded, config.EnginePGChunks} {
		t.Run(engine, func(t *testing.T) {
			gw := testgw.Start(t, testgw.Options{Engine: engine})
			s := scrapeMetrics(t, gw.MetricsURL)
			owner, ok1 := s.value("s3gate_role", "role", server.RoleOwner)
			_, ok2 := s.value("s3gate_role", "role", server.RoleStandby)
			if !ok1 || owner != 1 || ok2 {
				t.Fatalf("s3gate_role: owner %v (present %v), standby present %v; want owner 1 alone", owner, ok1, ok2)
			}
		})
	}
}
