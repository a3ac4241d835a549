package server_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	awshttp "github.com/aws/smithy-go/transport/http"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
)

// TestDatabaseOutageAnswers503: while PostgreSQL is down, requests answer 503
// ServiceUnavailable (which clients retry), never 500; once it is back the
// same gateway serves again, with no restart.
func TestDatabaseOutageAnswers503(t *testing.T) {
	pg := pgtest.NewServer(t)
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	server.WithoutClaim(t, pg.DSN()) // stopping PostgreSQL costs the claim (TestClaimLossStopsWork)
	gw := testgw.Start(t, testgw.Options{Engine: config.EnginePGChunks, DatabaseURL: pg.DSN()})
	c := s3.NewFromConfig(aws.Config{Region: gw.Region, Credentials: sdkClient(gw).Options().Credentials, HTTPClient: gw.HTTPClient},
		func(o *s3.Options) {
			o.BaseEndpoint = aws.String(gw.Endpoint)
			o.UsePathStyle = true
			o.Retryer = aws.NopRetryer{} // see each answer
		})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	put := func(key string, size int) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("outage"), Key: aws.String(key),
			Body: bytes.NewReader(bytes.Repeat([]byte("o"), size))})
		return err
	}
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("outage")}); err != nil {
		t.Fatal(err)
	}
	if err := put("before", 100); err != nil {
		t.Fatal(err)
	}

	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
		// mayReset: the gateway answers before reading the body and closes
		// the connection; a client still sending a large body may see that
		// close as a reset, or its next write as a broken pipe, before it
		// reads the 503 (all are retried by clients). Whatever it reads
		// must be the 503.
		mayReset bool
	}{
		{"small PUT", func() error { return put("during-small", 100) }, false},
		{"large PUT", func() error { return put("during-large", 2<<20) }, true},
		{"GET", func() error {
			_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("outage"), Key: aws.String("before")})
			return err
		}, false},
		{"LIST", func() error {
			_, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("outage")})
			return err
		}, false},
	} {
		err := tc.do()
		if tc.mayReset && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
			t.Logf("%s with PostgreSQL down: the connection was reset before the answer was read (%v)", tc.name, err)
			continue
		}
		var re *awshttp.ResponseError
		var ae smithy.APIError
		if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusServiceUnavailable ||
			!errors.As(err, &ae) || ae.ErrorCode() != "ServiceUnavailable" {
			t.Errorf("%s with PostgreSQL down: %v, want 503 ServiceUnavailable", tc.name, err)
		}
	}

	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	// The pool reconnects on its own: poll until a PUT succeeds (the bound
	// only keeps a broken build from hanging).
	deadline := time.Now().Add(time.Minute)
	for {
		err := put("after", 2<<20)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no PUT succeeded within a minute of PostgreSQL's restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("outage"), Key: aws.String("before")}); err != nil {
		t.Errorf("GET after the restart: %v", err)
	}
}
