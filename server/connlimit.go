package server

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s3gate/s3gate/s3api"
)

// maxHeaderBytes caps the request line plus headers of one request. S3 itself
// takes 8 KiB of headers; 16 KiB leaves room for a presigned URL of a
// 1,024-byte key percent-encoded throughout beside a copy source as long.
// Beyond it net/http answers 431 before any handler runs, so a hostile header
// line costs about this much per connection (times the connection cap): with
// 64 KiB, 800 such connections raised RSS by up to 63 MiB on a loaded machine,
// with 16 KiB by 12-33 MiB (TestHostileInputRSS).
const maxHeaderBytes = 16 << 10

// Refusing a connection beyond the cap: at most maxRejecting at once get the
// 503 answer (each for at most rejectTime, reading at most rejectDrain bytes
// so that the answer is not lost to a reset); any more are closed at once.
const (
	maxRejecting = 64
	rejectTime   = time.Second
	rejectDrain  = 64 << 10
)

var overloadAnswer = s3api.OverloadAnswer()

// go431 is the answer net/http writes itself, straight to the connection,
// when a request's header section exceeds MaxHeaderBytes; headerTooLarge is
// S3's answer in its place (400 RequestHeaderSectionTooLarge).
var (
	go431          = []byte("HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large")
	headerTooLarge = s3api.HeaderTooLargeAnswer(maxHeaderBytes)
)

// limitListener admits at most cap(slots) connections at once. A connection
// beyond that is answered 503 SlowDown and closed, never queued: under a
// flood, clients back off instead of piling up in memory.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	rejecting chan struct{}
	plain     bool // plain HTTP: a refused connection gets the 503 answer (TLS: closed)
	refused   atomic.Int64
	wg        sync.WaitGroup // rejecting goroutines
}

func newLimitListener(ln net.Listener, max int, plain bool) *limitListener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max),
		rejecting: make(chan struct{}, maxRejecting), plain: plain}
}

// Accept returns the next connection within the cap.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			l.refuse(c)
		}
	}
}

// refuse answers c 503 SlowDown (plain HTTP, while few refusals are under
// way) or just closes it.
func (l *limitListener) refuse(c net.Conn) {
	l.refused.Add(1)
	if !l.plain {
		_ = c.Close() // nothing to tell a TLS client before its handshake
		return
	}
	select {
	case l.rejecting <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	l.wg.Go(func() {
		defer func() { <-l.rejecting }()
		defer c.Close() //nolint:errcheck // the connection is being refused
		_ = c.SetDeadline(time.Now().Add(rejectTime))
		if _, err := c.Write(overloadAnswer); err != nil {
			return
		}
		// Half-close, then read (and drop) a little of what the client sends:
		// closing with unread data would reset the connection and could
		// destroy the answer before the client reads it.
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, rejectDrain))
	})
}

// Close stops accepting and waits for the refusals under way (each bounded
// by rejectTime).
func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.wg.Wait()
	return err
}

// limitedConn frees its slot once, on Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Write passes p on, except that net/http's own 431 answer (one write of
// exactly go431, before any handler ran) becomes S3's answer.
func (c *limitedConn) Write(p []byte) (int, error) {
	if len(p) == len(go431) && bytes.Equal(p, go431) {
		if _, err := c.Conn.Write(headerTooLarge); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite lets net/http half-close as it does on a bare TCP connection
// (it does so before closing after an error answer, so the answer survives).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom keeps the TCP connection's fast paths (sendfile, splice).
func (c *limitedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
