package fleet

import (
	"errors"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// tcpProxy forwards TCP connections to a target until Blackhole, after which
// it silently drops bytes in both directions without closing anything: a
// network partition as the client sees it.
type tcpProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	pairs []*proxyPair
	wg    sync.WaitGroup
}

type proxyPair struct {
	client, server net.Conn
	blackholed     atomic.Bool
	droppedFromCli atomic.Int64
	droppedSignal  chan struct{} // receives (non-blocking) when client bytes are dropped
	clientClosed   chan struct{} // closed when the client side reads EOF or an error
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close() // target unreachable: the client sees the close
			continue
		}
		pr := &proxyPair{client: c, server: s, droppedSignal: make(chan struct{}, 1), clientClosed: make(chan struct{})}
		p.mu.Lock()
		p.pairs = append(p.pairs, pr)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); pr.pump(c, s, true) }()
		go func() { defer p.wg.Done(); pr.pump(s, c, false) }()
	}
}

func (pr *proxyPair) pump(from, to net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if pr.blackholed.Load() {
				if fromClient {
					pr.droppedFromCli.Add(int64(n))
					select {
					case pr.droppedSignal <- struct{}{}:
					default:
					}
				}
			} else if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if fromClient {
				close(pr.clientClosed)
			}
			if !pr.blackholed.Load() {
				_ = to.Close() // propagate the close, as a real network would
			}
			return
		}
	}
}

// Blackhole partitions every current connection.
func (p *tcpProxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.pairs {
		pr.blackholed.Store(true)
	}
}

// Pair returns the i-th accepted connection pair.
func (p *tcpProxy) Pair(i int) *proxyPair {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pairs[i]
}

func (p *tcpProxy) close() {
	_ = p.ln.Close() // ends accept; only "already closed" is possible
	p.mu.Lock()
	for _, pr := range p.pairs {
		_ = pr.client.Close() // tearing down the test proxy; errors do not matter
		_ = pr.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// DSN returns dsn with its host and port replaced by the proxy's.
func (p *tcpProxy) DSN(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

func proxyTarget(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if u.Port() == "" {
		t.Fatal(errors.New("dsn without port"))
	}
	return u.Host
}
