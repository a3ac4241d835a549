package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
	"github.com/s3gate/s3gate/store/localfs"
)

// blobFiles counts the blob files of a data directory.
func blobFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := localfs.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := m.BlobIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// TestOnlineGCEmbedded: serve runs online GC on the embedded default too
// (no lease: one process owns the data directory). Objects written and
// deleted are reclaimed within its interval: their files go, and the GC
// metrics count them.
func TestOnlineGCEmbedded(t *testing.T) {
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded, InlineMax: 1024,
		Env: []string{"S3GATE_GC_INTERVAL=50ms", "S3GATE_GC_GRACE=1ms"}})
	c := sdkClient(gw)
	ctx := context.Background()
	bucket := "online-gc"
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	const objects = 20
	for i := range objects {
		body := bytes.Repeat([]byte{byte(i), 'g'}, 600+i*100) // above the knee: a file each
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(fmt.Sprint(i)),
			Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := blobFiles(t, gw.DataDir); n != objects {
		t.Fatalf("%d blob files after the puts, want %d", n, objects)
	}
	for i := range objects {
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(waitLimit)
	for blobFiles(t, gw.DataDir) != 0 || scrapeMetrics(t, gw.MetricsURL).v("s3gate_gc_reclaimed_blobs_total") < objects {
		if time.Now().After(deadline) {
			m := scrapeMetrics(t, gw.MetricsURL)
			t.Fatalf("online GC: %d blob files left, %v blobs reclaimed in %v runs", blobFiles(t, gw.DataDir),
				m.v("s3gate_gc_reclaimed_blobs_total"), m.v("s3gate_gc_sweeps_total"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSecondServeRefused: a second gateway on a running embedded gateway's
// data directory refuses to start, naming the directory (one process per
// data directory: online GC runs inside the first).
func TestSecondServeRefused(t *testing.T) {
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded})
	cfg, err := config.Load(nil, []string{"S3GATE_DATA_DIR=" + gw.DataDir, "S3GATE_ROOT_ACCESS_KEY=" + gw.AccessKey,
		"S3GATE_ROOT_SECRET_KEY=" + gw.SecretKey}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		srv.Close()
		t.Fatal("a second gateway started on a data directory in use")
	}
	if msg := err.Error(); !strings.Contains(msg, gw.DataDir) || !strings.Contains(msg, "in use") || strings.Contains(msg, "\n") {
		t.Fatalf("error %q: want one line naming %s", msg, gw.DataDir)
	}
}
