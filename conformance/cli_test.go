package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/internal/testreq"
)

// awsCLI runs the aws command with an isolated configuration: its own config
// and credentials files, path-style addressing, SigV4 presigning, and the test
// CA for HTTPS. No AWS_* variable of the caller leaks in.
type awsCLI struct {
	endpoint string
	env      []string
}

func newAWSCLI(t *testing.T, gw *testgw.Gateway) *awsCLI {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	creds := filepath.Join(dir, "credentials")
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
	}
	// Profile "serial" makes the s3 commands use a single connection.
	profile := "region = %[1]s\ns3 =\n    addressing_style = path\n    signature_version = s3v4\n"
	write(cfg, fmt.Sprintf("[default]\n"+profile+"[profile serial]\n"+profile+"    max_concurrent_requests = 1\n", gw.Region))
	keys := fmt.Sprintf("aws_access_key_id = %s\naws_secret_access_key = %s\n", gw.AccessKey, gw.SecretKey)
	write(creds, "[default]\n"+keys+"[serial]\n"+keys)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_CONFIG_FILE="+cfg, "AWS_SHARED_CREDENTIALS_FILE="+creds,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=", "AWS_RETRY_MODE=standard", "AWS_MAX_ATTEMPTS=1")
	if gw.CAFile != "" {
		env = append(env, "AWS_CA_BUNDLE="+gw.CAFile)
	}
	return &awsCLI{endpoint: gw.Endpoint, env: env}
}

// run executes `aws --endpoint-url E args...` and returns stdout; a non-zero
// exit fails the test with the command's stderr.
func (a *awsCLI) run(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := a.try(args...)
	if err != nil {
		t.Fatalf("aws %s: %v\nstderr: %s\nstdout: %.2000s", strings.Join(args, " "), err, errOut, out)
	}
	return out
}

func (a *awsCLI) try(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// A short read timeout turns a stalled response into a clear failure
	// instead of a silent 60 s wait and a hidden retry.
	cmd := exec.CommandContext(ctx, "aws", append([]string{"--endpoint-url", a.endpoint, "--cli-read-timeout", "30"}, args...)...)
	cmd.Env = a.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// writeGenFile writes size deterministic bytes to path and returns their SHA-256.
func writeGenFile(t *testing.T, path string, seed uint64, size int64) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatalf("mkdir: %v", err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	defer f.Close()
	sum, _, err := shaReader(io.TeeReader(genReader(seed, size), f))
	if err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	return sum
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer f.Close()
	sum, _, err := shaReader(f)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return sum
}

// treeDigest maps every regular file below root (relative, slash-separated) to
// its SHA-256.
func treeDigest(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = fileSHA(t, p)
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// TestAWSCLI drives the gateway with the aws command (s3 and s3api).
func TestAWSCLI(t *testing.T) {
	if _, err := exec.LookPath("aws"); err != nil {
		testreq.Missing(t, "aws cli not on PATH: skipping the aws cli conformance tests (install the Debian package \"awscli\")")
	}
	// The cli signs and uploads alike over both transports: every engine runs
	// once (forEachEngine). The 300 MiB round trip (not under -short) runs on
	// the default PostgreSQL engine only, or on every HTTP cell of the full
	// matrix: the 40 MiB file already takes every engine through the cli's
	// multipart path.
	big := func(c combo) bool {
		if testing.Short() {
			return false
		}
		if testgw.External() || os.Getenv(EnvFullMatrix) != "" {
			return c.Transport == "http" || testgw.External()
		}
		return c.Engine == config.EnginePGChunks
	}
	forEachEngine(t, func(t *testing.T, c combo, gw *testgw.Gateway) {
		cli := newAWSCLI(t, gw)
		sdk := sdkClient(t, gw)
		bucket := bucketName("cli")
		cli.run(t, "s3", "mb", "s3://"+bucket)
		t.Cleanup(func() { emptyAndDelete(t, sdk, bucket) })
		tmp := t.TempDir()

		t.Run("cp", func(t *testing.T) {
			sizes := []int64{1 * mib, 40 * mib}
			if big(c) {
				sizes = append(sizes, 300*mib)
			}
			for i, size := range sizes {
				t.Run(fmt.Sprintf("%dMiB", size/mib), func(t *testing.T) {
					src := filepath.Join(tmp, fmt.Sprintf("up-%d.bin", size))
					want := writeGenFile(t, src, uint64(300+i), size)
					key := fmt.Sprintf("s3://%s/cp/%d.bin", bucket, size)
					cli.run(t, "s3", "cp", "--only-show-errors", src, key)
					dst := filepath.Join(tmp, fmt.Sprintf("down-%d.bin", size))
					cli.run(t, "s3", "cp", "--only-show-errors", key, dst)
					if got := fileSHA(t, dst); got != want {
						t.Fatalf("round trip of %d bytes: sha %s, want %s", size, got, want)
					}
					// Large files only matter once: free the disk for the next engine.
					os.Remove(src)
					os.Remove(dst)
				})
			}
		})

		// botocore sends "Expect: 100-continue" on every PUT, also with an empty
		// body. If the server answers such a PUT at once (no 100 Continue) and
		// keeps the connection, botocore parses the next response on that
		// connection against a stale status line and stalls until its read
		// timeout (boto/botocore#3755). Empty files are common in trees, so the
		// gateway must not leave such a connection open.
		t.Run("ZeroLengthThenNonEmptyPut", func(t *testing.T) {
			dir := filepath.Join(tmp, "zero-then-data")
			for i := range 6 {
				size := int64(0)
				if i%2 == 1 {
					size = 1000
				}
				writeGenFile(t, filepath.Join(dir, fmt.Sprintf("f%d", i)), uint64(i), size)
			}
			// One connection at a time, so the requests surely share it.
			out, errOut, err := cli.try("--profile", "serial", "--cli-read-timeout", "5", "s3", "cp", "--recursive", "--only-show-errors", dir, "s3://"+bucket+"/zero/")
			if err != nil {
				t.Fatalf("aws s3 cp of empty and non-empty files: %v\nstderr: %s\nstdout: %s", err, errOut, out)
			}
			if keys := listKeys(t, sdk, bucket, "zero/"); len(keys) != 6 {
				t.Fatalf("after cp: %d keys under zero/, want 6", len(keys))
			}
		})

		t.Run("sync", func(t *testing.T) {
			up := filepath.Join(tmp, "tree-up")
			for i := range 200 {
				p := filepath.Join(up, fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%03d.txt", i))
				writeGenFile(t, p, uint64(1000+i), int64(i*37%4096))
			}
			cli.run(t, "s3", "sync", "--only-show-errors", up, "s3://"+bucket+"/tree/")
			if keys := listKeys(t, sdk, bucket, "tree/"); len(keys) != 200 {
				t.Fatalf("after sync up: %d keys under tree/, want 200", len(keys))
			}
			down := filepath.Join(tmp, "tree-down")
			cli.run(t, "s3", "sync", "--only-show-errors", "s3://"+bucket+"/tree/", down)
			wantTree, gotTree := treeDigest(t, up), treeDigest(t, down)
			if len(gotTree) != len(wantTree) {
				t.Fatalf("synced back %d files, want %d", len(gotTree), len(wantTree))
			}
			for p, sum := range wantTree {
				if gotTree[p] != sum {
					t.Fatalf("synced back %s: sha %q, want %q", p, gotTree[p], sum)
				}
			}
			// A second sync has nothing to do.
			if out := cli.run(t, "s3", "sync", up, "s3://"+bucket+"/tree/"); strings.TrimSpace(out) != "" {
				t.Fatalf("second sync uploaded again: %s", out)
			}
		})

		t.Run("ls", func(t *testing.T) {
			lines := func(out string) []string {
				var ls []string
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					if l = strings.TrimSpace(l); l != "" {
						ls = append(ls, l)
					}
				}
				return ls
			}
			root := lines(cli.run(t, "s3", "ls", "s3://"+bucket+"/"))
			if !slices.Contains(root, "PRE tree/") || !slices.Contains(root, "PRE cp/") {
				t.Fatalf("ls of the bucket: %q, want PRE tree/ and PRE cp/", root)
			}
			tree := lines(cli.run(t, "s3", "ls", "s3://"+bucket+"/tree/"))
			var want []string
			for i := range 10 {
				want = append(want, fmt.Sprintf("PRE d%d/", i))
			}
			if !slices.Equal(tree, want) {
				t.Fatalf("ls tree/: %q, want %q", tree, want)
			}
			d3 := lines(cli.run(t, "s3", "ls", "s3://"+bucket+"/tree/d3/"))
			if len(d3) != 20 {
				t.Fatalf("ls tree/d3/: %d lines, want 20: %q", len(d3), d3)
			}
			for _, l := range d3 {
				// "2026-01-02 03:04:05       1234 f003.txt"
				f := strings.Fields(l)
				if len(f) != 4 || !strings.HasPrefix(f[3], "f") || !strings.HasSuffix(f[3], ".txt") {
					t.Fatalf("ls tree/d3/ line %q", l)
				}
				var idx int
				if _, err := fmt.Sscanf(f[3], "f%03d.txt", &idx); err != nil || idx%10 != 3 || f[2] != fmt.Sprint(idx*37%4096) {
					t.Fatalf("ls tree/d3/ line %q: wrong name or size", l)
				}
			}
			// A prefix that is not a directory matches key prefixes.
			part := lines(cli.run(t, "s3", "ls", "s3://"+bucket+"/tree/d1"))
			if !slices.Equal(part, []string{"PRE d1/"}) {
				t.Fatalf("ls tree/d1: %q, want [PRE d1/]", part)
			}
			rec := lines(cli.run(t, "s3", "ls", "--recursive", "s3://"+bucket+"/tree/"))
			if len(rec) != 200 {
				t.Fatalf("ls --recursive tree/: %d lines, want 200", len(rec))
			}
			// ls of the service lists our bucket.
			if out := cli.run(t, "s3", "ls"); !strings.Contains(out, " "+bucket+"\n") && !strings.HasSuffix(strings.TrimSpace(out), " "+bucket) {
				t.Fatalf("aws s3 ls does not list %s:\n%s", bucket, out)
			}
		})

		t.Run("presign", func(t *testing.T) {
			src := filepath.Join(tmp, "presign.bin")
			want := writeGenFile(t, src, 400, 700*kib)
			key := "s3://" + bucket + "/presign/obj.bin"
			cli.run(t, "s3", "cp", "--only-show-errors", src, key)
			u := strings.TrimSpace(cli.run(t, "s3", "presign", key, "--expires-in", "600"))
			if !strings.Contains(u, "X-Amz-Signature=") {
				t.Fatalf("presigned URL is not SigV4: %s", u)
			}
			req, err := http.NewRequestWithContext(testCtx(t, time.Minute), http.MethodGet, u, nil)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			status, _, body := send(t, gw, req)
			if status != http.StatusOK || sha(body) != want {
				t.Fatalf("GET presigned: HTTP %d, %d bytes; body %.300s", status, len(body), body)
			}
		})

		t.Run("s3api", func(t *testing.T) {
			src := filepath.Join(tmp, "api.bin")
			want := writeGenFile(t, src, 500, 2*mib+5)
			cli.run(t, "s3api", "put-object", "--bucket", bucket, "--key", "api/one.bin", "--body", src,
				"--content-type", "application/x-cli", "--metadata", "origin=cli")
			var head struct {
				ContentLength int64
				ContentType   string
				ETag          string
				Metadata      map[string]string
			}
			if err := json.Unmarshal([]byte(cli.run(t, "s3api", "head-object", "--bucket", bucket, "--key", "api/one.bin")), &head); err != nil {
				t.Fatalf("head-object output: %v", err)
			}
			if head.ContentLength != 2*mib+5 || head.ContentType != "application/x-cli" || head.ETag == "" {
				t.Fatalf("head-object: %+v", head)
			}
			// S3 stores metadata names in lower case and sends them so;
			// botocore (unlike the Go SDK) keeps the header's case, so boto3
			// users reading Metadata["origin"] depend on it.
			if head.Metadata["origin"] != "cli" {
				t.Errorf("head-object Metadata = %v, want map[origin:cli] (x-amz-meta-* header names must be sent in lower case)", head.Metadata)
			}
			var list struct {
				Contents []struct {
					Key  string
					Size int64
				}
			}
			if err := json.Unmarshal([]byte(cli.run(t, "s3api", "list-objects-v2", "--bucket", bucket, "--prefix", "api/")), &list); err != nil {
				t.Fatalf("list-objects-v2 output: %v", err)
			}
			// (The cli's own pagination drops KeyCount from its output.)
			if len(list.Contents) != 1 || list.Contents[0].Key != "api/one.bin" || list.Contents[0].Size != 2*mib+5 {
				t.Fatalf("list-objects-v2: %+v", list)
			}
			dst := filepath.Join(tmp, "api-down.bin")
			cli.run(t, "s3api", "get-object", "--bucket", bucket, "--key", "api/one.bin", dst)
			if got := fileSHA(t, dst); got != want {
				t.Fatalf("get-object: sha %s, want %s", got, want)
			}
			// head-object of a missing key fails with 404.
			_, errOut, err := cli.try("s3api", "head-object", "--bucket", bucket, "--key", "api/missing")
			if err == nil || !strings.Contains(errOut, "404") {
				t.Fatalf("head-object of a missing key: err %v, stderr %s", err, errOut)
			}
		})

		t.Run("rm", func(t *testing.T) {
			cli.run(t, "s3", "rm", "--recursive", "--only-show-errors", "s3://"+bucket+"/tree/")
			if keys := listKeys(t, sdk, bucket, "tree/"); len(keys) != 0 {
				t.Fatalf("after rm --recursive: %d keys left under tree/", len(keys))
			}
			// Other prefixes are untouched.
			rest := listKeys(t, sdk, bucket, "")
			sort.Strings(rest)
			if !slices.Contains(rest, "api/one.bin") {
				t.Fatalf("rm --recursive tree/ removed too much: %q", rest)
			}
			cli.run(t, "s3", "rm", "--recursive", "--only-show-errors", "s3://"+bucket+"/")
			if keys := listKeys(t, sdk, bucket, ""); len(keys) != 0 {
				t.Fatalf("after rm --recursive of the bucket: %q left", keys)
			}
			cli.run(t, "s3", "rb", "s3://"+bucket)
			if out, _, err := cli.try("s3", "ls", "s3://"+bucket+"/"); err == nil {
				t.Fatalf("ls of a removed bucket succeeded: %s", out)
			}
		})
	})
}
