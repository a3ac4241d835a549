package localfs

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // the raw baseline hashes as a PUT must
	"crypto/sha256"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

// BenchmarkHashedPut is the local PUT's content path against its raw bound,
// in turn within each iteration: 64 MiB through store.Body (MD5, SHA-256,
// CRC64NVME) into Stage and Publish, against the bench's raw side (1 MiB
// writes hashed with MD5 and SHA-256, fsync). x-raw is the ratio of the rates.
func BenchmarkHashedPut(b *testing.B) {
	m := openMedia(b)
	data := randBytes(benchSize, 14)
	ctx := context.Background()
	var put, raw time.Duration
	id := int64(0)
	for b.Loop() {
		id++
		t0 := time.Now()
		rawWrite(b, filepath.Join(m.dir, "raw-"+strconv.FormatInt(id, 10)), data)
		t1 := time.Now()
		body := store.NewBody(bytes.NewReader(data), store.PutOptions{Size: benchSize})
		sf, err := m.Stage(ctx, body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := body.Finish(); err != nil {
			b.Fatal(err)
		}
		if err := m.Publish(ctx, sf, id); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		raw += t1.Sub(t0)
		put += t2.Sub(t1)
		b.StopTimer()
		if err := m.Remove(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(raw)/float64(put), "x-raw")
	b.ReportMetric(float64(benchSize)*float64(b.N)/put.Seconds()/(1<<20), "put-MiB/s")
	b.ReportMetric(float64(benchSize)*float64(b.N)/raw.Seconds()/(1<<20), "raw-MiB/s")
}

func rawWrite(b *testing.B, path string, data []byte) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	hm, hs := md5.New(), sha256.New() //nolint:gosec // see import
	for p := data; len(p) > 0; p = p[writeBufSize:] {
		hm.Write(p[:writeBufSize])
		hs.Write(p[:writeBufSize])
		if _, err := f.Write(p[:writeBufSize]); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		b.Fatal(err)
	}
}
