package conformance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/internal/testreq"
)

// bigTransport is the one transport on which the > 100 MiB file of the
// awkward data set travels (never under -short).
const bigTransport = "http"

// wantBig reports whether a cell carries the > 100 MiB file: the HTTP cells
// of the embedded default and of pgchunks (every HTTP cell with
// S3GATE_FULL_MATRIX). Smaller files of the set already take every client
// through its multipart path on every engine; the big one proves the long
// stream once per metadata engine.
func wantBig(c combo) bool {
	if testing.Short() {
		return false
	}
	if testgw.External() {
		return true
	}
	if c.Transport != bigTransport {
		return false
	}
	return os.Getenv(EnvFullMatrix) != "" || c.Engine == testgw.Embedded || c.Engine == config.EnginePGChunks
}

// forEachCell is forEachCombo restricted to some engines (an external
// endpoint is always its single cell).
func forEachCell(t *testing.T, engines []string, fn func(t *testing.T, c combo, gw *testgw.Gateway)) {
	t.Helper()
	runCells(t, cellsOf(combos(), engines), fn)
}

// forEachLightCell is forEachCell over the cells of lightCombos.
func forEachLightCell(t *testing.T, engines []string, fn func(t *testing.T, c combo, gw *testgw.Gateway)) {
	t.Helper()
	runCells(t, cellsOf(lightCombos(), engines), fn)
}

// cellsOf keeps the cells of the given engines (all of them for an external
// endpoint).
func cellsOf(cells []combo, engines []string) []combo {
	var out []combo
	for _, c := range cells {
		if testgw.External() || slices.Contains(engines, c.Engine) {
			out = append(out, c)
		}
	}
	return out
}

// inLightCut reports whether c is a cell of lightCombos.
func inLightCut(c combo) bool { return slices.Contains(lightCombos(), c) }

// needBinary skips the test when a client program is not installed: the
// matrix runs whatever is present and says clearly what it left out.
func needBinary(t *testing.T, name, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testreq.Missing(t, fmt.Sprintf("%s not on PATH: skipping its conformance tests (install the Debian package %q)", name, pkg))
	}
}

// tool runs one external client with a fixed environment.
type tool struct {
	name string
	env  []string
}

// newTool isolates a client from the caller: none of the variables that
// configure S3 clients leak in, and HOME is a fresh directory so no
// ~/.s3cfg, rclone.conf or restic cache of the machine is read or written.
func newTool(t *testing.T, name string, extra ...string) *tool {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "RCLONE_") || strings.HasPrefix(k, "RESTIC_") ||
			k == "HOME" || k == "XDG_CACHE_HOME" || k == "XDG_CONFIG_HOME" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+t.TempDir())
	return &tool{name: name, env: append(env, extra...)}
}

// run executes the tool and returns its stdout; a failure ends the test with
// the command's stderr.
func (tl *tool) run(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := tl.try(args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr: %.4000s\nstdout: %.2000s", tl.name, strings.Join(args, " "), err, errOut, out)
	}
	return out
}

func (tl *tool) try(args ...string) (string, string, error) {
	// Bounded well below the go test timeout: a hung client fails its own test.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tl.name, args...)
	cmd.Env = tl.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// endpointHost returns host:port of the gateway's endpoint.
func endpointHost(t *testing.T, gw *testgw.Gateway) string {
	t.Helper()
	u, err := url.Parse(gw.Endpoint)
	if err != nil {
		t.Fatalf("parse endpoint %q: %v", gw.Endpoint, err)
	}
	return u.Host
}

// writeFile writes a client's configuration file.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// sameTree fails unless the files below root are exactly want (relative path
// -> SHA-256): every byte read back is compared.
func sameTree(t *testing.T, what, root string, want map[string]string) {
	t.Helper()
	got := treeDigest(t, root)
	var missing, extra, differ []string
	for p, sum := range want {
		switch g, ok := got[p]; {
		case !ok:
			missing = append(missing, p)
		case g != sum:
			differ = append(differ, p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			extra = append(extra, p)
		}
	}
	if len(missing)+len(extra)+len(differ) > 0 {
		t.Fatalf("%s: %d files, want %d; missing %q, unexpected %q, different bytes %q", what, len(got), len(want), missing, extra, differ)
	}
}

// sameKeys fails unless the bucket holds exactly the keys of want, as the
// Go SDK lists them: clients must neither mangle nor lose names.
func sameKeys(t *testing.T, what string, sdk *s3.Client, bucket string, want map[string]string) {
	t.Helper()
	got := listKeys(t, sdk, bucket, "")
	sort.Strings(got)
	exp := slices.Sorted(maps.Keys(want))
	if !slices.Equal(got, exp) {
		t.Fatalf("%s: bucket holds keys\n%q\nwant\n%q", what, got, exp)
	}
}

// wantMultipart fails unless the object was stored by a multipart upload
// (its ETag has the "-N" part count), which proves the client took that path.
func wantMultipart(t *testing.T, sdk *s3.Client, bucket, key string) {
	t.Helper()
	out, err := sdk.HeadObject(testCtx(t, time.Minute), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("HEAD %s/%s: %v", bucket, key, err)
	}
	if etag := aws.ToString(out.ETag); !strings.Contains(etag, "-") {
		t.Fatalf("%s/%s has ETag %s: the client did not upload it in parts", bucket, key, etag)
	}
}

// bucketGone fails unless HEAD of the bucket answers 404.
func bucketGone(t *testing.T, sdk *s3.Client, bucket string) {
	t.Helper()
	_, err := sdk.HeadBucket(testCtx(t, time.Minute), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if httpStatus(err) != 404 {
		t.Fatalf("HEAD bucket %s after removal: %v, want 404", bucket, err)
	}
}

// copyTree copies a directory tree (regular files only) so that a client can
// work on a modified copy of the data set without touching the original.
func copyTree(t *testing.T, src, dst string, skip func(rel string) bool) {
	t.Helper()
	for rel := range treeDigest(t, src) {
		if skip != nil && skip(rel) {
			continue
		}
		if err := copyFile(filepath.Join(src, filepath.FromSlash(rel)), filepath.Join(dst, filepath.FromSlash(rel))); err != nil {
			t.Fatalf("copy %s: %v", rel, err)
		}
	}
}

// copyFile streams one file to a new path, creating its directories.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// removeRel deletes one file of a tree by its slash-separated relative path.
func removeRel(root, rel string) error {
	if err := os.Remove(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
		return fmt.Errorf("remove %s: %w", rel, err)
	}
	return nil
}

// dropBucket is emptyAndDelete for a bucket that the test may already have
// removed itself through the client under test.
func dropBucket(t testing.TB, sdk *s3.Client, bucket string) {
	_, err := sdk.HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	if httpStatus(err) == 404 {
		return
	}
	emptyAndDelete(t, sdk, bucket)
}
