package server_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/server"
	"github.com/s3gate/s3gate/store/storetest"
)

// TestPgBouncerRowPins: with S3GATE_PIN_MODE=rows the pool goes through a
// real pgbouncer in transaction mode (the claim, the pin session and the
// migrations on S3GATE_DIRECT_DATABASE_URL), and PUT, GET, multipart upload
// and LIST round-trip byte-exact through the SDK, GETs pinned by rows. With
// the session pins, or without a direct URL, the gateway refuses to start:
// session advisory locks do not survive the pooler.
func TestPgBouncerRowPins(t *testing.T) {
	direct := pgtest.DSN(t)
	bounced := pgtest.StartPgBouncer(t, direct)

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			env  []string
		}{
			{"session pins", nil},
			{"row pins without a direct URL", []string{"S3GATE_PIN_MODE=rows"}},
			{"direct URL through the pooler", []string{"S3GATE_PIN_MODE=rows", "S3GATE_DIRECT_DATABASE_URL=" + bounced}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cfg, err := config.Load(nil, append([]string{"S3GATE_DATABASE_URL=" + bounced, "S3GATE_DATA_DIR=" + t.TempDir(),
					"S3GATE_METRICS_ADDR=off"}, tc.env...), io.Discard)
				if err != nil {
					t.Fatal(err)
				}
				srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
				if err == nil {
					srv.Close()
					t.Fatal("the gateway started with its advisory-lock sessions behind a transaction pooler")
				}
				want := "S3GATE_DATABASE_URL (-database-url): it goes through a proxy"
				if len(tc.env) == 2 {
					want = "S3GATE_DIRECT_DATABASE_URL (-direct-database-url): it goes through a proxy"
				}
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q, want it to contain %q", err, want)
				}
			})
		}
	})

	for _, engine := range []string{config.EnginePGChunks, config.EngineLocal} {
		t.Run(engine, func(t *testing.T) { roundTrip(t, engine, bounced) })
	}
}

// roundTrip is TestPgBouncerRowPins's SDK round trip on one engine, on a
// database of its own behind the same pgbouncer.
func roundTrip(t *testing.T, engine, bounced string) {
	direct := pgtest.DSN(t)
	bu, du := mustURL(t, bounced), mustURL(t, direct)
	bu.Path = du.Path
	bounced = bu.String()
	gw := testgw.Start(t, testgw.Options{Engine: engine, DatabaseURL: bounced,
		Env: []string{"S3GATE_PIN_MODE=rows", "S3GATE_PIN_TTL=3s", "S3GATE_DIRECT_DATABASE_URL=" + direct}})
	ctx := context.Background()
	c := sdkClient(gw)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	get := func(key string) []byte {
		t.Helper()
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("GetObject %s: %v", key, err)
		}
		defer out.Body.Close()
		b, err := io.ReadAll(bufio.NewReader(out.Body))
		if err != nil {
			t.Fatalf("read %s: %v", key, err)
		}
		return b
	}
	objects := map[string][]byte{"small": storetest.Bytes(1, 3000), "large": storetest.Bytes(2, 3<<20+17)}
	for key, data := range objects {
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
			t.Fatalf("PutObject %s: %v", key, err)
		}
		storetest.SameBytes(t, key, get(key), data)
	}
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp")})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	var whole []byte
	var done []types.CompletedPart
	for n, size := range []int{5 << 20, 1<<20 + 3} {
		part := storetest.Bytes(uint64(10+n), size)
		whole = append(whole, part...)
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(n + 1)), Body: bytes.NewReader(part)})
		if err != nil {
			t.Fatalf("UploadPart %d: %v", n+1, err)
		}
		done = append(done, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(n + 1))})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	storetest.SameBytes(t, "mp", get("mp"), whole)
	list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("bkt")})
	if err != nil {
		t.Fatalf("ListObjectsV2: %v", err)
	}
	var keys []string
	for _, o := range list.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	if strings.Join(keys, ",") != "large,mp,small" {
		t.Errorf("listing %v, want large, mp, small", keys)
	}
	// The GETs pinned by rows; no session holds a pin lock.
	s := scrapeMetrics(t, gw.MetricsURL)
	if v, ok := s.value("s3gate_pin_renewal_failures_total"); !ok || v != 0 {
		t.Errorf("s3gate_pin_renewal_failures_total %v (found %v), want 0", v, ok)
	}
	if _, ok := s.value("s3gate_pins", "kind", "row"); !ok {
		t.Error("no s3gate_pins{kind=\"row\"} series")
	}
	conn, err := pgx.Connect(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var pins int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pins`).Scan(&pins); err != nil || pins == 0 {
		t.Errorf("%d pin rows after the round trip (err %v), want the puts' and GETs' rows", pins, err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
