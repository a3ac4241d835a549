package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s3gate/s3gate/internal/freeport"
	"github.com/s3gate/s3gate/internal/testgw"
)

// The gateway under measurement runs as its own process (`s3gate serve`, the
// binary built from this tree), so that its CPU time can be read from /proc
// apart from the clients' (which run in the benchmark process).

// gatewayBinary returns $S3GATE_BENCH_BIN, or builds ./cmd/s3gate of the
// module this package belongs to into a temporary directory of tb's.
func gatewayBinary(tb testing.TB) string {
	if p := os.Getenv("S3GATE_BENCH_BIN"); p != "" {
		return p
	}
	bin := filepath.Join(tb.TempDir(), "s3gate")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/s3gate")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build ../cmd/s3gate: %v\n%s", err, out)
	}
	return bin
}

// procGateway is one `s3gate serve` process on 127.0.0.1.
type procGateway struct {
	testgw.Gateway
	pid int
}

// startProcGateway runs the gateway binary bin on engine over database dsn
// ("" for the embedded default) and waits until /readyz answers 200. It is stopped (SIGTERM,
// then SIGKILL after 30 s) when tb ends.
func startProcGateway(tb testing.TB, bin, engine, dsn string) *procGateway {
	tb.Helper()
	dir := tb.TempDir()
	addr, maddr := freeAddr(tb), freeAddr(tb)
	large := engine
	if engine == testgw.Embedded {
		large, dsn = "local", ""
	}
	g := &procGateway{Gateway: testgw.Gateway{Endpoint: "http://" + addr, Region: "us-east-1",
		AccessKey: testgw.AccessKey, SecretKey: testgw.SecretKey, DatabaseURL: dsn,
		DataDir: filepath.Join(dir, "data"), MetricsURL: "http://" + maddr}}
	env := append(os.Environ(),
		"S3GATE_ADDR="+addr, "S3GATE_METRICS_ADDR="+maddr,
		"S3GATE_DATABASE_URL="+dsn, "S3GATE_LARGE_ENGINE="+large, "S3GATE_DATA_DIR="+g.DataDir,
		"S3GATE_ROOT_ACCESS_KEY="+g.AccessKey, "S3GATE_ROOT_SECRET_KEY="+g.SecretKey,
		"S3GATE_REGION="+g.Region, "S3GATE_DRAIN_TIMEOUT=5s", "S3GATE_LOG_LEVEL=warn")
	if os.Getenv("S3GATE_BENCH_TLS") != "" {
		cert, key := writeCert(tb, dir)
		env = append(env, "S3GATE_TLS_CERT_FILE="+cert, "S3GATE_TLS_KEY_FILE="+key)
		g.Endpoint, g.CAFile = "https://"+addr, cert
	}
	logPath := filepath.Join(dir, "gateway.log")
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatalf("gateway log: %v", err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, "serve")
	cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start gateway: %v", err)
	}
	g.pid = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			tb.Errorf("stop gateway %d: %v", g.pid, err)
		}
		select {
		case err := <-exited:
			if err != nil {
				tb.Errorf("gateway %d exited: %v\n%s", g.pid, err, tail(logPath))
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill() // it ignored SIGTERM; the error below says so
			<-exited
			tb.Errorf("gateway %d ignored SIGTERM for 30 s and was killed", g.pid)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.MetricsURL+"/readyz", nil) // constant URL: no error
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close() //nolint:errcheck // the status decides
			if resp.StatusCode == http.StatusOK {
				return g
			}
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			tb.Fatalf("gateway exited during start-up: %v\n%s", err, tail(logPath))
		case <-ctx.Done():
			tb.Fatalf("gateway not ready after 90 s\n%s", tail(logPath))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cpu returns the gateway process's user+system CPU time so far.
func (g *procGateway) cpu() (time.Duration, bool) {
	st, err := readStat(g.pid)
	if err != nil {
		return 0, false
	}
	return time.Duration(st.utime+st.stime) * clockTick, true
}

func freeAddr(tb testing.TB) string { return freeport.Addr(tb) }

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// writeCert writes a self-signed certificate for 127.0.0.1 (S3GATE_BENCH_TLS).
func writeCert(tb testing.TB, dir string) (certFile, keyFile string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("tls key: %v", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "s3gate bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("tls certificate: %v", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatalf("tls key: %v", err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for path, blk := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
			tb.Fatalf("write %s: %v", path, err)
		}
	}
	return certFile, keyFile
}
