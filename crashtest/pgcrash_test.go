package crashtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

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
// acknowledged objects are lost in the crash. The gateway runs in fleet mode
// so that one process lives through every crash on its pool's reconnects: in
// the default single-instance mode a crash costs the writer claim and the
// process exits for its supervisor to restart (ADR 004). Both modes stage
// and publish large content alike.
func TestPostgresCrashAfterAck(t *testing.T) {
	const rounds = 4
	bin := buildBinary(t, t.TempDir())
	for ei, engine := range []string{"pgchunks", "pglo"} {
		t.Run(engine, func(t *testing.T) {
			srv := pgtest.NewServer(t)
			srv.Set("synchronous_commit=on")
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			dsn, err := srv.CreateDatabase("crash")
			if err != nil {
				t.Fatal(err)
			}
			g := newGatewayOn(t, bin, engine, dsn, "S3GATE_FLEET=true")
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
				// 3, 5, 7 and 9 MiB and a little more, so that the last chunk is partial.
				size := 3<<20 + round*(2<<20) + 4099*(round+1)
				body := payload(uint64(0xc0de+16*ei+round), size)
				key := fmt.Sprintf("round/%d", round)
				if err := putOutage(ctx, c, bucket, key, body); err != nil {
					t.Fatalf("round %d: PUT %s: %v", round, key, err)
				}
				acked = append(acked, object{key: key, size: size, sum: sha256.Sum256(body)})
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
				waitServing(ctx, t, g)
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
		})
	}
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
