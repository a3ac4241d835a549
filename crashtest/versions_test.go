package crashtest

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // the S3 ETag
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestKill9Versioned: on a bucket with versioning enabled, concurrent
// overwrites of a few keys (inline and above the knee) and deletes (delete
// markers) race a SIGKILL of the gateway. After the restart every
// acknowledged version and delete marker is listed under its id and every
// listed version reads back by id with the bytes of a put of its key (never
// a version without its bytes, never another key's); each key has one latest
// version, and a plain HEAD answers it (or 404 under a delete marker). After one GC run nothing unreferenced
// remains and everything still reads back.
func TestKill9Versioned(t *testing.T) {
	const keys, ops = 8, 96
	bin := buildBinary(t, t.TempDir())
	for _, engine := range []string{"pgchunks", embeddedEngine} {
		t.Run(engine, func(t *testing.T) {
			g := newGateway(t, bin, engine)
			ctx := context.Background()
			c := g.client()
			bucket := aws.String("crashv")
			if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: bucket}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: bucket,
				VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
				t.Fatal(err)
			}
			key := func(i int) string { return fmt.Sprintf("v/%d", i%keys) }
			rng := rand.New(rand.NewPCG(uint64(len(engine)), 2))
			sizes := make([]int, ops) // -1: a delete
			for i := range sizes {
				switch i % 4 {
				case 0:
					sizes[i] = inlineMax + 1 + rng.IntN(256<<10)
				case 3:
					sizes[i] = -1
				default:
					sizes[i] = rng.IntN(inlineMax)
				}
			}
			// What a version of each key may hold: the ETag of every put
			// sent to it, with the SHA-256 of its bytes.
			sent := map[string]map[string][32]byte{}
			for i, n := range sizes {
				if n < 0 {
					continue
				}
				body := payload(uint64(i), n)
				sum := md5.Sum(body) //nolint:gosec // the S3 ETag
				if sent[key(i)] == nil {
					sent[key(i)] = map[string][32]byte{}
				}
				sent[key(i)][`"`+hex.EncodeToString(sum[:])+`"`] = sha256.Sum256(body)
			}

			type ack struct {
				key    string
				marker bool
				sum    [32]byte
			}
			var acked sync.Map // version id -> ack
			g.killDuring(ops, ops/3, func(ctx context.Context, i int) bool {
				var vid string
				var a ack
				if sizes[i] < 0 {
					out, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: aws.String(key(i))})
					if err != nil {
						return false // unacknowledged
					}
					vid, a = aws.ToString(out.VersionId), ack{key: key(i), marker: true}
				} else {
					body := payload(uint64(i), sizes[i])
					out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String(key(i)), Body: bytes.NewReader(body)})
					if err != nil {
						return false
					}
					vid, a = aws.ToString(out.VersionId), ack{key: key(i), sum: sha256.Sum256(body)}
				}
				if vid == "" || vid == "null" {
					t.Errorf("%s acknowledged with version id %q on a versioned bucket", key(i), vid)
					return false
				}
				acked.Store(vid, a)
				return true
			})
			g.start()

			verify := func(phase string) {
				t.Helper()
				listed := map[string]bool{}
				latest := map[string]int{}
				latestID := map[string]string{} // "" when a delete marker is latest
				in := &s3.ListObjectVersionsInput{Bucket: bucket, MaxKeys: aws.Int32(37)}
				for pages := 0; ; pages++ {
					if pages > 100 {
						t.Fatalf("%s: ListObjectVersions does not end", phase)
					}
					out, err := c.ListObjectVersions(ctx, in)
					if err != nil {
						t.Fatalf("%s: ListObjectVersions: %v", phase, err)
					}
					for _, m := range out.DeleteMarkers {
						k, vid := aws.ToString(m.Key), aws.ToString(m.VersionId)
						listed[vid] = true
						if a, ok := acked.Load(vid); ok && (!a.(ack).marker || a.(ack).key != k) {
							t.Errorf("%s: delete marker %s of %s was acknowledged as %+v", phase, vid, k, a)
						}
						if aws.ToBool(m.IsLatest) {
							latest[k]++
							latestID[k] = ""
						}
					}
					for _, v := range out.Versions {
						k, vid := aws.ToString(v.Key), aws.ToString(v.VersionId)
						listed[vid] = true
						if aws.ToBool(v.IsLatest) {
							latest[k]++
							latestID[k] = vid
						}
						want, ok := sent[k][aws.ToString(v.ETag)]
						if !ok {
							t.Errorf("%s: version %s of %s has ETag %s, of no put to that key", phase, vid, k, aws.ToString(v.ETag))
							continue
						}
						got := getVersion(t, c, *bucket, k, vid)
						if got != want {
							t.Errorf("%s: version %s of %s reads back other bytes than its ETag's put", phase, vid, k)
						}
						if a, ok := acked.Load(vid); ok && (a.(ack).marker || a.(ack).key != k || a.(ack).sum != got) {
							t.Errorf("%s: version %s of %s differs from its acknowledged put", phase, vid, k)
						}
					}
					if !aws.ToBool(out.IsTruncated) {
						break
					}
					in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
				}
				acked.Range(func(vid, a any) bool {
					if !listed[vid.(string)] {
						t.Errorf("%s: acknowledged version %s of %s (marker %v) is lost", phase, vid, a.(ack).key, a.(ack).marker)
					}
					return true
				})
				for k, n := range latest {
					if n != 1 {
						t.Errorf("%s: %s has %d latest versions", phase, k, n)
					}
					head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(k)})
					switch {
					case latestID[k] == "" && err == nil:
						t.Errorf("%s: %s answers a HEAD while a delete marker is its latest version", phase, k)
					case latestID[k] != "" && err != nil:
						t.Errorf("%s: HEAD %s: %v (latest version %s)", phase, k, err, latestID[k])
					case err == nil && aws.ToString(head.VersionId) != latestID[k]:
						t.Errorf("%s: HEAD %s answers version %s, the latest listed is %s", phase, k, aws.ToString(head.VersionId), latestID[k])
					}
				}
			}
			verify("after restart")
			g.inspect(func(s storeView) {
				s.collectClean(t)
				s.fsck()
			})
			verify("after GC")
		})
	}
}

// getVersion reads one version by id and returns the SHA-256 of its bytes.
func getVersion(t *testing.T, c *s3.Client, bucket, key, vid string) [32]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(vid)})
	if err != nil {
		t.Fatalf("GET %s version %s: %v", key, vid, err)
	}
	defer out.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, out.Body); err != nil {
		t.Fatalf("GET %s version %s: %v", key, vid, err)
	}
	if v := aws.ToString(out.VersionId); !strings.EqualFold(v, vid) {
		t.Fatalf("GET %s version %s answered version %s", key, vid, v)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
