// Package fleettest runs a fleet of three real `s3gate serve` processes with
// S3GATE_FLEET=true on one throwaway PostgreSQL database, per large engine
// (pgchunks, pglo, and local on one shared directory with
// S3GATE_SHARED_MEDIA=true), and proves what fleet mode promises across
// instances: read-after-write and list-after-write, multipart uploads spread
// over instances, streams that survive a delete and a sweep elsewhere, what a
// kill -9 leaves to GC, one sweeper at a time, and linearizable histories per
// key (ADR 009).
//
// A variant, "<engine>/pgbouncer-rows", runs the read/write, multipart and
// linearizability tests and a row-pin kill test with the three pools going
// through one real pgbouncer in transaction mode, S3GATE_PIN_MODE=rows and
// S3GATE_DIRECT_DATABASE_URL on PostgreSQL itself (ADR 010).
//
// The default run does the per-engine matrix for the cheap tests, pgchunks
// and local for the pgbouncer variant, and one engine (pgchunks) for the
// 64 MiB and kill tests; `make
// fleet-soak` (S3GATE_FLEET_SOAK=1) runs every test on every engine, longer.
package fleettest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/internal/gwproc"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/localfs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	accessKey = "fleettest"
	secretKey = "fleettest-secret-key"
	region    = "us-east-1"
	// inlineMax is the knee of the instances under test.
	inlineMax = 64 << 10
	// instanceTTL is the registrations' TTL: heartbeats every second.
	instanceTTL = 3 * time.Second
	// pinTTL is the pin rows' TTL: a put's row expires about a second after it.
	pinTTL = time.Second
)

// soak reports whether the long run was asked for (make fleet-soak).
func soak() bool { return os.Getenv("S3GATE_FLEET_SOAK") != "" }

// engines are the large engines of the per-engine matrix.
var engines = []string{"pgchunks", "pglo", "local"}

// bouncedEngines are the engines of the pgbouncer variant's read/write
// tests: pgchunks and local on shared media by default, every engine in the
// soak run.
func bouncedEngines() []string {
	if soak() {
		return engines
	}
	return []string{"pgchunks", "local"}
}

// heavyEngines are the engines of the expensive tests: pgchunks by default,
// every engine in the soak run.
func heavyEngines() []string {
	if soak() {
		return engines
	}
	return []string{"pgchunks"}
}

// buildBinary builds cmd/s3gate into dir. TestFleet builds it once for all
// its subtests.
func buildBinary(t *testing.T, dir string) string { return gwproc.BuildBinary(t, dir) }

// fleet is three instances on one database.
type fleet struct {
	t       *testing.T
	engine  string
	dsn     string
	dataDir string // the shared media (local engine)
	bounced string // f.dsn through pgbouncer in transaction mode, or ""
	insts   []*instance
}

// instance is one `s3gate serve` subprocess; restarts keep its settings.
type instance struct {
	gwproc.Proc
	t     *testing.T
	name  string
	addr  string
	maddr string // metrics listener: /readyz, /metrics
}

// startFleet starts three instances (A, B, C) with S3GATE_FLEET=true on a
// fresh database; extra are further S3GATE_* settings of every instance.
func startFleet(t *testing.T, bin, engine string, extra ...string) *fleet {
	t.Helper()
	f := newFleet(t, engine)
	f.start(bin, extra...)
	return f
}

// newFleet creates the fleet's database and shared directory; start starts
// its instances (a test may prepare the database in between).
func newFleet(t *testing.T, engine string) *fleet {
	return &fleet{t: t, engine: engine, dsn: pgtest.DSN(t), dataDir: filepath.Join(t.TempDir(), "shared")}
}

// startBouncedFleet is startFleet with every instance's pool going through
// one pgbouncer in transaction mode (S3GATE_DATABASE_URL) and pinning GETs by
// rows (S3GATE_PIN_MODE=rows), its advisory-lock sessions (registry, leases,
// migrations) on PostgreSQL itself (S3GATE_DIRECT_DATABASE_URL): ADR 010.
func startBouncedFleet(t *testing.T, bin, engine string) *fleet {
	t.Helper()
	f := newFleet(t, engine)
	f.bounced = pgtest.StartPgBouncer(t, f.dsn)
	f.start(bin)
	return f
}

func (f *fleet) start(bin string, extra ...string) {
	t := f.t
	t.Helper()
	for _, name := range []string{"A", "B", "C"} {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		env := []string{
			"S3GATE_FLEET=true",
			"S3GATE_DATABASE_URL=" + f.dsn + "&application_name=s3gate-" + name,
			"S3GATE_ROOT_ACCESS_KEY=" + accessKey,
			"S3GATE_ROOT_SECRET_KEY=" + secretKey,
			"S3GATE_LARGE_ENGINE=" + f.engine,
			fmt.Sprintf("S3GATE_INLINE_MAX=%d", inlineMax),
			"S3GATE_INSTANCE_TTL=" + instanceTTL.String(),
			"S3GATE_PIN_TTL=" + pinTTL.String(), // a put's pin row expires soon after it
			"S3GATE_GC_INTERVAL=0",              // tests collect when they mean to
			"S3GATE_DRAIN_TIMEOUT=10s",
			"S3GATE_LOG_LEVEL=warn",
		}
		if f.bounced != "" {
			env[1] = "S3GATE_DATABASE_URL=" + f.bounced + "&application_name=s3gate-" + name
			env = append(env, "S3GATE_PIN_MODE=rows", "S3GATE_DIRECT_DATABASE_URL="+f.dsn+"&application_name=s3gate-"+name+"-direct")
		}
		if f.engine == "local" {
			data = f.dataDir // one directory for the three: shared media
			env = append(env, "S3GATE_SHARED_MEDIA=true")
		}
		env = append(env, "S3GATE_DATA_DIR="+data)
		in := &instance{t: t, name: name, addr: gwproc.FreeAddr(t), maddr: gwproc.FreeAddr(t)}
		in.Proc = gwproc.Proc{Name: "instance " + name, Bin: bin, LogPath: filepath.Join(dir, "gateway.log"),
			Env: append(append([]string{"S3GATE_ADDR=" + in.addr, "S3GATE_METRICS_ADDR=" + in.maddr}, env...), extra...)}
		in.start()
		t.Cleanup(in.stop)
		f.insts = append(f.insts, in)
	}
}

// start starts the instance; it is ready when /readyz answers 200.
func (in *instance) start() {
	in.t.Helper()
	in.Start(in.t, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+in.maddr+"/readyz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
}

// pid is the instance's process id.
func (in *instance) pid() int { return in.PID() }

// kill sends SIGKILL and waits for the process to be gone.
func (in *instance) kill() { in.Kill(in.t) }

// stop ends the instance gracefully (SIGTERM), then by force; an instance
// that needed the force is a test failure (the drain is bounded).
func (in *instance) stop() {
	if !in.Stop() {
		in.t.Errorf("instance %s did not stop within 30 s of SIGTERM", in.name)
	}
}

func (in *instance) tail() string { return in.Tail() }

// client is aws-sdk-go-v2 with its default checksums and no retries, so a
// failure is seen as it is.
func (in *instance) client() *s3.Client {
	return in.clientWith(aws.NopRetryer{})
}

// clientWith is client with the given retryer (nil: the SDK's standard one).
func (in *instance) clientWith(r aws.Retryer) *s3.Client {
	return gwproc.Client(in.addr, accessKey, secretKey, r)
}

// pool opens the fleet's database for the test's own inspection.
func (f *fleet) pool() *pgxpool.Pool {
	p, err := pgxpool.New(context.Background(), f.dsn)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(p.Close)
	return p
}

// media opens the shared media (nil unless the engine is local).
func (f *fleet) media() *localfs.Media {
	if f.engine != "local" {
		return nil
	}
	m, err := localfs.Open(f.dataDir, false)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func count(t *testing.T, db *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}
