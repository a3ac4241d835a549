package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// rssBudget is how far the gateway's resident memory may rise above idle
// under the hostile load.
const rssBudget = 64 << 20

// TestHostileInputRSS: 8 concurrent XML bodies of 1,000,000 nested elements
// (DeleteObjects and CompleteMultipartUpload) and 800 connections each
// sending a 1 MB unfinished header line are each answered with an error (or
// closed), and the gateway process's peak RSS stays within 64 MiB of idle.
func TestHostileInputRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and floods it")
	}
	if raceEnabled {
		t.Skip("memory test: runs without -race (see the Makefile's second go test line)")
	}
	bin := buildBinary(t)
	p := startProc(t, bin, "") // the embedded default
	p.waitFor(t, "s3gate serving")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := p.client()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("hostile")}); err != nil {
		t.Fatal(err)
	}
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("hostile"), Key: aws.String("mp")})
	if err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	idle := procStatus(t, pid, "VmRSS")
	// Reset the peak (VmHWM) so it measures the flood, not the start-up.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("reset VmHWM: %v", err)
	}

	var peak atomic.Int64
	stopPoll := make(chan struct{})
	polled := make(chan struct{})
	go func() { // a second view beside VmHWM
		defer close(polled)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if v, err := readStatus(pid, "VmRSS"); err == nil && v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stopPoll:
				return
			case <-tick.C:
			}
		}
	}()

	nested := []byte(strings.Repeat("<a>", 1_000_000) + strings.Repeat("</a>", 1_000_000))
	t.Logf("nested body: %.1f MiB", float64(len(nested))/(1<<20))
	var wg sync.WaitGroup
	var resets atomic.Int64
	errs := make(chan error, 1000)
	for i := range 8 {
		target := "/hostile?delete"
		if i%2 == 1 {
			target = "/hostile/mp?uploadId=" + *up.UploadId
		}
		wg.Go(func() {
			status, body, err := signedPost(ctx, p.addr, target, nested)
			if err != nil {
				// Refused early, the connection is closed under the client's
				// remaining body, which may reset it before the answer is
				// read: the gateway's access log shows the answer (below).
				resets.Add(1)
				return
			}
			if status != http.StatusBadRequest || !strings.Contains(body, "<Code>MalformedXML</Code>") {
				errs <- fmt.Errorf("POST %s with 1,000,000 nested elements: HTTP %d %.300s, want 400 MalformedXML", target, status, body)
			}
		})
	}
	line := bytes.Repeat([]byte("a"), 1<<20)
	var answered, closed atomic.Int64
	for range 800 {
		wg.Go(func() {
			res, body, err := longHeaderLine(p.addr, line)
			switch {
			case err != nil:
				errs <- err
			case res == http.StatusBadRequest && strings.Contains(body, "<Code>RequestHeaderSectionTooLarge</Code>"):
				answered.Add(1)
			case res == 0:
				closed.Add(1)
			default:
				errs <- fmt.Errorf("1 MB header line answered %d %.200s, want 400 RequestHeaderSectionTooLarge or a closed connection", res, body)
			}
		})
	}
	wg.Wait()
	close(stopPoll)
	<-polled
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 5 {
			t.Error(err)
		}
	}
	hwm := procStatus(t, pid, "VmHWM")
	top := max(hwm, peak.Load())
	t.Logf("RSS idle %.1f MiB, peak under the flood %.1f MiB (VmHWM %.1f MiB); header lines: %d answered RequestHeaderSectionTooLarge, %d closed",
		mib(idle), mib(top), mib(hwm), answered.Load(), closed.Load())
	if top-idle > rssBudget {
		t.Errorf("RSS rose by %.1f MiB under the flood, want at most %d MiB", mib(top-idle), rssBudget>>20)
	}
	// Every nested body was answered MalformedXML, whatever reached the client.
	deadline := time.Now().Add(time.Minute)
	for strings.Count(p.log(), `"error_code":"MalformedXML"`) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway logged %d MalformedXML answers, want 8 (%d of them reset before the client read them); log:\n%.3000s",
				strings.Count(p.log(), `"error_code":"MalformedXML"`), resets.Load(), p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("nested bodies: 8 answered MalformedXML, %d of the answers lost to a reset under the unsent body", resets.Load())
	// The gateway still serves.
	if _, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("hostile")}); err != nil {
		t.Errorf("LIST after the flood: %v", err)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// signedPost sends body as a SigV4-signed POST (payload hash signed) on a
// connection of its own and returns the answer.
func signedPost(ctx context.Context, addr, target string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+target, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	creds, _ := credentials.NewStaticCredentialsProvider("standbykey", "standby-secret-key", "").Retrieve(ctx) // static: cannot fail
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hash, "s3", "us-east-1", time.Now()); err != nil {
		return 0, "", err
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), err
}

// longHeaderLine opens a connection, sends a request whose header line is
// line (never finished) and returns the answer, or status 0 if the gateway
// closed the connection without one.
func longHeaderLine(addr string, line []byte) (int, string, error) {
	conn, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		return 0, "", fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	// Bounds a hang only: the gateway answers long before.
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	go func() {
		// Writes fail once the gateway gave up on the request: expected.
		_, _ = conn.Write([]byte("GET /hostile HTTP/1.1\r\nHost: x\r\nX-Long: "))
		_, _ = conn.Write(line)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return 0, "", fmt.Errorf("1 MB header line: no answer and no close: %w", err)
		}
		return 0, "", nil // closed or reset
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // a reset mid-body leaves what arrived
	return resp.StatusCode, string(b), nil
}

func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	v, err := readStatus(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// readStatus reads a "kB" field of /proc/<pid>/status in bytes.
func readStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", field, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
