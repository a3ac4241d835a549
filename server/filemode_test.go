package server_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/server"
)

// TestDataDirModes: under umask 022, the embedded default's data directory is
// 0700 and everything in it (meta.db, -wal, -shm, the generated credentials,
// content files) 0600; a data directory left wide by an older version is
// tightened at start.
func TestDataDirModes(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, dir string)
	}{
		{"fresh", func(*testing.T, string) {}},
		{"left wide", func(t *testing.T, dir string) {
			// What an earlier version left: 0755 directories, 0644 files.
			for _, d := range []string{dir, filepath.Join(dir, "blobs"), filepath.Join(dir, "stage")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range []string{"meta.db", server.CredentialsFile} {
				body := []byte{}
				if f == server.CredentialsFile {
					body = []byte("S3GATE_ROOT_ACCESS_KEY=wideaccess\nS3GATE_ROOT_SECRET_KEY=wide-secret-key\n")
				}
				if err := os.WriteFile(filepath.Join(dir, f), body, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			tc.prepare(t, dir)
			cfg, err := config.Load(nil, []string{"S3GATE_DATA_DIR=" + dir, "S3GATE_METRICS_ADDR=off"}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := server.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, ln) }()
			t.Cleanup(func() {
				cancel()
				if err := <-served; err != nil {
					t.Errorf("serve: %v", err)
				}
				srv.Close()
			})
			c := s3.NewFromConfig(aws.Config{Region: cfg.Region,
				Credentials: credentials.NewStaticCredentialsProvider(srv.RootKey.AccessKey, srv.RootKey.SecretKey, "")},
				func(o *s3.Options) {
					o.BaseEndpoint = aws.String("http://" + ln.Addr().String())
					o.UsePathStyle = true
				})
			rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
			defer rcancel()
			if _, err := c.CreateBucket(rctx, &s3.CreateBucketInput{Bucket: aws.String("modes")}); err != nil {
				t.Fatal(err)
			}
			for key, size := range map[string]int{"small": 100, "large": 2 << 20} { // inline, and a content file
				if _, err := c.PutObject(rctx, &s3.PutObjectInput{Bucket: aws.String("modes"), Key: aws.String(key),
					Body: bytes.NewReader(bytes.Repeat([]byte("x"), size))}); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[string]bool{}
			err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				fi, err := d.Info()
				if err != nil {
					return err
				}
				want := fs.FileMode(0o600)
				if d.IsDir() {
					want = 0o700
				}
				if fi.Mode().Perm() != want {
					t.Errorf("%s: mode %o, want %o", p, fi.Mode().Perm(), want)
				}
				if d.Type().IsRegular() {
					rel, _ := filepath.Rel(dir, p)
					if filepath.Dir(rel) != "." {
						rel = "content file"
					}
					seen[rel] = true
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"meta.db", "meta.db-wal", "meta.db-shm", server.CredentialsFile, "content file"} {
				if !seen[f] {
					t.Errorf("no %s in the data directory (saw %v): the test checked less than it should", f, seen)
				}
			}
		})
	}
}
