package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// waitLimit bounds every wait for a condition; it is a safety net against a
// hung test, never a speed assertion.
const waitLimit = 30 * time.Second

func sdkClient(gw *testgw.Gateway) *s3.Client {
	cfg := aws.Config{
		Region:      gw.Region,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, ""),
		HTTPClient:  gw.HTTPClient,
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(gw.Endpoint)
		o.UsePathStyle = true
	})
}

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
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
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// scrape parses the text exposition of a /metrics endpoint, as a Prometheus
// server would.
type scrape map[string]*dto.MetricFamily

func scrapeMetrics(t *testing.T, base string) scrape {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: parse: %v", err)
	}
	return mfs
}

// value returns the value of the series of name whose labels include labels
// (name=value pairs), and whether it exists. Histograms give their count.
func (s scrape) value(name string, labels ...string) (float64, bool) {
	mf, ok := s[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// v is value with absent series read as 0 (a counter not yet incremented).
func (s scrape) v(name string, labels ...string) float64 {
	f, _ := s.value(name, labels...)
	return f
}

// waitStatus polls url until it answers want, and returns the body.
func waitStatus(t *testing.T, url string, want int) string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		code, body := get(t, url)
		if code == want {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still answers %d %q, want %d", url, code, body, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cutProxy forwards TCP connections to a target until cut: Cut closes every
// open connection and makes new ones close at once (the database looks
// unreachable); Restore forwards again.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = p.ln.Close() // ends accept
		p.Cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		cut := p.cut
		p.mu.Unlock()
		if cut {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, up) {
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// track registers a connection pair, unless the proxy was cut meanwhile.
func (p *cutProxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = a.Close()
		_ = b.Close()
		return false
	}
	p.conns[a], p.conns[b] = struct{}{}, struct{}{}
	return true
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src) // ends when either side is closed
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *cutProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// signedRequest builds a SigV4-signed request the way the aws cli would send
// it, with the given payload hash (UNSIGNED-PAYLOAD or the body's SHA-256).
func signedRequest(t *testing.T, method, url string, body io.Reader, size int64, payloadHash, region, ak, sk string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	creds := aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payloadHash, "s3", region, time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}
