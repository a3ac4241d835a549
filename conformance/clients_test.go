package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
)

// TestClients drives rclone, restic and s3cmd, as Debian packages them, over
// the awkward data set. rclone runs on every cell of the matrix (every
// engine, both transports: its payload signing changes with the transport);
// restic and s3cmd on the light cut (every engine once; their minio-go and
// Python signing paths are covered per transport by TestMinio and the aws
// cli suites), or only on the embedded default and pgchunks with -short.
// Select one client with -run 'TestClients/.*/.*/rclone'.
func TestClients(t *testing.T) {
	everyClient := []string{testgw.Embedded, config.EnginePGChunks}
	forEachCell(t, []string{testgw.Embedded, config.EnginePGChunks, config.EnginePGLO, config.EngineLocal},
		func(t *testing.T, c combo, gw *testgw.Gateway) {
			files := awkwardFiles(wantBig(c))
			src := filepath.Join(t.TempDir(), "src")
			want := writeAwkward(t, src, files)
			var total int64
			for _, f := range files {
				total += f.Size
			}
			t.Logf("awkward data set: %d files, %d bytes", len(files), total)
			sdk := sdkClient(t, gw)
			t.Run("rclone", func(t *testing.T) { testRclone(t, gw, sdk, src, files, want) })
			if testing.Short() && !testgw.External() && !slices.Contains(everyClient, c.Engine) {
				return // -short: restic and s3cmd only on the embedded default and pgchunks
			}
			if !inLightCut(c) {
				return
			}
			t.Run("restic", func(t *testing.T) { testRestic(t, gw, sdk, src, want) })
			for _, v2 := range []bool{false, true} {
				name := "s3cmd/sigv4"
				if v2 {
					name = "s3cmd/sigv2"
				}
				t.Run(name, func(t *testing.T) { testS3cmd(t, gw, sdk, src, files, want, v2) })
			}
		})
}

// rcloneLs is one line of `rclone ls`: size, path.
var rcloneLs = regexp.MustCompile(`^\s*(\d+) (.*)$`)

// testRclone: copy up, lsf, ls, check --download, copy back, delete, purge.
func testRclone(t *testing.T, gw *testgw.Gateway, sdk *s3.Client, src string, files []awkwardFile, want map[string]string) {
	needBinary(t, "rclone", "rclone")
	dir := t.TempDir()
	conf := filepath.Join(dir, "rclone.conf")
	// upload_cutoff and chunk_size of 5 MiB: 5 MiB+1 goes up in two parts,
	// the last one byte (the default cutoff, 200 MiB, would send even the big
	// file in one PUT).
	writeFile(t, conf, fmt.Sprintf("[gw]\ntype = s3\nprovider = Other\naccess_key_id = %s\nsecret_access_key = %s\n"+
		"endpoint = %s\nregion = %s\nforce_path_style = true\nupload_cutoff = 5Mi\nchunk_size = 5Mi\n",
		gw.AccessKey, gw.SecretKey, gw.Endpoint, gw.Region))
	// No retries: a gateway error must fail the test, not be papered over.
	base := []string{"--config", conf, "--retries", "1", "--low-level-retries", "1", "-q"}
	if gw.CAFile != "" {
		base = append(base, "--ca-cert", gw.CAFile)
	}
	rc := newTool(t, "rclone")
	run := func(t *testing.T, args ...string) string { return rc.run(t, append(slices.Clone(base), args...)...) }
	bucket := bucketName("rclone")
	remote := "gw:" + bucket
	run(t, "mkdir", remote)
	t.Cleanup(func() { dropBucket(t, sdk, bucket) })

	run(t, "copy", src, remote)
	sameKeys(t, "after rclone copy", sdk, bucket, want)
	wantMultipart(t, sdk, bucket, awkFiveMiBPlusOne)
	if _, ok := want[awkBig]; ok {
		wantMultipart(t, sdk, bucket, awkBig)
	}

	lsf := strings.Split(strings.TrimRight(run(t, "lsf", "-R", "--files-only", remote), "\n"), "\n")
	slices.Sort(lsf)
	if exp := slices.Sorted(maps.Keys(want)); !slices.Equal(lsf, exp) {
		t.Fatalf("rclone lsf -R: %q\nwant %q", lsf, exp)
	}
	got := map[string]int64{}
	for _, l := range strings.Split(strings.TrimRight(run(t, "ls", remote), "\n"), "\n") {
		m := rcloneLs.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("rclone ls line %q", l)
		}
		got[m[2]], _ = strconv.ParseInt(m[1], 10, 64)
	}
	if exp := sizesOf(files); !maps.Equal(got, exp) {
		t.Fatalf("rclone ls: %v\nwant %v", got, exp)
	}
	// check --download compares the bytes of both sides, not only hashes.
	run(t, "check", "--download", src, remote)

	dst := filepath.Join(dir, "down")
	run(t, "copy", remote, dst)
	sameTree(t, "rclone copy back", dst, want)

	run(t, "delete", remote+"/nested")
	rest := maps.Clone(want)
	for k := range rest {
		if strings.HasPrefix(k, "nested/") {
			delete(rest, k)
		}
	}
	sameKeys(t, "after rclone delete nested", sdk, bucket, rest)
	run(t, "purge", remote)
	bucketGone(t, sdk, bucket)
}

// testRestic: init, backup, check --read-data, restore, a second backup of a
// changed tree, forget --keep-last 1 --prune, check and restore again.
func testRestic(t *testing.T, gw *testgw.Gateway, sdk *s3.Client, src string, want map[string]string) {
	needBinary(t, "restic", "restic")
	bucket := bucketName("restic")
	rs := newTool(t, "restic",
		"RESTIC_REPOSITORY=s3:"+gw.Endpoint+"/"+bucket+"/repo",
		"RESTIC_PASSWORD=s3gate-conformance",
		"AWS_ACCESS_KEY_ID="+gw.AccessKey, "AWS_SECRET_ACCESS_KEY="+gw.SecretKey)
	// Path style, as for every client here; restic finds the region itself
	// (GetBucketLocation), as it does by default.
	base := []string{"--quiet", "-o", "s3.bucket-lookup=path"}
	if gw.CAFile != "" {
		base = append(base, "--cacert", gw.CAFile)
	}
	run := func(t *testing.T, args ...string) string { return rs.run(t, append(slices.Clone(base), args...)...) }
	dir := t.TempDir()
	// restic backs up its own copy, which the test then changes: a second
	// snapshot of the same path is what forget --keep-last 1 replaces.
	tree := filepath.Join(dir, "tree")
	copyTree(t, src, tree, nil)

	run(t, "init")
	t.Cleanup(func() { dropBucket(t, sdk, bucket) })
	run(t, "backup", "--host", "s3gate-test", tree)
	run(t, "check", "--read-data")
	restore1 := filepath.Join(dir, "restore1")
	run(t, "restore", "latest", "--target", restore1)
	sameTree(t, "restic restore", filepath.Join(restore1, tree), want)

	var multipart []string
	for _, o := range listObjects(t, sdk, bucket, "repo/") {
		if strings.Contains(aws.ToString(o.ETag), "-") {
			multipart = append(multipart, aws.ToString(o.Key))
		}
	}
	// restic 0.14 sends each pack (16 MiB by default, 128 MiB at most) in one
	// PUT with Content-MD5: it did not use multipart here even with the
	// > 100 MiB file, so this is logged rather than asserted.
	t.Logf("restic objects stored by multipart upload: %d", len(multipart))

	// Change the tree: drop the largest file, add one.
	gone := awkFiveMiBPlusOne
	if _, ok := want[awkBig]; ok {
		gone = awkBig
	}
	changed := maps.Clone(want)
	delete(changed, gone)
	if err := removeRel(tree, gone); err != nil {
		t.Fatal(err)
	}
	changed["added later.txt"] = writeGenFile(t, filepath.Join(tree, "added later.txt"), 7777, 12345)
	run(t, "backup", "--host", "s3gate-test", tree)

	before := keySet(listObjects(t, sdk, bucket, "repo/data/"))
	// --max-unused 0 repacks every pack that holds data of the forgotten
	// snapshot, so prune surely deletes objects.
	run(t, "forget", "--keep-last", "1", "--prune", "--max-unused", "0")
	after := keySet(listObjects(t, sdk, bucket, "repo/data/"))
	deleted := 0
	for k := range before {
		if !after[k] {
			deleted++
		}
	}
	if deleted == 0 {
		t.Fatalf("forget --prune deleted no pack (%d packs before, %d after)", len(before), len(after))
	}
	var snaps []struct{ ID string }
	if err := json.Unmarshal([]byte(run(t, "snapshots", "--json")), &snaps); err != nil {
		t.Fatalf("restic snapshots --json: %v", err)
	}
	if len(snaps) != 1 {
		t.Fatalf("after forget --keep-last 1: %d snapshots, want 1", len(snaps))
	}
	run(t, "check", "--read-data")
	restore2 := filepath.Join(dir, "restore2")
	run(t, "restore", "latest", "--target", restore2)
	sameTree(t, "restic restore after prune", filepath.Join(restore2, tree), changed)
}

// s3cmdLs is one line of `s3cmd ls --recursive`: date, time, size, URL.
var s3cmdLs = regexp.MustCompile(`^\S+ \S+\s+(\d+)\s+s3://[^/]+/(.*)$`)

// testS3cmd: mb, put, ls, get, del, sync, del --recursive, rb; with SigV4
// headers, or with SigV2 header auth (Authorization: AWS key:sig).
func testS3cmd(t *testing.T, gw *testgw.Gateway, sdk *s3.Client, src string, files []awkwardFile, want map[string]string, v2 bool) {
	needBinary(t, "s3cmd", "s3cmd")
	dir := t.TempDir()
	host := endpointHost(t, gw)
	https := strings.HasPrefix(gw.Endpoint, "https:")
	// host_bucket without %(bucket)s: path style. A 5 MB chunk makes 5 MiB+1
	// a two-part upload, signed part by part (with SigV2 the subresources
	// partNumber and uploadId are part of the string to sign).
	cfg := filepath.Join(dir, "s3cfg")
	writeFile(t, cfg, fmt.Sprintf("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\nhost_bucket = %s\n"+
		"bucket_location = %s\nuse_https = %s\nsignature_v2 = %s\nmultipart_chunk_size_mb = 5\n"+
		"check_ssl_certificate = True\ncheck_ssl_hostname = True\nca_certs_file = %s\n",
		gw.AccessKey, gw.SecretKey, host, host, gw.Region, pyBool(https), pyBool(v2), gw.CAFile))
	sc := newTool(t, "s3cmd")
	run := func(t *testing.T, args ...string) string {
		return sc.run(t, append([]string{"-c", cfg, "--no-progress"}, args...)...)
	}
	// The big file travels once per cell (in the SigV4 pass); the SigV2
	// pass proves multipart with 5 MiB+1, and sync never carries it.
	files = slices.DeleteFunc(slices.Clone(files), func(f awkwardFile) bool { return v2 && f.Rel == awkBig })
	want = maps.Clone(want)
	if v2 {
		delete(want, awkBig)
	}
	exclude := []string{"--exclude", "big/*"}

	bucket := bucketName("s3cmd")
	run(t, "mb", "s3://"+bucket)
	t.Cleanup(func() { dropBucket(t, sdk, bucket) })
	put := []string{"put", "--recursive"}
	if v2 {
		put = append(put, exclude...)
	}
	run(t, append(put, src+"/", "s3://"+bucket+"/")...)
	sameKeys(t, "after s3cmd put --recursive", sdk, bucket, want)
	wantMultipart(t, sdk, bucket, awkFiveMiBPlusOne)
	if _, ok := want[awkBig]; ok {
		wantMultipart(t, sdk, bucket, awkBig)
	}

	got := map[string]int64{}
	for _, l := range strings.Split(strings.TrimRight(run(t, "ls", "--recursive", "s3://"+bucket), "\n"), "\n") {
		m := s3cmdLs.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("s3cmd ls line %q", l)
		}
		got[m[2]], _ = strconv.ParseInt(m[1], 10, 64)
	}
	if exp := sizesOf(files); !maps.Equal(got, exp) {
		t.Fatalf("s3cmd ls --recursive: %v\nwant %v", got, exp)
	}

	dst := filepath.Join(dir, "get")
	if err := os.MkdirAll(dst, 0o755); err != nil { // s3cmd wants an existing directory
		t.Fatal(err)
	}
	run(t, "get", "--recursive", "s3://"+bucket+"/", dst+"/")
	sameTree(t, "s3cmd get --recursive", dst, want)

	run(t, "del", "s3://"+bucket+"/"+awkPlus)
	objectAbsent(t, sdk, bucket, awkPlus)

	// sync up, down, and up again with --delete-removed after a local delete.
	b2 := bucketName("s3cmdsync")
	run(t, "mb", "s3://"+b2)
	t.Cleanup(func() { dropBucket(t, sdk, b2) })
	run(t, append(append([]string{"sync"}, exclude...), src+"/", "s3://"+b2+"/")...)
	synced := maps.Clone(want)
	delete(synced, awkBig)
	sameKeys(t, "after s3cmd sync up", sdk, b2, synced)
	down := filepath.Join(dir, "sync")
	run(t, "sync", "s3://"+b2+"/", down+"/")
	sameTree(t, "s3cmd sync down", down, synced)
	if err := removeRel(down, awkSubDelims); err != nil {
		t.Fatal(err)
	}
	run(t, "sync", "--delete-removed", down+"/", "s3://"+b2+"/")
	delete(synced, awkSubDelims)
	sameKeys(t, "after s3cmd sync --delete-removed", sdk, b2, synced)

	// del --recursive sends DeleteObjects (multi-object delete).
	run(t, "del", "--recursive", "--force", "s3://"+bucket)
	if keys := listKeys(t, sdk, bucket, ""); len(keys) != 0 {
		t.Fatalf("after s3cmd del --recursive: %q left", keys)
	}
	run(t, "rb", "s3://"+bucket)
	bucketGone(t, sdk, bucket)
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// listObjects lists every object below a prefix with the Go SDK.
func listObjects(t *testing.T, sdk *s3.Client, bucket, prefix string) []s3types.Object {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []s3types.Object
	p := s3.NewListObjectsV2Paginator(sdk, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s/%s: %v", bucket, prefix, err)
		}
		out = append(out, page.Contents...)
	}
	return out
}

func keySet(objs []s3types.Object) map[string]bool {
	out := map[string]bool{}
	for _, o := range objs {
		out[aws.ToString(o.Key)] = true
	}
	return out
}
