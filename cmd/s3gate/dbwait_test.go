package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/internal/pgtest"
)

// TestServeWaitsForDatabase: started while PostgreSQL is down, the gateway
// waits with backoff (logging each wait), and serves once PostgreSQL comes up
// about 10 s later: no supervisor needed.
func TestServeWaitsForDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and waits about 10 s")
	}
	pg := pgtest.NewServer(t) // initialized, not started
	bin := buildBinary(t)
	p := startProc(t, bin, pg.DSN(), "S3GATE_DB_WAIT=60s")
	start := time.Now()
	// Backoff 0.25, 0.5, 1, 2, 4 s: the sixth wait is logged about 7.75 s in.
	for i := 0; i < 6; i++ {
		p.waitFor(t, "waiting for PostgreSQL")
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL up %s after the gateway started", time.Since(start).Round(100*time.Millisecond))
	p.waitFor(t, "s3gate serving")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := p.client()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("late")}); err != nil {
		t.Fatalf("CreateBucket after the late start: %v", err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("late"), Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		t.Fatalf("PUT after the late start: %v", err)
	}
	if !strings.Contains(p.log(), `"next_in"`) {
		t.Errorf("the waits do not log their next delay:\n%s", p.log())
	}
}

// TestServeGivesUpOnDatabase: with PostgreSQL never up, start-up fails after
// S3GATE_DB_WAIT with exit 1 and one line naming S3GATE_DATABASE_URL.
func TestServeGivesUpOnDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	pg := pgtest.NewServer(t) // never started
	bin := buildBinary(t)
	p := startProc(t, bin, pg.DSN(), "S3GATE_DB_WAIT=1s")
	err := <-p.done
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit %d (%v), want 1; log:\n%s", code, err, p.log())
	}
	if !strings.Contains(p.log(), "S3GATE_DATABASE_URL: PostgreSQL at 127.0.0.1") || !strings.Contains(p.log(), "S3GATE_DB_WAIT") {
		t.Errorf("the failure does not name S3GATE_DATABASE_URL and S3GATE_DB_WAIT:\n%s", p.log())
	}
}
