// Package gwproc runs real `s3gate serve` processes for the tests that need
// them (crashtest's kill -9 runs, fleettest's fleets): it builds the binary,
// starts a process with a given environment and log file, waits until it is
// ready, and kills or stops it.
package gwproc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/internal/freeport"
)

// Region is the region the test clients sign for.
const Region = "us-east-1"

// readyLimit bounds a start-up (a hang guard, not a timing assertion).
const readyLimit = 90 * time.Second

// BuildBinary builds cmd/s3gate into dir and returns its path.
func BuildBinary(t testing.TB, dir string) string {
	t.Helper()
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	bin := filepath.Join(dir, "s3gate")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/s3gate")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/s3gate: %v\n%s", err, out)
	}
	return bin
}

// FreeAddr is a free 127.0.0.1 address to listen on (internal/freeport).
func FreeAddr(t testing.TB) string {
	t.Helper()
	return freeport.Addr(t)
}

// Proc is one `s3gate serve` subprocess. Start may be called again once it
// has exited: a restart keeps its settings and appends to its log.
type Proc struct {
	Name    string   // names the process in failure messages
	Bin     string   // the binary (BuildBinary)
	Env     []string // its environment besides PATH and HOME
	LogPath string   // its stdout and stderr

	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts the process and polls ready (every 50 ms, each call with a
// 5 s deadline) until it returns nil; the test fails if the process exits
// first or is not ready within 90 s.
func (p *Proc) Start(t testing.TB, ready func(context.Context) error) {
	t.Helper()
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(p.Bin, "serve")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, p.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.Name, err)
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(cmd, p.exited)
	deadline := time.Now().Add(readyLimit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := ready(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited during start-up: %s", p.Name, p.Tail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready: %v\n%s", p.Name, err, p.Tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PID is the process id of the last start.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited is closed once the process of the last start has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// ExitCode is the exit code of the last start, once it has exited.
func (p *Proc) ExitCode() int { return p.cmd.ProcessState.ExitCode() }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill -9 %s: %v", p.Name, err)
	}
	<-p.exited
}

// Stop ends the process with SIGTERM and, if it has not exited within 30 s,
// with SIGKILL; it reports whether it exited on SIGTERM. A process that
// already exited is left alone (true).
func (p *Proc) Stop() bool {
	if p.cmd == nil {
		return true
	}
	select {
	case <-p.exited:
		return true
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return true
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.exited
		return false
	}
}

// Tail is the end of the log, for failure messages.
func (p *Proc) Tail() string {
	b, _ := os.ReadFile(p.LogPath) // best effort
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Client is aws-sdk-go-v2 with its default checksums on the gateway at addr,
// path-style, with retryer r (nil: the SDK's standard one).
func Client(addr, accessKey, secretKey string, r aws.Retryer) *s3.Client {
	cfg := aws.Config{Region: Region, Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("http://" + addr)
		o.UsePathStyle = true
		if r != nil {
			o.Retryer = r
		}
	})
}
