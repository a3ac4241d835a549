package pgops

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store/pg"
	"github.com/s3gate/s3gate/store/pg/content"
)

// TestStreamingStandby runs a primary and a streaming hot standby
// (pg_basebackup -R) with a gateway on each. The standby's gateway finds
// itself read-only (pg_is_in_recovery), serves what was written through
// the primary's gateway once replayed (GET, HEAD, LIST, presigned GET), and
// refuses every write with 403 AccessDenied naming the replica. A stream
// whose blob the primary's GC removes mid-way ends short, never with other
// bytes.
func TestStreamingStandby(t *testing.T) {
	primary := pgtest.NewServer(t)
	if err := primary.Start(); err != nil {
		t.Fatal(err)
	}
	dsn, err := primary.CreateDatabase("s3")
	if err != nil {
		t.Fatal(err)
	}
	// GC runs when the test says (the mid-stream deletion below).
	pc := client(start(t, config.EnginePGChunks, dsn, "S3GATE_GC_INTERVAL=0"))
	createBucket(t, pc, "bkt")
	before := sizeClasses("before/", 1)
	putAll(t, pc, "bkt", before)

	standby := pgtest.NewBlankServer(t)
	if _, err := standby.Tool(ctxT(t), "pg_basebackup", "-D", standby.DataDir(), "-h", "127.0.0.1",
		"-p", strconv.Itoa(primary.Port()), "-U", "postgres", "-R", "-X", "stream", "-c", "fast"); err != nil {
		t.Fatal(err)
	}
	if err := standby.Start(); err != nil {
		t.Fatal(err)
	}
	// Written after the base backup: these arrive by streaming replication.
	after := sizeClasses("after/", 50)[:4] // no multipart: the first set has one
	// Long enough that the paced stream below has rows left to read when the
	// primary's GC deletes them.
	long := object{key: "long", data: randBytes(77, 16*content.ChunkSize)}
	putAll(t, pc, "bkt", append(after, long))
	sdsn := standby.URL("s3")
	caughtUp(t, dsn, sdsn)

	// Why a replica streams without pins: an advisory lock on the standby
	// lives in the standby's lock table only, and the primary (its GC) can
	// take the same key exclusively meanwhile.
	sdb := connect(t, sdsn)
	var onStandby, onPrimary bool
	if err := sdb.QueryRow(ctxT(t), `SELECT pg_try_advisory_lock_shared(1)`).Scan(&onStandby); err != nil || !onStandby {
		t.Fatalf("shared advisory lock on the standby: %v, %v", onStandby, err)
	}
	if err := connect(t, dsn).QueryRow(ctxT(t), `SELECT pg_try_advisory_xact_lock(1)`).Scan(&onPrimary); err != nil || !onPrimary {
		t.Fatalf("exclusive advisory lock on the primary while the standby holds it shared: %v, %v; want granted (not shared)", onPrimary, err)
	}
	sgw := start(t, config.EnginePGChunks, sdsn)
	sc := client(sgw)
	all := append(append(before, after...), long)
	expectExactly(t, sc, "bkt", all)
	if _, err := sc.HeadObject(ctxT(t), &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("after/knee")}); err != nil {
		t.Fatalf("HEAD on the standby: %v", err)
	}
	t.Run("presigned GET", func(t *testing.T) {
		req, err := s3.NewPresignClient(sc).PresignGetObject(ctxT(t), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("after/chunks")})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := sgw.HTTPClient.Get(req.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(b, after[3].data) {
			t.Fatalf("presigned GET: status %d, %d bytes, %v; want 200 and %d bytes", resp.StatusCode, len(b), err, len(after[3].data))
		}
	})

	t.Run("writes refused", func(t *testing.T) {
		ctx := ctxT(t)
		writes := []struct {
			name string
			do   func() error
		}{
			{"PutObject", func() error {
				_, err := sc.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("new"), Body: strings.NewReader("x")})
				return err
			}},
			{"DeleteObject", func() error {
				_, err := sc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("before/inline")})
				return err
			}},
			{"DeleteObjects", func() error {
				_, err := sc.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"),
					Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("before/inline")}}}})
				return err
			}},
			{"CreateBucket", func() error {
				_, err := sc.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("other")})
				return err
			}},
			{"CreateMultipartUpload", func() error {
				_, err := sc.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp")})
				return err
			}},
			{"CopyObject", func() error {
				_, err := sc.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copy"), CopySource: aws.String("bkt/before/inline")})
				return err
			}},
		}
		for _, w := range writes {
			code, msg := apiCode(w.do())
			if code != "AccessDenied" || !strings.Contains(msg, "read-only replica") {
				t.Errorf("%s on the standby's gateway: %q %q; want AccessDenied naming the read-only replica", w.name, code, msg)
			}
		}
		expectExactly(t, sc, "bkt", all) // and nothing changed
	})

	t.Run("blob deleted mid-stream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		// Paced, so that the stream has fetched only a few of its rows when
		// the primary deletes them (pacing bounds what the source read).
		paced := client(start(t, config.EnginePGChunks, sdsn, "S3GATE_BANDWIDTH_PER_REQUEST=1MiB"))
		out, err := paced.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(long.key)})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		got := make([]byte, content.ChunkSize)
		if _, err := io.ReadFull(out.Body, got); err != nil {
			t.Fatalf("first MiB: %v", err)
		}
		if _, err := pc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String(long.key)}); err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		// The primary's GC, without grace or pin window: it sees no pin of
		// the standby's stream.
		if st, err := gc.RunOnce(ctx, pg.NewGC(pool), nil, gc.Options{Grace: -1, StageGrace: -1, PinWindow: -1}); err != nil || st.BlobsDeleted != 1 {
			t.Fatalf("primary's GC: %+v, %v; want the long object's blob deleted", st, err)
		}
		caughtUp(t, dsn, sdsn)
		rest, err := io.ReadAll(out.Body)
		got = append(got, rest...)
		if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("stream after the blob was deleted: %d of %d bytes, err %v; want a truncated body", len(got), len(long.data), err)
		}
		if len(got) >= len(long.data) || !bytes.Equal(got, long.data[:len(got)]) {
			t.Fatalf("truncated stream: %d bytes, prefix of the object: %v", len(got), bytes.Equal(got, long.data[:min(len(got), len(long.data))]))
		}
		t.Logf("the stream ended after %d of %d bytes: %v", len(got), len(long.data), err)
	})
}
