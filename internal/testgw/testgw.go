// Package testgw starts a real s3gate gateway for tests: the same wiring as
// `s3gate serve` (package server), a real TCP listener on 127.0.0.1, a fresh
// database on a throwaway PostgreSQL (internal/pgtest) and its own data
// directory. With S3GATE_CONFORMANCE_ENDPOINT set it hands out that endpoint
// instead, so the suites built on it also run against other S3 servers.
package testgw

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/server"
)

// Options choose the gateway under test.
type Options struct {
	Engine    string // "pglo", "pgchunks", "local" (PostgreSQL metadata) or "embedded"
	TLS       bool
	InlineMax int    // 0: the default knee
	Domain    string // virtual-host base domain, "" for path style only
	// DatabaseURL, if set, is used instead of a fresh pgtest database (for
	// example a URL through a proxy the test can cut). PostgreSQL engines only.
	DatabaseURL string
	// Env holds further settings ("S3GATE_NAME=value"), applied after the
	// harness's own (for example short idle timeouts or a small pin cap).
	Env []string
}

// Gateway is a running gateway (or an external endpoint).
type Gateway struct {
	Endpoint             string
	Region               string
	AccessKey, SecretKey string
	CAFile               string
	HTTPClient           *http.Client
	DatabaseURL          string
	DataDir              string
	// MetricsURL is the base URL of the metrics listener (/metrics,
	// /healthz, /readyz), "" for an external endpoint.
	MetricsURL string
}

// Test credentials of in-process gateways.
const (
	AccessKey = "s3gatetestkey"
	SecretKey = "s3gate-test-secret-key-0123456789"
)

// Engines lists the large engines the matrix runs over.
func Engines() []string {
	if External() {
		return []string{"external"}
	}
	return []string{Embedded, config.EnginePGChunks, config.EnginePGLO, config.EngineLocal}
}

// Embedded names the embedded default (no PostgreSQL) in Options.Engine.
const Embedded = "embedded"

// External reports whether the suite targets an external endpoint.
func External() bool { return os.Getenv("S3GATE_CONFORMANCE_ENDPOINT") != "" }

// Start returns a running gateway that t.Cleanup stops.
func Start(t testing.TB, o Options) *Gateway {
	t.Helper()
	if External() {
		return external(t)
	}
	dsn, large := "", o.Engine
	if o.Engine == Embedded {
		large = config.EngineLocal
	} else if o.DatabaseURL != "" {
		dsn = o.DatabaseURL
	} else {
		dsn = pgtest.DSN(t)
	}
	dir := t.TempDir()
	gw := &Gateway{Region: "us-east-1", AccessKey: AccessKey, SecretKey: SecretKey,
		DatabaseURL: dsn, DataDir: filepath.Join(dir, "data"), HTTPClient: &http.Client{}}
	environ := []string{
		"S3GATE_DATABASE_URL=" + dsn,
		"S3GATE_ROOT_ACCESS_KEY=" + AccessKey,
		"S3GATE_ROOT_SECRET_KEY=" + SecretKey,
		"S3GATE_REGION=" + gw.Region,
		"S3GATE_LARGE_ENGINE=" + large,
		"S3GATE_DATA_DIR=" + gw.DataDir,
		"S3GATE_DOMAIN=" + o.Domain,
		"S3GATE_DRAIN_TIMEOUT=5s",
		"S3GATE_METRICS_ADDR=127.0.0.1:0", // testgw listens itself, below
		"S3GATE_METRICS_STATS_TTL=0s",     // tests see blob statistics at once
	}
	if o.InlineMax > 0 {
		environ = append(environ, "S3GATE_INLINE_MAX="+strconv.Itoa(o.InlineMax))
	}
	environ = append(environ, o.Env...)
	scheme := "http"
	if o.TLS {
		scheme = "https"
		cert, key := writeTestCert(t, dir)
		environ = append(environ, "S3GATE_TLS_CERT_FILE="+cert, "S3GATE_TLS_KEY_FILE="+key)
		gw.CAFile = cert // self-signed: the certificate is its own CA
		gw.HTTPClient = clientTrusting(t, cert)
	}
	cfg, err := config.Load(nil, environ, io.Discard)
	if err != nil {
		t.Fatalf("testgw: config: %v", err)
	}
	lvl := slog.LevelWarn
	if os.Getenv("S3GATE_TEST_LOG") != "" {
		lvl = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatalf("testgw: start gateway: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		srv.Close()
		t.Fatalf("testgw: listen: %v", err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		_ = ln.Close() // the listen error is the one to report
		srv.Close()
		t.Fatalf("testgw: listen for metrics: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	// The metrics listener stops after the S3 drain, as in cmd/s3gate.
	mctx, mcancel := context.WithCancel(context.Background())
	mdone := make(chan error, 1)
	go func() { mdone <- srv.ServeMetrics(mctx, mln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; errors.Is(err, context.DeadlineExceeded) {
			// A request still open after the drain timeout: a test that
			// abandoned a response, or a client still sending. The gateway
			// closed it; say so without failing the test that owns it.
			t.Logf("testgw: drain timed out, open connections closed: %v", err)
		} else if err != nil {
			t.Errorf("testgw: gateway stopped with error: %v", err)
		}
		mcancel()
		if err := <-mdone; err != nil {
			t.Errorf("testgw: metrics listener stopped with error: %v", err)
		}
		srv.Close()
	})
	gw.Endpoint = scheme + "://" + ln.Addr().String()
	gw.MetricsURL = "http://" + mln.Addr().String()
	return gw
}

func external(t testing.TB) *Gateway {
	gw := &Gateway{
		Endpoint:   os.Getenv("S3GATE_CONFORMANCE_ENDPOINT"),
		Region:     os.Getenv("S3GATE_CONFORMANCE_REGION"),
		AccessKey:  os.Getenv("S3GATE_CONFORMANCE_ACCESS_KEY"),
		SecretKey:  os.Getenv("S3GATE_CONFORMANCE_SECRET_KEY"),
		CAFile:     os.Getenv("S3GATE_CONFORMANCE_CA_FILE"),
		HTTPClient: &http.Client{},
	}
	if gw.Region == "" {
		gw.Region = "us-east-1"
	}
	if gw.CAFile != "" {
		gw.HTTPClient = clientTrusting(t, gw.CAFile)
	}
	return gw
}

func clientTrusting(t testing.TB, caFile string) *http.Client {
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatalf("testgw: read CA: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("testgw: no certificate in %s", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}
}

// writeTestCert writes a self-signed certificate for 127.0.0.1 and localhost.
func writeTestCert(t testing.TB, dir string) (certFile, keyFile string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testgw: key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "s3gate test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost", "*.localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testgw: certificate: %v", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("testgw: marshal key: %v", err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("testgw: write %s: %v", path, err)
	}
}
