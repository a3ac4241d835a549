package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/internal/pgtest"
)

// TestFleetSharesGeneratedRootKey: an owner and two standbys on one database,
// with no root key in the environment, all accept the one root key the owner
// generated and showed; each standby answers /healthz 200, /readyz 503
// "standby" and s3gate_role{role="standby"} 1 while it waits, and the
// standbys take over in turn after the owner stops, without a second banner.
func TestFleetSharesGeneratedRootKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three gateways")
	}
	dsn := pgtest.DSN(t)
	bin := buildBinary(t)
	ctx := context.Background()
	start := func() (*gatewayProc, string) {
		maddr := freeAddr(t)
		return startProc(t, bin, dsn, "S3GATE_ROOT_ACCESS_KEY=", "S3GATE_ROOT_SECRET_KEY=", "S3GATE_METRICS_ADDR="+maddr), "http://" + maddr
	}

	owner, _ := start()
	owner.waitFor(t, "s3gate serving")
	banner := waitOutput(t, owner, `kept in the database[^\n]*\n.*\n\s+access key  (\S+)\n\s+secret key  (\S+)\n`)
	ak, sk := banner[1], banner[2]
	if _, err := owner.clientWith(ak, sk).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("shared")}); err != nil {
		t.Fatalf("the owner with its generated key: %v", err)
	}

	var waiting []standbyProc
	for range 2 {
		p, m := start()
		p.waitFor(t, "standby: health and metrics served")
		waiting = append(waiting, standbyProc{p, m})
	}
	for len(waiting) > 0 {
		for _, sb := range waiting {
			probe(t, sb.metrics+"/healthz", http.StatusOK, "ok")
			probe(t, sb.metrics+"/readyz", http.StatusServiceUnavailable, "standby")
			probe(t, sb.metrics+"/metrics", http.StatusOK, `s3gate_role{role="standby"} 1`)
			if _, body := fetch(t, sb.metrics+"/metrics"); strings.Contains(body, `s3gate_role{role="owner"}`) {
				t.Fatal("a standby exports s3gate_role{role=\"owner\"}")
			}
			var out, errb strings.Builder
			if code := healthcheck(nil, []string{"S3GATE_METRICS_ADDR=" + strings.TrimPrefix(sb.metrics, "http://")}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "503 standby") {
				t.Fatalf("healthcheck of a standby: exit %d, %q", code, errb.String())
			}
		}
		if err := owner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-owner.done; err != nil {
			t.Fatalf("graceful stop of the owner: %v; log:\n%s", err, owner.log())
		}
		next := waitReady(t, waiting)
		owner = waiting[next].p
		probe(t, waiting[next].metrics+"/metrics", http.StatusOK, `s3gate_role{role="owner"} 1`)
		waiting = append(waiting[:next], waiting[next+1:]...)
		if _, err := owner.clientWith(ak, sk).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("shared")}); err != nil {
			t.Fatalf("the new owner refuses the generated root key: %v; log:\n%s", err, owner.log())
		}
		waitOutput(t, owner, regexp.QuoteMeta("root key "+ak+" (secret in the database"))
		if out := owner.stdout(); strings.Contains(out, sk) {
			t.Errorf("a new owner showed the secret again:\n%s", out)
		}
	}
	if err := owner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-owner.done; err != nil {
		t.Fatalf("graceful stop of the last owner: %v; log:\n%s", err, owner.log())
	}
}

// waitOutput polls the process's standard output (printed after the
// "s3gate serving" log line) until it matches re, and returns the submatches.
func waitOutput(t *testing.T, p *gatewayProc, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := rx.FindStringSubmatch(p.stdout()); m != nil {
			return m
		}
	}
	t.Fatalf("no %q in the output:\n%s", re, p.stdout())
	return nil
}

// probe GETs url and fails unless it answers status with a body that holds want.
func probe(t *testing.T, url string, status int, want string) {
	t.Helper()
	code, body := fetch(t, url)
	if code != status || !strings.Contains(body, want) {
		t.Fatalf("GET %s: %d %.300q, want %d with %q", url, code, body, status, want)
	}
}

func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// standbyProc is a gateway process and the base URL of its metrics listener.
type standbyProc struct {
	p       *gatewayProc
	metrics string
}

// waitReady polls the standbys' /readyz until one of them answers 200 and
// returns its index; the others must still answer "standby" (or "starting",
// the one that took the claim).
func waitReady(t *testing.T, sbs []standbyProc) int {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		for i, sb := range sbs {
			code, body := fetch(t, sb.metrics+"/readyz")
			switch {
			case code == http.StatusOK:
				return i
			case !strings.Contains(body, "standby") && !strings.Contains(body, "starting"):
				t.Fatalf("a standby's /readyz while the claim is free: %d %q", code, body)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no standby took over")
	return -1
}
