package crashtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/internal/pgtest"
)

// TestPostgresCrashAfterAck proves ADR 024's crash claim: the stage writes of
// a large PUT (pgchunks' chunk rows, pglo's lo_put) commit with
// synchronous_commit off, and the synchronous commit of the joint
// transaction that publishes the object flushes the WAL that covers them.
// Each round PUTs one large object and, the moment the gateway acknowledges
// it, kills PostgreSQL (pgtest.Server.Crash: no shutdown checkpoint, so the
// restart replays the WAL); after recovery every object acknowledged so far
// reads back byte-exact, and at the end GC leaves nothing unreferenced and
// fsck finds every stored byte in place.
//
// The server runs with synchronous_commit=on, PostgreSQL's default (pgtest
// turns it off), which the joint transaction inherits; without it the
// acknowledged objects are lost in the crash. Both modes stage and publish
// large content alike, and both are run: in fleet mode one gateway process
// lives through every crash on its pool's reconnects; in the default
// single-instance mode a crash costs the gateway its writer claim, and the
// test, as its supervisor, waits for the process to exit 1 (ADR 004) and
// starts a new one on the same database and data directory before it reads
// back.
func TestPostgresCrashAfterAck(t *testing.T) {
	bin := buildBinary(t, t.TempDir())
	for _, mode := range []crashMode{
		{name: "fleet", env: []string{"S3GATE_FLEET=true"},
			recover: func(ctx context.Context, t *testing.T, g *gateway, _ int, _ time.Time) { waitServing(ctx, t, g) }},
		// Without online GC: each start's first run holds the GC lease
		// through its pin window (8 s), the next crash ends the process
		// with the lease row unreleased, and the final collection would
		// wait out the row's 30 s expiry.
		{name: "single", env: []string{"S3GATE_GC_INTERVAL=0"}, recover: restartAfterClaimLoss},
	} {
		t.Run(mode.name, func(t *testing.T) {
			for ei, engine := range []string{"pgchunks", "pglo"} {
				t.Run(engine, func(t *testing.T) { crashAfterAck(t, bin, engine, uint64(0xc0de+16*ei), mode) })
			}
		})
	}
}

// crashMode is how a gateway lives through the crashes of
// TestPostgresCrashAfterAck.
type crashMode struct {
	name string
	env  []string // further S3GATE_* settings of the gateway
	// recover returns once g serves again after PostgreSQL recovered from
	// crash number crashes (1 for the first), which happened at crashed.
	recover func(ctx context.Context, t *testing.T, g *gateway, crashes int, crashed time.Time)
}

// crashAfterAck runs mode's rounds on engine against a PostgreSQL of its
// own; seed is the first round's payload seed.
func crashAfterAck(t *testing.T, bin, engine string, seed uint64, mode crashMode) {
	const rounds = 4
	srv := pgtest.NewServer(t)
	srv.Set("synchronous_commit=on")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	dsn, err := srv.CreateDatabase("crash")
	if err != nil {
		t.Fatal(err)
	}
	g := newGatewayOn(t, bin, engine, dsn, mode.env...)
	c := g.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // hang guard
	defer cancel()
	bucket := "pgcrash"
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}

	type object struct {
		key  string
		size int
		sum  [32]byte
	}
	var acked []object
	verify := func(phase string) {
		t.Helper()
		for _, o := range acked {
			sum, found, err := readBackOutage(ctx, c, bucket, o.key)
			switch {
			case err != nil:
				t.Fatalf("%s: %s: %v", phase, o.key, err)
			case !found:
				t.Errorf("%s: acknowledged %s (%d bytes) is lost", phase, o.key, o.size)
			case sum != o.sum:
				t.Errorf("%s: acknowledged %s (%d bytes) has the wrong bytes", phase, o.key, o.size)
			}
		}
	}
	for round := range rounds {
		// 3, 5, 7, 9 MiB and a little more, so that the last chunk is partial.
		size := 3<<20 + round*(2<<20) + 4099*(round+1)
		body := payload(seed+uint64(round), size)
		key := fmt.Sprintf("round/%d", round)
		if err := putOutage(ctx, c, bucket, key, body); err != nil {
			t.Fatalf("round %d: PUT %s: %v", round, key, err)
		}
		acked = append(acked, object{key: key, size: size, sum: sha256.Sum256(body)})
		crashed := time.Now()
		if err := srv.Crash(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		// Start's log is this start's alone: proof that it recovered
		// from a crash rather than opening a cleanly shut down cluster.
		if log := srv.Log(); !strings.Contains(log, "not properly shut down") {
			t.Fatalf("round %d: PostgreSQL did not recover from a crash:\n%s", round, log)
		}
		mode.recover(ctx, t, g, round+1, crashed)
		verify(fmt.Sprintf("round %d, after recovery", round))
	}

	g.inspect(func(s storeView) {
		t.Logf("%s: leftovers after %d crashes: %s", engine, rounds, describe(s.leftovers()))
		s.collectClean(t)
		if r := s.fsck(); r.BlobsChecked < rounds {
			t.Errorf("fsck checked %d blobs, want at least %d", r.BlobsChecked, rounds)
		}
	})
	verify("after GC")
}

// claimExitLimit bounds how long a single-instance gateway may take to exit
// once PostgreSQL crashed under it, as ADR 004 promises: its claim session's
// loss is known within the validity window, and everything after the loss
// ends within DRAIN_TIMEOUT (the default, which these gateways keep, is the
// 120 s maximum). A hang guard, not a timing assertion: the test logs how
// long each exit took.
const claimExitLimit = fleet.DefaultWindow + config.MaxDrainTimeout + 10*time.Second

// restartAfterClaimLoss is what a supervisor does after the database of a
// single-instance gateway crashed: it waits for the process to exit, which
// it must do with code 1 having logged the loss of its writer claim (ADR 004),
// and starts it again on the same database and data directory.
func restartAfterClaimLoss(_ context.Context, t *testing.T, g *gateway, crashes int, crashed time.Time) {
	t.Helper()
	limit := time.NewTimer(time.Until(crashed.Add(claimExitLimit)))
	defer limit.Stop()
	select {
	case <-g.Exited():
	case <-limit.C:
		t.Fatalf("crash %d: the gateway (pid %d) did not exit within %s of the crash:\n%s",
			crashes, g.PID(), claimExitLimit, g.Tail())
	}
	log, err := os.ReadFile(g.LogPath) // every start's log: one loss per crash
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("crash %d: the gateway exited %d, %s after the crash", crashes, g.ExitCode(), time.Since(crashed).Round(time.Millisecond))
	if code := g.ExitCode(); code != 1 {
		t.Fatalf("crash %d: the gateway exited %d, want 1:\n%s", crashes, code, g.Tail())
	}
	if n := strings.Count(string(log), "ownership of the database lost"); n != crashes {
		t.Fatalf("crash %d: the gateway logged %d losses of its claim, want %d:\n%s", crashes, n, crashes, g.Tail())
	}
	// Nothing was in flight: no part of the shutdown may have waited for its
	// deadline.
	for _, stuck := range []string{"shutdown step abandoned", "drain cut short"} {
		if strings.Contains(string(log), stuck) {
			t.Errorf("crash %d: the gateway's shutdown logged %q:\n%s", crashes, stuck, g.Tail())
		}
	}
	g.start()
}

// waitServing polls an authenticated request until the gateway answers it
// again after PostgreSQL came back (its pool replaces the connections the
// crash broke).
func waitServing(ctx context.Context, t *testing.T, g *gateway) {
	t.Helper()
	c := g.client()
	deadline := time.Now().Add(time.Minute) // hang guard only
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.ListBuckets(rctx, &s3.ListBucketsInput{})
		cancel()
		if err == nil {
			return
		}
		select {
		case <-g.Exited():
			t.Fatalf("the gateway exited after the PostgreSQL crash:\n%s", g.Tail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway does not serve after the PostgreSQL crash: %v\n%s", err, g.Tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// putOutage PUTs body as key and retries a failed request: a pooled
// connection that the last crash broke answers 503 once, as an outage does.
// The acknowledgement is the answer that succeeds; a failed attempt leaves
// at most a stage, which GC reaps.
func putOutage(ctx context.Context, c *s3.Client, bucket, key string, body []byte) error {
	deadline := time.Now().Add(30 * time.Second) // hang guard only
	for {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
			Body: bytes.NewReader(body)})
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readBackOutage is readBack that retries a failed request, as putOutage
// does; an answer, NoSuchKey included, is final.
func readBackOutage(ctx context.Context, c *s3.Client, bucket, key string) (sum [32]byte, found bool, err error) {
	deadline := time.Now().Add(30 * time.Second) // hang guard only
	for {
		sum, found, err = readBack(ctx, c, bucket, key)
		if err == nil || time.Now().After(deadline) {
			return sum, found, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
