package conformance

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/internal/testgw"
)

const heapMetric = "/memory/classes/heap/objects:bytes"

// heapSampler records the high-water mark of live heap objects, sampled every
// 50 ms, for the whole process (client and in-process gateway together).
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	h.peak.Store(heapNow())
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-tick.C:
				if v := heapNow(); v > h.peak.Load() {
					h.peak.Store(v)
				}
			}
		}
	}()
	return h
}

// Stop ends sampling and returns the peak.
func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	h.wg.Wait()
	if v := heapNow(); v > h.peak.Load() {
		h.peak.Store(v)
	}
	return h.peak.Load()
}

// TestLargeObjectMemoryFlat streams a 1 GiB object in and out of an in-process
// gateway and asserts that the heap never grows by anything near the object's
// size: streams must never be buffered whole (invariant 8).
func TestLargeObjectMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("1 GiB stream: skipped under -short")
	}
	if raceEnabled {
		t.Skip("1 GiB stream: skipped under -race (too slow); runs in the non-race pass")
	}
	if testgw.External() {
		t.Skip("the heap of an external server cannot be sampled")
	}
	const (
		size    = 1 << 30
		maxGrow = 256 * mib
	)
	engines := []string{"local"}
	for _, e := range testgw.Engines() {
		if e != "local" && e != testgw.Embedded {
			engines = append(engines, e) // the first PostgreSQL engine
			break
		}
	}
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			gw := testgw.Start(t, testgw.Options{Engine: engine})
			c := sdkClient(t, gw)
			bucket := mustBucket(t, c, "mem")
			key := "one-gib.bin"

			runtime.GC()
			base := heapNow()
			sampler := startHeapSampler()

			// In: UNSIGNED-PAYLOAD with a Content-Length, body from the generator,
			// hashed on the way so nothing holds the object.
			sum, md := sha256.New(), md5.New()
			src := io.TeeReader(genReader(1234, size), io.MultiWriter(sum, md))
			ctx := testCtx(t, 10*time.Minute)
			req := newRawRequest(t, ctx, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/" + key,
				Stream: src, Length: size, Payload: "UNSIGNED-PAYLOAD"})
			status, _, body := send(t, gw, req)
			if status != http.StatusOK {
				sampler.Stop()
				t.Fatalf("PUT 1 GiB: HTTP %d: %.400s", status, body)
			}
			want := hex.EncodeToString(sum.Sum(nil))
			wantETag := fmt.Sprintf(`"%x"`, md.Sum(nil))

			// Out: the SDK's GetObject, hashed while it streams.
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				sampler.Stop()
				t.Fatalf("GetObject: %v", err)
			}
			got, n, err := shaReader(out.Body)
			out.Body.Close()
			peak := sampler.Stop()
			if err != nil || got != want || n != size {
				t.Fatalf("GET 1 GiB: %d bytes sha %s (err %v), want %d bytes sha %s", n, got, err, int64(size), want)
			}
			if aws.ToString(out.ETag) != wantETag {
				t.Errorf("ETag %s, want %s", aws.ToString(out.ETag), wantETag)
			}
			grow := int64(peak) - int64(base)
			t.Logf("%s: heap baseline %.1f MiB, peak %.1f MiB, growth %.1f MiB while streaming 1 GiB in and out",
				engine, float64(base)/mib, float64(peak)/mib, float64(grow)/mib)
			if grow > maxGrow {
				t.Fatalf("heap grew by %.1f MiB (peak %.1f MiB) while streaming 1 GiB, limit %d MiB: something buffers the stream",
					float64(grow)/mib, float64(peak)/mib, maxGrow/mib)
			}
		})
	}
}
