package fleettest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// balanced is an SDK client (its standard retries) behind a client-side load
// balancer: each new connection goes to the next instance that accepts one,
// as a balancer in front of a fleet moves on from an instance that is down.
func (f *fleet) balanced() *s3.Client {
	var next atomic.Int64
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var err error
		for range len(f.insts) {
			in := f.insts[int(next.Add(1))%len(f.insts)]
			var c net.Conn
			if c, err = dialer.DialContext(ctx, network, in.addr); err == nil {
				return c, nil
			}
		}
		return nil, err
	}}
	cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		HTTPClient: &http.Client{Transport: transport}}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("http://fleet.invalid") // the balancer picks the instance
		o.UsePathStyle = true
	})
}

// rollingRestart: while clients PUT and GET through the balancer with the
// SDK's standard retries, each instance in turn gets SIGTERM, drains within
// its bound, exits 0 and starts again. No request fails (after the retries
// the SDK makes), and every read returns what was last written.
func rollingRestart(t *testing.T, f *fleet) {
	ctx := context.Background()
	c := f.balanced()
	createBucket(t, c, "rolling")
	passes := 1
	if soak() {
		passes = 3
	}
	stop := make(chan struct{})
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		fails  []string
		served atomic.Int64
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d-%d", w, n%8)
				body := payload(uint64(w*1000+n), 1000+(n%3)*inlineMax)
				rctx, cancel := context.WithTimeout(ctx, time.Minute)
				_, err := c.PutObject(rctx, &s3.PutObjectInput{Bucket: aws.String("rolling"), Key: &key, Body: bytes.NewReader(body)})
				if err == nil {
					var got []byte
					got, err = readAll(rctx, c, "rolling", key)
					if err == nil && !bytes.Equal(got, body) {
						err = fmt.Errorf("read %d bytes, not the %d just written", len(got), len(body))
					}
				}
				cancel()
				if err != nil {
					mu.Lock()
					fails = append(fails, fmt.Sprintf("%s: %v", key, err))
					mu.Unlock()
					continue
				}
				served.Add(1)
			}
		}()
	}
	waitServed := func(n int64) {
		deadline := time.Now().Add(time.Minute)
		for served.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("the clients made no progress (%d round trips)", served.Load())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for range passes {
		for _, in := range f.insts {
			waitServed(served.Load() + 10) // traffic on every instance before each restart
			in.stop()
			if code := in.ExitCode(); code != 0 {
				t.Errorf("instance %s exited %d after SIGTERM:\n%s", in.name, code, in.tail())
			}
			in.start()
		}
	}
	waitServed(served.Load() + 10)
	close(stop)
	wg.Wait()
	if len(fails) > 0 {
		t.Fatalf("%d requests failed during the rolling restart (of %d round trips), first: %s", len(fails), served.Load(), fails[0])
	}
	// Each clean stop deregistered its instance: the registry holds the three
	// current processes only (nothing reaps it here: online GC is off).
	var pids []int
	for _, in := range f.insts {
		pids = append(pids, in.pid())
	}
	db := f.pool()
	if all, cur := count(t, db, `SELECT count(*) FROM instances`), count(t, db, `SELECT count(*) FROM instances WHERE pid = ANY($1)`, pids); all != 3 || cur != 3 {
		t.Errorf("registry after the restarts: %d rows, %d of the current processes; want just the 3", all, cur)
	}
	t.Logf("%d PUT+GET round trips across %d restarts", served.Load(), passes*len(f.insts))
}
