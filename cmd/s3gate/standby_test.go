package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/internal/freeport"
	"github.com/s3gate/s3gate/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// gatewayProc is a real `s3gate serve` process.
type gatewayProc struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	msgs []string
	out  bytes.Buffer // stdout, under mu
	seen chan string  // every log message, as it arrives
	done chan error
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "s3gate")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.Addr(t)
}

func startProc(t *testing.T, bin, dsn string, extra ...string) *gatewayProc {
	t.Helper()
	p := &gatewayProc{addr: freeAddr(t), seen: make(chan string, 256), done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Env = append(os.Environ(),
		"S3GATE_DATABASE_URL="+dsn, "S3GATE_ADDR="+p.addr, "S3GATE_METRICS_ADDR=off",
		"S3GATE_ROOT_ACCESS_KEY=standbykey", "S3GATE_ROOT_SECRET_KEY=standby-secret-key",
		"S3GATE_DATA_DIR="+t.TempDir(), "S3GATE_LOG_FORMAT=json", "S3GATE_DRAIN_TIMEOUT=5s")
	p.cmd.Env = append(p.cmd.Env, extra...)
	p.cmd.Stdout = lockedWriter{&p.mu, &p.out}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg string }
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				p.mu.Lock()
				p.msgs = append(p.msgs, sc.Text())
				p.mu.Unlock()
				select {
				case p.seen <- line.Msg:
				default:
				}
			}
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
	})
	return p
}

// waitFor waits for a log message that starts with prefix; the bound only
// keeps a broken build from hanging the suite.
func (p *gatewayProc) waitFor(t *testing.T, prefix string) {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		select {
		case m := <-p.seen:
			if strings.HasPrefix(m, prefix) {
				return
			}
		case err := <-p.done:
			p.done <- err
			t.Fatalf("gateway exited (%v) before %q; log:\n%s", err, prefix, p.log())
		case <-deadline:
			t.Fatalf("no %q; log:\n%s", prefix, p.log())
		}
	}
}

func (p *gatewayProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.msgs, "\n")
}

func (p *gatewayProc) client() *s3.Client { return p.clientWith("standbykey", "standby-secret-key") }

func (p *gatewayProc) clientWith(ak, sk string) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + p.addr),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(ak, sk, ""),
	})
}

// stdout is what the process printed on its standard output so far.
func (p *gatewayProc) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// lockedWriter writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestStandbyTakesOver: a second gateway on the same database waits as a
// standby, takes over after the owner is killed with SIGKILL, and serves the
// same objects; a third with S3GATE_STANDBY=refuse exits 1.
func TestStandbyTakesOver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three gateways")
	}
	dsn := pgtest.DSN(t)
	bin := buildBinary(t)
	ctx := context.Background()

	a := startProc(t, bin, dsn)
	a.waitFor(t, "s3gate serving")
	payload := bytes.Repeat([]byte("standby takeover\n"), 200_000) // 3.4 MiB: above the knee
	ca := a.client()
	if _, err := ca.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("owned")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ca.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("owned"), Key: aws.String("k"), Body: bytes.NewReader(payload)}); err != nil {
		t.Fatal(err)
	}

	b := startProc(t, bin, dsn, "S3GATE_STANDBY=wait")
	b.waitFor(t, "standby")
	if c, err := net.DialTimeout("tcp", b.addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the standby accepts connections while another instance owns the database")
	}

	refused := startProc(t, bin, dsn, "S3GATE_STANDBY=refuse")
	if err := <-refused.done; err == nil || refused.cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("STANDBY=refuse beside an owner: %v (exit %d), want exit 1; log:\n%s", err, refused.cmd.ProcessState.ExitCode(), refused.log())
	}

	killed := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	b.waitFor(t, "s3gate serving")
	t.Logf("standby took over %v after the owner was killed", time.Since(killed).Round(10*time.Millisecond))

	out, err := b.client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("owned"), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("GET from the new owner: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || sha256.Sum256(got) != sha256.Sum256(payload) {
		t.Fatalf("new owner served %d bytes (%v), want the %d bytes written to the old owner", len(got), err, len(payload))
	}
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-b.done; err != nil {
		t.Fatalf("graceful stop of the new owner: %v; log:\n%s", err, b.log())
	}
}

// TestOwnerExitsOnLostClaim: when the owner's claim session is terminated on
// the server, the gateway stops all work and exits 1.
func TestOwnerExitsOnLostClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dsn := pgtest.DSN(t)
	bin := buildBinary(t)
	a := startProc(t, bin, dsn)
	a.waitFor(t, "s3gate serving")
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(context.Background(),
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 's3gate-owner' AND datname = current_database()`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate the owner session: %d sessions, %v", n, err)
	}
	err = <-a.done
	if code := a.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("after losing its claim the gateway exited %d (%v), want 1; log:\n%s", code, err, a.log())
	}
	if !strings.Contains(a.log(), "ownership of the database lost") {
		t.Fatalf("no loss logged:\n%s", a.log())
	}
}
