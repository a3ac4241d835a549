package crashtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestKill9DuringUploads: 200 concurrent uploads of mixed sizes (inline and
// above the knee; 100 on the embedded default); the gateway is killed with
// SIGKILL once a third of them were acknowledged, then restarted. Every acknowledged object reads back
// with its SHA-256; an unacknowledged one is either absent or intact (never
// visible without its bytes); after one GC run nothing unreferenced remains
// (blob rows, large objects, chunk rows, blob files, stage files) and fsck
// finds every stored byte in place.
func TestKill9DuringUploads(t *testing.T) {
	uploads := 200
	if testing.Short() {
		uploads = 80
	}
	bin := buildBinary(t, t.TempDir())
	for _, engine := range append(engines(), embeddedEngine) {
		t.Run(engine, func(t *testing.T) {
			uploads := uploads
			if engine == embeddedEngine {
				uploads = 100
			}
			g := newGateway(t, bin, engine)
			ctx := context.Background()
			c := g.client()
			bucket := "crash"
			if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(len(engine)), 1))
			sizes := make([]int, uploads)
			for i := range sizes {
				if i%2 == 0 {
					sizes[i] = rng.IntN(inlineMax) // inline
				} else {
					sizes[i] = inlineMax + 1 + rng.IntN(1<<20) // large
				}
			}
			key := func(i int) string { return fmt.Sprintf("obj/%04d", i) }

			var acked sync.Map // key -> sha256
			nAck := g.killDuring(uploads, int64(uploads/3), func(ctx context.Context, i int) bool {
				body := payload(uint64(i), sizes[i])
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key(i)),
					Body: bytes.NewReader(body)}); err != nil {
					return false // unacknowledged: the kill, or refused after it
				}
				acked.Store(key(i), sha256.Sum256(body))
				return true
			})

			g.inspect(func(s storeView) {
				t.Logf("%s: leftovers after the kill: %s", engine, describe(s.leftovers()))
			})

			g.start()
			verify := func(phase string) {
				t.Helper()
				var present int
				for i := range uploads {
					sum, found, err := readBack(ctx, c, bucket, key(i))
					if err != nil {
						t.Fatalf("%s: %s: %v", phase, key(i), err)
					}
					want, wasAcked := acked.Load(key(i))
					switch {
					case wasAcked && !found:
						t.Errorf("%s: acknowledged %s is lost", phase, key(i))
					case found && sum != sha256.Sum256(payload(uint64(i), sizes[i])):
						t.Errorf("%s: %s has the wrong bytes", phase, key(i))
					case wasAcked && sum != want.([32]byte):
						t.Errorf("%s: %s differs from the acknowledged upload", phase, key(i))
					}
					if found {
						present++
					}
				}
				if int64(present) < nAck {
					t.Errorf("%s: %d objects present, %d acknowledged", phase, present, nAck)
				}
			}
			verify("after restart")

			g.inspect(func(s storeView) {
				s.collectClean(t)
				if r := s.fsck(); r.BlobsChecked < 1 {
					t.Errorf("fsck checked no blobs")
				}
			})
			verify("after GC")
		})
	}
}
