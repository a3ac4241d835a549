package conformance

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/testgw"
)

// awkwardFile is one file of the generated data set. Its path relative to
// the data set's root is also its object key: clients copy the tree to the
// root of a bucket, so the 1024-byte name stays exactly at the key limit.
type awkwardFile struct {
	Rel  string // slash-separated
	Size int64
}

// Names and sizes that each break some S3 implementation or client: URL and
// form delimiters, literal percent escapes, non-ASCII, a key of the maximum
// length, deep prefixes, an empty file, one byte, one byte over the minimum
// part size, and (big) a file over 100 MiB that every client uploads in parts.
const (
	awkFiveMiBPlusOne = "five-mib-plus-one.bin"
	awkBig            = "big/over 100 MiB.bin"
	awkBigSize        = 100*mib + 3*mib + 7
	awkPlus           = "plus+sign=equals&amp.bin"
	awkSubDelims      = "sub-delims !$'()*,;:@~ [x].txt"
)

func awkwardFiles(big bool) []awkwardFile {
	files := []awkwardFile{
		{Rel: "empty", Size: 0},
		{Rel: "one byte", Size: 1},
		{Rel: "space dir/two  spaces.txt", Size: 4 * kib},
		{Rel: awkPlus, Size: 1000},
		{Rel: "percent 100% and %2F and %20 literal.txt", Size: 333},
		{Rel: "ünïcödé/日本語 ファイル ✓.txt", Size: 2 * kib},
		{Rel: awkSubDelims, Size: 77},
		{Rel: "nested/a/b/c/d/e/deep.bin", Size: 10 * kib},
		{Rel: "nested/a/b/over-knee.bin", Size: 700 * kib},
		{Rel: awkFiveMiBPlusOne, Size: 5*mib + 1},
		{Rel: longKey(1024), Size: 1234},
	}
	if big {
		files = append(files, awkwardFile{Rel: awkBig, Size: awkBigSize})
	}
	return files
}

// longKey returns a key of exactly n bytes made of path segments short enough
// (<= 200 bytes) for any file system, so clients can mirror it as a tree.
func longKey(n int) string {
	var b strings.Builder
	b.WriteString("long")
	for seg := 0; b.Len() < n; seg++ {
		b.WriteByte('/')
		size := min(200, n-b.Len())
		if n-b.Len()-size == 1 {
			size-- // leave room for "/" and one more byte
		}
		s := fmt.Sprintf("seg%d-", seg)
		for len(s) < size {
			s += string(rune('a' + len(s)%26))
		}
		b.WriteString(s[:size])
	}
	return b.String()
}

// writeAwkward writes the data set below root, deterministically, and returns
// relative path -> SHA-256.
func writeAwkward(t *testing.T, root string, files []awkwardFile) map[string]string {
	t.Helper()
	want := map[string]string{}
	for i, f := range files {
		want[f.Rel] = writeGenFile(t, filepath.Join(root, filepath.FromSlash(f.Rel)), uint64(7000+i), f.Size)
	}
	return want
}

// sizesOf maps each relative path of the data set to its size.
func sizesOf(files []awkwardFile) map[string]int64 {
	out := map[string]int64{}
	for _, f := range files {
		out[f.Rel] = f.Size
	}
	return out
}

func TestAwkwardLongKey(t *testing.T) {
	for _, n := range []int{1024, 1000, 206, 205, 6} {
		k := longKey(n)
		if len(k) != n {
			t.Fatalf("longKey(%d) has %d bytes", n, len(k))
		}
		for _, seg := range strings.Split(k, "/") {
			if seg == "" || len(seg) > 200 {
				t.Fatalf("longKey(%d) has segment %q", n, seg)
			}
		}
	}
}

// newAWSCLIConfig is newAWSCLI with a config of the test's own choosing for
// the default profile (region and s3 section).
func newAWSCLIConfig(t *testing.T, gw *testgw.Gateway, profile string) *awsCLI {
	t.Helper()
	dir := t.TempDir()
	cfg, creds := filepath.Join(dir, "config"), filepath.Join(dir, "credentials")
	writeFile(t, cfg, "[default]\n"+profile)
	writeFile(t, creds, fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", gw.AccessKey, gw.SecretKey))
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env, "AWS_CONFIG_FILE="+cfg, "AWS_SHARED_CREDENTIALS_FILE="+creds,
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=", "AWS_RETRY_MODE=standard", "AWS_MAX_ATTEMPTS=1",
		"PYTHONIOENCODING=utf-8")
	if gw.CAFile != "" {
		env = append(env, "AWS_CA_BUNDLE="+gw.CAFile)
	}
	return &awsCLI{endpoint: gw.Endpoint, env: env}
}

// lsLine is one line of `aws s3 ls --recursive`: date, time, size, key (the
// key may contain spaces).
var lsLine = regexp.MustCompile(`^\S+ \S+\s+(\d+) (.*)$`)

// TestAwkwardAWSCLI drives the aws cli (s3 and s3api) over the awkward data
// set: cp --recursive up and back, ls, list-objects-v2 with and without
// --encoding-type url, sync both ways with --delete, rm.
func TestAwkwardAWSCLI(t *testing.T) {
	needBinary(t, "aws", "awscli")
	// The cli signs alike over both transports: one cell per engine.
	forEachLightCell(t, []string{testgw.Embedded, config.EnginePGChunks}, func(t *testing.T, c combo, gw *testgw.Gateway) {
		files := awkwardFiles(wantBig(c))
		src := filepath.Join(t.TempDir(), "src")
		want := writeAwkward(t, src, files)
		// 5 MB (the cli's MB is MiB) makes 5 MiB+1 a two-part upload whose
		// last part is one byte.
		cli := newAWSCLIConfig(t, gw, fmt.Sprintf("region = %s\ns3 =\n    addressing_style = path\n    signature_version = s3v4\n"+
			"    multipart_threshold = 5MB\n    multipart_chunksize = 5MB\n", gw.Region))
		sdk := sdkClient(t, gw)
		bucket := bucketName("awk")
		cli.run(t, "s3", "mb", "s3://"+bucket)
		t.Cleanup(func() { dropBucket(t, sdk, bucket) })
		tmp := t.TempDir()

		if !t.Run("cp up", func(t *testing.T) {
			cli.run(t, "s3", "cp", "--recursive", "--only-show-errors", src, "s3://"+bucket+"/")
			sameKeys(t, "after aws s3 cp --recursive", sdk, bucket, want)
			wantMultipart(t, sdk, bucket, awkFiveMiBPlusOne)
			if _, ok := want[awkBig]; ok {
				wantMultipart(t, sdk, bucket, awkBig)
			}
		}) {
			return
		}

		t.Run("ls", func(t *testing.T) {
			sizes := sizesOf(files)
			got := map[string]int64{}
			for _, l := range strings.Split(strings.TrimRight(cli.run(t, "s3", "ls", "--recursive", "s3://"+bucket+"/"), "\n"), "\n") {
				m := lsLine.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("aws s3 ls --recursive line %q", l)
				}
				n, _ := strconv.ParseInt(m[1], 10, 64)
				got[m[2]] = n
			}
			if !maps.Equal(got, sizes) {
				t.Fatalf("aws s3 ls --recursive: %v\nwant %v", got, sizes)
			}
		})

		t.Run("list-objects-v2", func(t *testing.T) {
			type listing struct {
				Contents       []struct{ Key string }
				CommonPrefixes []struct{ Prefix string }
				EncodingType   string
			}
			// botocore asks for url encoding itself and decodes: the keys
			// come back as stored.
			var plain listing
			if err := json.Unmarshal([]byte(cli.run(t, "s3api", "list-objects-v2", "--bucket", bucket)), &plain); err != nil {
				t.Fatalf("list-objects-v2 output: %v", err)
			}
			var keys []string
			for _, o := range plain.Contents {
				keys = append(keys, o.Key)
			}
			sort.Strings(keys)
			if exp := slices.Sorted(maps.Keys(want)); !slices.Equal(keys, exp) {
				t.Fatalf("list-objects-v2 keys %q, want %q", keys, exp)
			}
			// With --encoding-type url given by the user, botocore hands the
			// encoded names through: every key and prefix must be encoded
			// (form encoding, as AWS does it) and decode to the stored name.
			var enc listing
			if err := json.Unmarshal([]byte(cli.run(t, "s3api", "list-objects-v2", "--no-paginate", "--bucket", bucket, "--encoding-type", "url")), &enc); err != nil {
				t.Fatalf("list-objects-v2 --encoding-type url output: %v", err)
			}
			if enc.EncodingType != "url" {
				t.Errorf("EncodingType = %q, want url", enc.EncodingType)
			}
			keys = keys[:0]
			for _, o := range enc.Contents {
				keys = append(keys, decodeListed(t, o.Key))
			}
			sort.Strings(keys)
			if exp := slices.Sorted(maps.Keys(want)); !slices.Equal(keys, exp) {
				t.Fatalf("list-objects-v2 --encoding-type url keys decode to %q, want %q", keys, exp)
			}
			var prefixes []string
			if err := json.Unmarshal([]byte(cli.run(t, "s3api", "list-objects-v2", "--bucket", bucket, "--encoding-type", "url", "--delimiter", "/")), &enc); err != nil {
				t.Fatalf("list-objects-v2 --delimiter output: %v", err)
			}
			for _, p := range enc.CommonPrefixes {
				prefixes = append(prefixes, decodeListed(t, p.Prefix))
			}
			sort.Strings(prefixes)
			wantPrefixes := map[string]bool{}
			for k := range want {
				if i := strings.Index(k, "/"); i >= 0 {
					wantPrefixes[k[:i+1]] = true
				}
			}
			if exp := slices.Sorted(maps.Keys(wantPrefixes)); !slices.Equal(prefixes, exp) {
				t.Fatalf("list-objects-v2 --delimiter / prefixes decode to %q, want %q", prefixes, exp)
			}
		})

		t.Run("cp down", func(t *testing.T) {
			dst := filepath.Join(tmp, "cp-down")
			cli.run(t, "s3", "cp", "--recursive", "--only-show-errors", "s3://"+bucket+"/", dst)
			sameTree(t, "aws s3 cp --recursive down", dst, want)
			os.RemoveAll(dst)
		})

		t.Run("sync", func(t *testing.T) {
			b2 := bucketName("awksync")
			cli.run(t, "s3", "mb", "s3://"+b2)
			t.Cleanup(func() { dropBucket(t, sdk, b2) })
			cli.run(t, "s3", "sync", "--only-show-errors", src, "s3://"+b2+"/")
			sameKeys(t, "after aws s3 sync up", sdk, b2, want)
			dst := filepath.Join(tmp, "sync-down")
			cli.run(t, "s3", "sync", "--only-show-errors", "s3://"+b2+"/", dst)
			sameTree(t, "aws s3 sync down", dst, want)
			// Nothing changed: a second sync copies nothing (sizes and
			// times from the listing match the files).
			if out := cli.run(t, "s3", "sync", dst, "s3://"+b2+"/"); strings.TrimSpace(out) != "" {
				t.Fatalf("second sync copied again:\n%s", out)
			}
			// --delete removes what is gone locally, awkward name included.
			if err := os.Remove(filepath.Join(dst, filepath.FromSlash(awkPlus))); err != nil {
				t.Fatal(err)
			}
			cli.run(t, "s3", "sync", "--delete", "--only-show-errors", dst, "s3://"+b2+"/")
			rest := maps.Clone(want)
			delete(rest, awkPlus)
			sameKeys(t, "after aws s3 sync --delete", sdk, b2, rest)
			os.RemoveAll(dst)
		})

		t.Run("rm", func(t *testing.T) {
			cli.run(t, "s3", "rm", "--only-show-errors", "s3://"+bucket+"/"+awkSubDelims)
			objectAbsent(t, sdk, bucket, awkSubDelims)
			cli.run(t, "s3", "rm", "--recursive", "--only-show-errors", "s3://"+bucket+"/")
			if keys := listKeys(t, sdk, bucket, ""); len(keys) != 0 {
				t.Fatalf("after aws s3 rm --recursive: %q left", keys)
			}
			cli.run(t, "s3", "rb", "s3://"+bucket)
			bucketGone(t, sdk, bucket)
		})
	})
}

// decodeListed decodes a name from a listing made with encoding-type=url. A
// name that still holds a space or a non-ASCII byte was not encoded at all
// (and a literal "+" left unencoded would decode to a space and mismatch).
func decodeListed(t *testing.T, s string) string {
	t.Helper()
	if strings.ContainsFunc(s, func(r rune) bool { return r == ' ' || r > 0x7e }) {
		t.Fatalf("listing with encoding-type=url returned an unencoded name %q", s)
	}
	d, err := url.QueryUnescape(s)
	if err != nil {
		t.Fatalf("listing with encoding-type=url returned %q: %v", s, err)
	}
	return d
}
