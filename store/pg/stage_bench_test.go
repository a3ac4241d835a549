package pg

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg/content"
)

// stageDesign is one way of getting a large body into PostgreSQL, written
// with plain SQL so that the designs compare like for like (ADR 007).
type stageDesign struct {
	name  string
	write func(ctx context.Context, b *testing.B, v *env, lo bool, body []byte, dir string) error
}

var stageDesigns = []stageDesign{
	// Before ADR 007: the body streams into the engine inside the publishing
	// transaction (here from memory, i.e. at server speed).
	{"in-tx", func(ctx context.Context, _ *testing.B, v *env, lo bool, body []byte, _ string) error {
		return inTxPut(ctx, v, lo, bytes.NewReader(body), len(body))
	}},
	// (a), shipped: autocommit writes under a stage row, then a short
	// publishing transaction that claims it.
	{"stage-rows", func(ctx context.Context, _ *testing.B, v *env, lo bool, body []byte, _ string) error {
		var id int64
		if err := v.e.pool.QueryRow(ctx, `SELECT nextval('blob_ids')`).Scan(&id); err != nil {
			return err
		}
		eng := readPGChunks
		if lo {
			eng = readPGLO
		}
		_, _, err := eng.Stage(ctx, v.e.pool, id, bytes.NewReader(body))
		if err != nil {
			return err
		}
		return v.e.withTx(ctx, func(tx pgx.Tx) error {
			oid, err := content.Claim(ctx, tx, id)
			if err != nil {
				return err
			}
			return insertBenchBlob(ctx, tx, id, lo, oid, len(body))
		})
	}},
	// (b): spool the body to a local file (unsynced: it is re-read at once
	// and the database makes it durable), then the in-transaction put from
	// the file.
	{"spool-file", func(ctx context.Context, _ *testing.B, v *env, lo bool, body []byte, dir string) error {
		f, err := os.CreateTemp(dir, "spool-*")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if _, err := io.Copy(f, bytes.NewReader(body)); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		return inTxPut(ctx, v, lo, bufio.NewReaderSize(f, content.ChunkSize), len(body))
	}},
}

// inTxPut writes r's chunks and the blob row in one transaction.
func inTxPut(ctx context.Context, v *env, lo bool, r io.Reader, size int) error {
	return v.e.withTx(ctx, func(tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, `SELECT nextval('blob_ids')`).Scan(&id); err != nil {
			return err
		}
		buf := make([]byte, content.ChunkSize)
		var oid *uint32
		var off int64
		for seq := int32(0); ; seq++ {
			n, eof, err := content.ReadChunk(r, buf)
			if err != nil {
				return err
			}
			if n > 0 {
				switch {
				case !lo:
					_, err = tx.Exec(ctx, `INSERT INTO blob_chunks (blob_id, seq, data) VALUES ($1, $2, $3)`, id, seq, buf[:n])
				case oid == nil:
					oid = new(uint32)
					err = tx.QueryRow(ctx, `SELECT lo_from_bytea(0, $1)`, buf[:n]).Scan(oid)
				default:
					_, err = tx.Exec(ctx, `SELECT lo_put($1, $2, $3)`, *oid, off, buf[:n])
				}
				if err != nil {
					return err
				}
				off += int64(n)
			}
			if eof {
				break
			}
		}
		return insertBenchBlob(ctx, tx, id, lo, oid, size)
	})
}

func insertBenchBlob(ctx context.Context, tx pgx.Tx, id int64, lo bool, oid *uint32, size int) error {
	tier := store.TierPGChunks
	if lo {
		tier = store.TierPGLO
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "bench-%d", id))
	_, err := tx.Exec(ctx, `INSERT INTO blobs (id, sha256, size, tier, lo_oid) VALUES ($1, $2, $3, $4, $5)`,
		id, sum[:], size, tier, oid)
	return err
}

// BenchmarkStagingDesigns compares the write cost of the candidate designs of
// ADR 007 side by side, on one PostgreSQL server in one run: 16 MiB bodies
// into pgchunks rows and into large objects.
func BenchmarkStagingDesigns(b *testing.B) {
	const size = 16 << 20
	body := randBytes(7, size)
	for _, mode := range []string{LargePGChunks, LargePGLO} {
		for _, d := range stageDesigns {
			b.Run(mode+"/"+d.name, func(b *testing.B) {
				v := newEnv(b, mode)
				dir := b.TempDir()
				ctx := context.Background()
				b.SetBytes(size)
				for b.Loop() {
					if err := d.write(ctx, b, v, mode == LargePGLO, body, dir); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if _, err := v.e.pool.Exec(ctx, `SELECT count(lo_unlink(lo_oid)) FROM blobs WHERE lo_oid IS NOT NULL`); err != nil {
					b.Fatal(err)
				}
				if _, err := v.e.pool.Exec(ctx, `TRUNCATE blob_chunks; DELETE FROM blobs`); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkSmallOpsWithSlowUploads measures the latency of a small PUT+GET
// pair (4 KiB) on an idle gateway engine and then with 40 uploads sending 4 MB
// at 40 KB/s each (issue 9's scenario), in one run, and reports both and
// their ratio.
func BenchmarkSmallOpsWithSlowUploads(b *testing.B) {
	for _, mode := range []string{LargePGChunks, LargePGLO} {
		b.Run(mode, func(b *testing.B) {
			v := newEnv(b, mode)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n := max(b.N, 50)
			quiet, err := smallOps(ctx, v, nil, nil, n)
			if err != nil {
				b.Fatal(err)
			}
			uploads := make(chan error, slowUploads)
			for i := range slowUploads {
				// 4 KiB every 100 ms: 40 KB/s; the bodies never finish here.
				body := newTrickle(ctx, randBytes(uint64(2000+i), 4_000_000), 4<<10, 100*time.Millisecond, -1, nil, nil)
				go func() {
					_, err := v.e.PutObject(ctx, "b", fmt.Sprintf("slow/%d", i), body, store.PutOptions{Size: 4_000_000})
					uploads <- err
				}()
			}
			// Wait until every upload has a stage (is past the knee).
			deadline := time.Now().Add(2 * time.Minute)
			for v.count(b, `SELECT count(*) FROM blob_stages`) < slowUploads {
				if time.Now().After(deadline) {
					b.Fatal("slow uploads did not all start staging")
				}
				time.Sleep(50 * time.Millisecond)
			}
			b.ResetTimer()
			loaded, err := smallOps(ctx, v, nil, nil, n)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			cancel()
			for range slowUploads {
				<-uploads // cancelled: each unstages what it wrote
			}
			q, l := median(quiet), median(loaded)
			b.ReportMetric(float64(q.Microseconds()), "quiet-p50-µs")
			b.ReportMetric(float64(l.Microseconds()), "loaded-p50-µs")
			b.ReportMetric(float64(l)/float64(q), "loaded/quiet")
		})
	}
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
