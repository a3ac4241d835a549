package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/internal/testgw"
)

// TestShortBody: a signed PUT whose body ends (the client half-closes) before
// its Content-Length is 400 IncompleteBody and stores nothing; a PUT with no
// length at all is 411 MissingContentLength. One embedded gateway: the check
// does not depend on the engine.
func TestShortBody(t *testing.T) {
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded})
	c := sdkClient(gw)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("short")}); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(gw.Endpoint, "http://")
	// send writes a request signed with UNSIGNED-PAYLOAD whose head declares
	// length (-1: no Content-Length) and then only body, and half-closes.
	send := func(key string, length int, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, gw.Endpoint+"/short/"+key, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		creds := aws.Credentials{AccessKeyID: gw.AccessKey, SecretAccessKey: gw.SecretKey}
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", gw.Region, time.Now()); err != nil {
			t.Fatal(err)
		}
		var head strings.Builder
		head.WriteString("PUT /short/" + key + " HTTP/1.1\r\nHost: " + host + "\r\n")
		for k, vs := range req.Header {
			head.WriteString(k + ": " + vs[0] + "\r\n")
		}
		if length >= 0 {
			head.WriteString("Content-Length: " + strconv.Itoa(length) + "\r\n")
		}
		head.WriteString("\r\n")
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // hang guard
		if _, err := io.WriteString(conn, head.String()+body); err != nil {
			t.Fatal(err)
		}
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("PUT %s: %v", key, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, key string
		length    int
		body      string
		status    int
		code      string
	}{
		{"50 of 100 bytes", "half", 100, strings.Repeat("h", 50), http.StatusBadRequest, "IncompleteBody"},
		{"none of 10 bytes", "empty", 10, "", http.StatusBadRequest, "IncompleteBody"},
		{"no Content-Length", "nolength", -1, "", http.StatusLengthRequired, "MissingContentLength"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := send(tc.key, tc.length, tc.body)
			if status != tc.status || !strings.Contains(body, "<Code>"+tc.code+"</Code>") {
				t.Fatalf("HTTP %d %.300s, want %d %s", status, body, tc.status, tc.code)
			}
			if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("short"), Key: aws.String(tc.key)}); err == nil {
				t.Errorf("object %q stored after a refused PUT", tc.key)
			}
		})
	}
}
