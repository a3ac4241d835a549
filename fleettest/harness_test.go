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
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"

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

// buildBinary builds cmd/s3gate into dir (as crashtest does). TestFleet
// builds it once for all its subtests.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "s3gate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/s3gate")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/s3gate: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

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
	t       *testing.T
	name    string
	bin     string
	addr    string
	maddr   string // metrics listener: /readyz, /metrics
	env     []string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
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
		in := &instance{t: t, name: name, bin: bin, addr: freeAddr(t), maddr: freeAddr(t),
			env: append(env, extra...), logPath: filepath.Join(dir, "gateway.log")}
		in.start()
		t.Cleanup(in.stop)
		f.insts = append(f.insts, in)
	}
}

func (in *instance) start() {
	t := in.t
	t.Helper()
	logf, err := os.OpenFile(in.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(in.bin, "serve")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"S3GATE_ADDR=" + in.addr, "S3GATE_METRICS_ADDR=" + in.maddr}, in.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start instance %s: %v", in.name, err)
	}
	in.cmd, in.exited = cmd, make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(cmd, in.exited)
	// Ready when /readyz answers 200 (hang guard only).
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get("http://" + in.maddr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-in.exited:
			t.Fatalf("instance %s exited during start-up: %s", in.name, in.tail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s not ready: %v\n%s", in.name, err, in.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pid is the instance's process id.
func (in *instance) pid() int { return in.cmd.Process.Pid }

// kill sends SIGKILL and waits for the process to be gone.
func (in *instance) kill() {
	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		in.t.Fatalf("kill -9 instance %s: %v", in.name, err)
	}
	<-in.exited
}

// stop ends the instance gracefully (SIGTERM), then by force; it reports
// whether it exited within the drain bound on its own.
func (in *instance) stop() {
	select {
	case <-in.exited:
		return
	default:
	}
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
	case <-time.After(30 * time.Second):
		in.t.Errorf("instance %s did not stop within 30 s of SIGTERM", in.name)
		_ = in.cmd.Process.Signal(syscall.SIGKILL)
		<-in.exited
	}
}

func (in *instance) tail() string {
	b, _ := os.ReadFile(in.logPath) // best effort, for failure messages
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// client is aws-sdk-go-v2 with its default checksums and no retries, so a
// failure is seen as it is.
func (in *instance) client() *s3.Client {
	return in.clientWith(aws.NopRetryer{})
}

// clientWith is client with the given retryer (nil: the SDK's standard one).
func (in *instance) clientWith(r aws.Retryer) *s3.Client {
	cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("http://" + in.addr)
		o.UsePathStyle = true
		if r != nil {
			o.Retryer = r
		}
	})
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
