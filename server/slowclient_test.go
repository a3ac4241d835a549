package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql for PostgreSQL, as for SQLite, in writeManifest
	_ "modernc.org/sqlite"             // the embedded store's database, opened by writeManifest

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/store/embedded"
)

// waitFor polls cond until it holds, failing the test after waitLimit (a
// safety net, not a speed assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawConn dials the gateway with a small receive buffer (no autotuning), so
// that a client that reads nothing stalls the server's writes after a few
// hundred KiB.
func rawConn(t *testing.T, gw *testgw.Gateway) net.Conn {
	t.Helper()
	u, err := url.Parse(gw.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() }) // may already be closed by the test
	return c
}

func mkBucket(t *testing.T, cli *s3.Client, name string) {
	t.Helper()
	if _, err := cli.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
}

// A GET whose client reads nothing is cut off after the write-idle timeout:
// the connection is closed with the body short, and the stream's pins return
// at once (the gauge drops to 0), on the session pins of PostgreSQL and the
// local pins of the embedded store. The gateway then serves the object whole.
func TestStalledReaderIsCutOff(t *testing.T) {
	const size = 32 << 20
	data := make([]byte, size)
	_, _ = rand.Read(data)
	for _, engine := range []string{testgw.Embedded, config.EnginePGChunks} {
		t.Run(engine, func(t *testing.T) {
			gw := testgw.Start(t, testgw.Options{Engine: engine, Env: []string{"S3GATE_WRITE_IDLE_TIMEOUT=1s"}})
			cli := sdkClient(gw)
			ctx := context.Background()
			mkBucket(t, cli, "slow")
			if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("slow"), Key: aws.String("big"), Body: bytes.NewReader(data)}); err != nil {
				t.Fatal(err)
			}
			pins := func() float64 { return scrapeMetrics(t, gw.MetricsURL).v("s3gate_pins_held") }
			if n := pins(); n != 0 {
				t.Fatalf("pins held before the GET: %v", n)
			}

			conn := rawConn(t, gw)
			req := signedRequest(t, http.MethodGet, gw.Endpoint+"/slow/big", nil, 0, emptyHash(), gw.Region, gw.AccessKey, gw.SecretKey)
			if err := req.Write(conn); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the stalled GET to pin its blob", func() bool { return pins() >= 1 })
			// The client still reads nothing; only the write deadline can
			// end the stream.
			waitFor(t, "the stalled GET's pins to be released", func() bool {
				m := scrapeMetrics(t, gw.MetricsURL)
				return m.v("s3gate_pins_held") == 0 && m.v("s3gate_pin_refs") == 0
			})

			// The connection is closed: reading now drains what the kernel
			// buffered and ends (never hangs), short of the object.
			if err := conn.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
				t.Fatal(err)
			}
			got, err := io.Copy(io.Discard, conn)
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("reading the cut-off response: %v after %d bytes (want EOF or reset)", err, got)
			}
			if got >= size {
				t.Fatalf("received %d bytes of a %d-byte object: the stream was not cut off", got, size)
			}

			// The reading client is under the same 1 s idle timeout: on a
			// loaded machine (CI runs packages side by side, under -race) a
			// client starved of CPU for a second is cut off too. The gateway
			// must serve the whole object; a cut-off of a reader that stalled
			// is the feature, so it gets three tries, each reading into one
			// preallocated buffer (no growth copies, little garbage).
			body := make([]byte, size)
			var lastErr error
			for try := 1; try <= 3; try++ {
				out, err := cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("slow"), Key: aws.String("big")})
				if err != nil {
					t.Fatal(err)
				}
				n, err := io.ReadFull(out.Body, body)
				_ = out.Body.Close()
				if err == nil && sha256.Sum256(body) == sha256.Sum256(data) {
					lastErr = nil
					break
				}
				lastErr = fmt.Errorf("try %d: %d bytes, %v", try, n, err)
				t.Logf("a reading client after the cut-off: %v", lastErr)
			}
			if lastErr != nil {
				t.Fatalf("a reading client after the cut-off never got the object whole: %v", lastErr)
			}
			waitFor(t, "pins released after the good GET", func() bool { return pins() == 0 })
		})
	}
}

// blockingReader blocks until release is closed, then fails.
type blockingReader struct{ release chan struct{} }

func (b blockingReader) Read([]byte) (int, error) {
	<-b.release
	return 0, errors.New("test over")
}

// A PUT that sends part of its body and then stalls gets 400 RequestTimeout
// after the read-idle timeout, and leaves nothing behind: no object, no blob
// row, no content chunk or large object, no stage file. The engines stage the
// bytes differently, so each one runs.
func TestIdleBodyReadTimesOut(t *testing.T) {
	const declared, sent = 2 << 20, 700 << 10 // past the knee: the large engine has started staging
	part := make([]byte, sent)
	_, _ = rand.Read(part)
	for _, engine := range []string{testgw.Embedded, config.EnginePGChunks, config.EnginePGLO, config.EngineLocal} {
		t.Run(engine, func(t *testing.T) {
			gw := testgw.Start(t, testgw.Options{Engine: engine, Env: []string{"S3GATE_READ_IDLE_TIMEOUT=1s"}})
			cli := sdkClient(gw)
			ctx := context.Background()
			mkBucket(t, cli, "idle")

			conn := rawConn(t, gw)
			release := make(chan struct{})
			defer close(release)
			body := io.MultiReader(bytes.NewReader(part), blockingReader{release})
			req := signedRequest(t, http.MethodPut, gw.Endpoint+"/idle/k", body, declared, "UNSIGNED-PAYLOAD", gw.Region, gw.AccessKey, gw.SecretKey)
			go func() { _ = req.Write(conn) }() // ends when the test releases it or the connection closes
			if err := conn.SetReadDeadline(time.Now().Add(waitLimit)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), req)
			if err != nil {
				t.Fatalf("no answer to the stalled PUT: %v", err)
			}
			msg, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "<Code>RequestTimeout</Code>") ||
				!strings.Contains(string(msg), "not read from or written to within the timeout period") {
				t.Fatalf("stalled PUT: %d %s; want 400 RequestTimeout", resp.StatusCode, msg)
			}

			_, err = cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("idle"), Key: aws.String("k")})
			var nf *types.NotFound
			if !errors.As(err, &nf) {
				t.Fatalf("HEAD after the timed-out PUT: %v, want 404", err)
			}
			wantNothingStored(t, gw, engine)
		})
	}
}

// wantNothingStored checks that the store holds no content at all: no blob
// rows (the metrics' view), no content rows or large objects, no stage or
// blob files.
func wantNothingStored(t *testing.T, gw *testgw.Gateway, engine string) {
	t.Helper()
	m := scrapeMetrics(t, gw.MetricsURL)
	if mf, ok := m["s3gate_blobs"]; ok {
		for _, s := range mf.GetMetric() {
			if v := s.GetGauge().GetValue(); v != 0 {
				t.Errorf("s3gate_blobs%v = %v, want 0", s.GetLabel(), v)
			}
		}
	} else {
		t.Error("no s3gate_blobs metric")
	}
	if engine != testgw.Embedded {
		conn, err := pgx.Connect(context.Background(), gw.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		for _, q := range []string{`SELECT count(*) FROM blobs`, `SELECT count(*) FROM blob_chunks`, `SELECT count(*) FROM pg_largeobject_metadata`} {
			var n int
			if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if n != 0 {
				t.Errorf("%s = %d, want 0", q, n)
			}
		}
	}
	err := filepath.WalkDir(gw.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(gw.DataDir, path)
		if !d.IsDir() && (strings.Contains(rel, "stage"+string(filepath.Separator)) || strings.Contains(rel, "blobs"+string(filepath.Separator))) {
			t.Errorf("content file left behind: %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A 2,000-part object streams byte-exact in one GET with S3GATE_MAX_PINS=16:
// the stream pins one part at a time. S3 requires 5 MiB parts (but the last)
// and 2,000 real uploads would make the test slow, so the test uploads 40
// small parts through the API (above the knee, so each is pinned content) and
// then writes a 2,000-part manifest that cycles through their blobs, in the
// database, as Complete would write it minus the size rule. Neighbouring parts
// are always different blobs: the stream changes its pin at every part.
func TestManyPartsStreamWithFewPins(t *testing.T) {
	const parts, distinct = 2000, 40
	for _, engine := range []string{testgw.Embedded, config.EnginePGChunks} {
		t.Run(engine, func(t *testing.T) {
			gw := testgw.Start(t, testgw.Options{Engine: engine, InlineMax: 1024, Env: []string{"S3GATE_MAX_PINS=16"}})
			cli := sdkClient(gw)
			ctx := context.Background()
			mkBucket(t, cli, "many")
			up, err := cli.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("many"), Key: aws.String("obj")})
			if err != nil {
				t.Fatal(err)
			}
			bodies := make([][]byte, distinct)
			for i := range bodies {
				bodies[i] = make([]byte, 1100+i*47) // 1100..2933 bytes, distinct blobs
				_, _ = rand.Read(bodies[i])
				if _, err := cli.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("many"), Key: aws.String("obj"),
					UploadId: up.UploadId, PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(bodies[i])}); err != nil {
					t.Fatalf("part %d: %v", i+1, err)
				}
			}
			writeManifest(t, gw, engine, *up.UploadId, parts)

			want := sha256.New()
			var size int64
			for i := range parts {
				want.Write(bodies[i%distinct])
				size += int64(len(bodies[i%distinct]))
			}
			out, err := cli.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("many"), Key: aws.String("obj")})
			if err != nil {
				t.Fatalf("GET of %d parts with 16 pins: %v", parts, err)
			}
			got := sha256.New()
			n, err := io.Copy(got, out.Body)
			_ = out.Body.Close()
			if err != nil || n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
				t.Fatalf("GET: %d of %d bytes, %v, checksum match %v", n, size, err, bytes.Equal(got.Sum(nil), want.Sum(nil)))
			}
			// The client has every byte before the handler ends the stream
			// and releases its last pin: wait for that, then nothing may
			// have been refused.
			waitFor(t, "the GET's last pin to be released", func() bool {
				return scrapeMetrics(t, gw.MetricsURL).v("s3gate_pins_held") == 0
			})
			if refused := scrapeMetrics(t, gw.MetricsURL).v("s3gate_pins_refused_total"); refused != 0 {
				t.Errorf("after the GET: %v pins refused; want 0", refused)
			}
		})
	}
}

// writeManifest turns a multipart upload into an object of n parts that
// cycle through the upload's parts, the way Complete writes an object (object
// row, manifest rows with start offsets, upload deleted, one transaction),
// without Complete's 5 MiB rule.
func writeManifest(t *testing.T, gw *testgw.Gateway, engine, uploadID string, n int) {
	t.Helper()
	ctx := context.Background()
	var db *sql.DB
	var err error
	ph := func(i int) string { return fmt.Sprintf("?%d", i) }
	if engine == testgw.Embedded {
		db, err = sql.Open("sqlite", filepath.Join(gw.DataDir, embedded.MetaFile)+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_txlock=immediate")
	} else {
		db, err = sql.Open("pgx", gw.DatabaseURL)
		ph = func(i int) string { return fmt.Sprintf("$%d", i) }
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit: ErrTxDone, nothing to undo
	must := func(_ sql.Result, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("write manifest: %v", err)
		}
	}
	var bucket, key, meta string
	if err := tx.QueryRowContext(ctx, `SELECT bucket, key, meta FROM uploads WHERE upload_id = `+ph(1), uploadID).Scan(&bucket, &key, &meta); err != nil {
		t.Fatal(err)
	}
	type src struct {
		blob, size int64
		etag       string
	}
	rows, err := tx.QueryContext(ctx, `SELECT blob_id, size, etag FROM upload_parts WHERE upload_id = `+ph(1)+` ORDER BY part_number`, uploadID)
	if err != nil {
		t.Fatal(err)
	}
	var srcs []src
	for rows.Next() {
		var s src
		if err := rows.Scan(&s.blob, &s.size, &s.etag); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, s)
	}
	if err := rows.Err(); err != nil || len(srcs) == 0 {
		t.Fatalf("upload parts: %d, %v", len(srcs), err)
	}
	var total int64
	for i := range n {
		total += srcs[i%len(srcs)].size
	}
	lm, metaArg := any(time.Now().UnixMicro()), any(meta)
	if engine != testgw.Embedded {
		lm = time.Now()
	}
	must(tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO objects (bucket, key, size, etag, meta, part_count, last_modified)
		VALUES (%s, %s, %s, %s, %s, %s, %s)`, ph(1), ph(2), ph(3), ph(4), ph(5), ph(6), ph(7)),
		bucket, key, total, fmt.Sprintf("manifest-%d", n), metaArg, n, lm))
	var start int64
	for i := range n {
		s := srcs[i%len(srcs)]
		must(tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO object_parts (bucket, key, part_number, blob_id, size, start_offset, etag)
			VALUES (%s, %s, %s, %s, %s, %s, %s)`, ph(1), ph(2), ph(3), ph(4), ph(5), ph(6), ph(7)),
			bucket, key, i+1, s.blob, s.size, start, s.etag))
		start += s.size
	}
	must(tx.ExecContext(ctx, `DELETE FROM uploads WHERE upload_id = `+ph(1), uploadID))
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
