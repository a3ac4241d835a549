package crashtest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/store/pg"
)

const (
	scenarioObjects = 1000
	scenarioWorkers = 8
	defaultScenario = 2 << 30
)

// scenarioEnabled: the scenario is long, so it runs only when asked for by
// S3GATE_SCENARIO=1 or by naming it in -run.
func scenarioEnabled() bool {
	if os.Getenv("S3GATE_SCENARIO") == "1" {
		return true
	}
	f := flag.Lookup("test.run")
	return f != nil && strings.Contains(f.Value.String(), "Scenario")
}

// scenarioBytes is the total written per engine: S3GATE_SCENARIO_BYTES
// (sizes like 64MiB accepted) or 2 GiB.
func scenarioBytes(t *testing.T) int64 {
	s := os.Getenv("S3GATE_SCENARIO_BYTES")
	if s == "" {
		return defaultScenario
	}
	n, err := config.ParseByteSize(s)
	if err != nil || n < scenarioObjects {
		t.Fatalf("S3GATE_SCENARIO_BYTES=%q: want a size of at least %d bytes", s, scenarioObjects)
	}
	return n
}

// scenarioSizes splits total over the objects: every tenth is small enough
// to be inline, the rest share what is left (so most are above the knee).
func scenarioSizes(total int64) []int64 {
	sizes := make([]int64, scenarioObjects)
	small := min(int64(inlineMax/2), total/(4*scenarioObjects))
	rest := total - small*scenarioObjects/10
	each := rest / (scenarioObjects - scenarioObjects/10)
	var sum int64
	for i := range sizes {
		if i%10 == 0 {
			sizes[i] = small
		} else {
			sizes[i] = each
		}
		sum += sizes[i]
	}
	sizes[len(sizes)-1] += total - sum
	return sizes
}

// counters are what must return to their starting values.
type counters struct {
	BlobRows, LOPages, ChunkRows, DataFiles int64
}

func measure(t *testing.T, db *pgxpool.Pool, dataDir string) counters {
	return counters{
		BlobRows:  count(t, db, `SELECT count(*) FROM blobs`),
		LOPages:   count(t, db, `SELECT count(*) FROM pg_largeobject`),
		ChunkRows: count(t, db, `SELECT count(*) FROM blob_chunks`),
		DataFiles: dataFiles(t, dataDir),
	}
}

func relSize(t *testing.T, db *pgxpool.Pool, rel string) int64 {
	return count(t, db, fmt.Sprintf(`SELECT pg_total_relation_size('%s')`, rel))
}

// TestScenario2GiB: on each engine, write 2 GiB (S3GATE_SCENARIO_BYTES) in
// 1,000 objects through the real gateway, delete them all, run GC and
// VACUUM: blob rows, pg_largeobject pages, chunk rows and data-directory
// files return to their starting counts. The figures are logged.
func TestScenario2GiB(t *testing.T) {
	if !scenarioEnabled() {
		t.Skip("long scenario: set S3GATE_SCENARIO=1 or run it with -run TestScenario2GiB")
	}
	total := scenarioBytes(t)
	sizes := scenarioSizes(total)
	bin := buildBinary(t, t.TempDir())
	for _, engine := range []string{"pglo", "pgchunks", "local"} {
		t.Run(engine, func(t *testing.T) {
			// The gateway's own GC is off: the figures are this test's run.
			g := newGateway(t, bin, engine, "S3GATE_GC_INTERVAL=0")
			ctx := context.Background()
			c := g.client()
			bucket := "scenario"
			if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
				t.Fatal(err)
			}
			db := g.pool()
			m := g.media()
			start := measure(t, db, g.dataDir)

			began := time.Now()
			jobs := make(chan int)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var firstErr error
			for range scenarioWorkers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range jobs {
						body := payload(uint64(i)+1<<20, int(sizes[i]))
						_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket),
							Key: aws.String(fmt.Sprintf("s/%04d", i)), Body: bytes.NewReader(body)})
						if err != nil {
							mu.Lock()
							if firstErr == nil {
								firstErr = fmt.Errorf("put %d: %w", i, err)
							}
							mu.Unlock()
						}
					}
				}()
			}
			for i := range sizes {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			if firstErr != nil {
				t.Fatal(firstErr)
			}
			wrote := time.Since(began)
			peak := measure(t, db, g.dataDir)
			peakLO, peakChunks := relSize(t, db, "pg_largeobject"), relSize(t, db, "blob_chunks")

			for from := 0; from < scenarioObjects; from += 1000 {
				var ids []types.ObjectIdentifier
				for i := from; i < min(from+1000, scenarioObjects); i++ {
					ids = append(ids, types.ObjectIdentifier{Key: aws.String(fmt.Sprintf("s/%04d", i))})
				}
				out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket),
					Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
				if err != nil {
					t.Fatal(err)
				}
				if len(out.Errors) > 0 {
					t.Fatalf("delete: %d errors, first %s", len(out.Errors), aws.ToString(out.Errors[0].Message))
				}
			}
			gcStart := time.Now()
			st := collect(t, pg.NewGC(db), m)
			gcTook := time.Since(gcStart)
			for _, rel := range []string{"pg_largeobject", "blob_chunks", "blobs"} {
				if _, err := db.Exec(ctx, "VACUUM "+rel); err != nil {
					t.Fatalf("VACUUM %s: %v", rel, err)
				}
			}
			end := measure(t, db, g.dataDir)
			if end != start {
				t.Errorf("after delete, GC and VACUUM: %+v, at the start: %+v", end, start)
			}
			if st.BlobsDeleted != peak.BlobRows-start.BlobRows || st.BytesReclaimed != total {
				t.Errorf("GC reclaimed %d blobs and %d bytes; %d blobs and %d bytes were written",
					st.BlobsDeleted, st.BytesReclaimed, peak.BlobRows-start.BlobRows, total)
			}
			t.Logf("%s: wrote %s in %d objects in %s (%.0f MiB/s, %d workers); peak %+v, pg_largeobject %s, blob_chunks %s",
				engine, gc.FormatBytes(total), scenarioObjects, wrote.Round(time.Millisecond),
				float64(total)/(1<<20)/wrote.Seconds(), scenarioWorkers, peak, gc.FormatBytes(peakLO), gc.FormatBytes(peakChunks))
			t.Logf("%s: GC %s: %d blobs, %s reclaimed; after VACUUM %+v (start %+v), pg_largeobject %s, blob_chunks %s",
				engine, gcTook.Round(time.Millisecond), st.BlobsDeleted, gc.FormatBytes(st.BytesReclaimed), end, start,
				gc.FormatBytes(relSize(t, db, "pg_largeobject")), gc.FormatBytes(relSize(t, db, "blob_chunks")))
		})
	}
}

func TestScenarioSizes(t *testing.T) {
	for _, total := range []int64{scenarioObjects, 20 << 20, defaultScenario, defaultScenario + 12345} {
		sizes := scenarioSizes(total)
		var sum int64
		inline := 0
		for _, s := range sizes {
			if s < 0 {
				t.Fatalf("total %d: negative size", total)
			}
			if s <= inlineMax {
				inline++
			}
			sum += s
		}
		if sum != total || len(sizes) != scenarioObjects {
			t.Errorf("total %d: %d sizes summing to %d", total, len(sizes), sum)
		}
		if total == defaultScenario && inline != scenarioObjects/10 {
			t.Errorf("2 GiB: %d inline objects, want %d", inline, scenarioObjects/10)
		}
	}
}
