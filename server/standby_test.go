package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
)

// TestStandbyProbes: a standby serves METRICS_ADDR while it waits (/healthz
// 200, /readyz 503 "standby"), and a standby stopped while waiting closes it.
func TestStandbyProbes(t *testing.T) {
	dsn := pgtest.DSN(t)
	startGateway(t, gatewaySetup{env: pgEnv(t, dsn)}) // the owner
	maddr := freeAddr(t)
	cfg, err := config.Load(nil, pgEnv(t, dsn, "S3GATE_METRICS_ADDR="+maddr,
		"S3GATE_ROOT_ACCESS_KEY="+testgw.AccessKey, "S3GATE_ROOT_SECRET_KEY="+testgw.SecretKey), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := newLogSink()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		srv, err := server.New(ctx, cfg, log.logger())
		if srv != nil {
			srv.Close()
		}
		done <- err
	}()
	log.waitFor(t, "standby: health and metrics served")
	base := "http://" + maddr
	for _, p := range []struct {
		path string
		code int
		body string
	}{{"/healthz", http.StatusOK, "ok"}, {"/readyz", http.StatusServiceUnavailable, "standby"}} {
		if code, body := get(t, base+p.path); code != p.code || body != p.body {
			t.Errorf("standby %s: %d %q, want %d %q", p.path, code, body, p.code, p.body)
		}
	}
	sc := scrapeMetrics(t, base)
	if v := sc.v("s3gate_role", "role", server.RoleStandby); v != 1 {
		t.Errorf("standby: s3gate_role{role=standby} = %v, want 1", v)
	}
	if _, ok := sc.value("s3gate_role", "role", server.RoleOwner); ok {
		t.Error("a standby exports s3gate_role{role=owner}: alerts would read it as a lost claim")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, server.ErrNoClaim) {
			t.Fatalf("New stopped while waiting: %v, want ErrNoClaim", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("New still waits after its context ended")
	}
	if c, err := net.Dial("tcp", maddr); err == nil {
		_ = c.Close()
		t.Fatal("the standby's metrics listener is still open after New gave up")
	}
}
