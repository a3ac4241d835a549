package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConnectionCap: beyond the cap a connection is answered 503 SlowDown
// (S3 XML) and closed at once, not queued; a freed slot admits the next one.
func TestConnectionCap(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(raw, 2, true)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		MaxHeaderBytes: maxHeaderBytes}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	t.Cleanup(func() {
		_ = hs.Close()
		<-served
	})
	addr := raw.Addr().String()
	// get sends one request on c and returns the answer.
	get := func(c net.Conn) (*http.Response, string) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // hang guard
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial(), dial()
	for _, c := range []net.Conn{a, b} {
		if resp, body := get(c); resp.StatusCode != http.StatusOK || body != "ok" {
			t.Fatalf("within the cap: %d %q", resp.StatusCode, body)
		}
	}
	// Both slots are held by idle keep-alive connections: the third is refused.
	over := dial()
	resp, body := get(over)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "<Code>SlowDown</Code>") || !resp.Close {
		t.Fatalf("beyond the cap: %d close=%v %q, want 503 SlowDown and Connection: close", resp.StatusCode, resp.Close, body)
	}
	if n, err := over.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the refused connection stayed open (read %d bytes)", n)
	}
	if ln.refused.Load() != 1 {
		t.Errorf("refused count %d, want 1", ln.refused.Load())
	}
	// Freeing a slot admits a new connection (poll: the server notices the
	// close asynchronously).
	a.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := dial()
		resp, _ := get(c)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot freed after a connection closed: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, _ := get(b); resp.StatusCode != http.StatusOK {
		t.Errorf("an admitted connection was disturbed: %d", resp.StatusCode)
	}
}

// TestHeaderTooLarge: a header section beyond maxHeaderBytes is answered as
// S3 answers it, 400 RequestHeaderSectionTooLarge (not net/http's 431), and
// one within it is served.
func TestHeaderTooLarge(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		MaxHeaderBytes: maxHeaderBytes}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(newLimitListener(raw, 8, true)) }()
	t.Cleanup(func() {
		_ = hs.Close()
		<-served
	})
	for _, tc := range []struct {
		name   string
		header int
		status int
		want   string
	}{
		{"within the cap", maxHeaderBytes - 2<<10, http.StatusOK, "ok"},
		{"100 KiB", 100 << 10, http.StatusBadRequest, "<Code>RequestHeaderSectionTooLarge</Code>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "http://"+raw.Addr().String()+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Big", strings.Repeat("b", tc.header))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
				t.Fatalf("HTTP %d %.300s, want %d %s", resp.StatusCode, b, tc.status, tc.want)
			}
		})
	}
}
