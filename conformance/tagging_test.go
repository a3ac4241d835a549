package conformance

import (
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/internal/testgw"
	"github.com/s3gate/s3gate/internal/testreq"
)

// TestTagging: object tags from PUT, multipart and copy (COPY/REPLACE)
// round-trip through GetObjectTagging and x-amz-tagging-count;
// Put/DeleteObjectTagging; bucket tagging; S3's limits refused with its
// codes, the object unchanged.
func TestTagging(t *testing.T) {
	forEachEngine(t, func(t *testing.T, c combo, gw *testgw.Gateway) {
		cl := sdkClient(t, gw)
		t.Run("Objects", func(t *testing.T) { testObjectTagging(t, cl) })
		t.Run("Bucket", func(t *testing.T) { testBucketTagging(t, cl) })
		t.Run("Limits", func(t *testing.T) { testTagLimits(t, cl) })
		t.Run("PutObjectTaggingRace", func(t *testing.T) { testObjectTaggingRace(t, cl) })
		if !testgw.External() { // creates an access key with s3gate admin
			t.Run("Authorization", func(t *testing.T) { testTaggingAccess(t, gw, cl) })
		}
		if c.Engine == testgw.Embedded { // the cli's requests do not depend on the engine
			t.Run("AWSCLI", func(t *testing.T) { testTaggingCLI(t, gw, cl) })
		}
	})
}

// tagsOf is a tag set as "k=v" in the order answered.
func tagsOf(ts []types.Tag) []string {
	out := []string{}
	for _, tg := range ts {
		out = append(out, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
	}
	return out
}

func wantObjectTags(t *testing.T, cl *s3.Client, b, k string, want ...string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	got, err := cl.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(b), Key: aws.String(k)})
	if err != nil {
		t.Fatalf("GetObjectTagging %s: %v", k, err)
	}
	if want == nil {
		want = []string{}
	}
	if g := tagsOf(got.TagSet); !slices.Equal(g, want) {
		t.Fatalf("tags of %s = %v, want %v", k, g, want)
	}
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String(k)})
	if err != nil {
		t.Fatalf("HeadObject %s: %v", k, err)
	}
	obj, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String(k)})
	if err != nil {
		t.Fatalf("GetObject %s: %v", k, err)
	}
	_ = obj.Body.Close()
	// x-amz-tagging-count is sent only for a tagged object (TagCount nil otherwise).
	for op, n := range map[string]*int32{"GET": obj.TagCount, "HEAD": head.TagCount} {
		if (n == nil) != (len(want) == 0) || int(aws.ToInt32(n)) != len(want) {
			t.Fatalf("%s %s x-amz-tagging-count = %v, want %d", op, k, n, len(want))
		}
	}
}

func testObjectTagging(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := mustBucket(t, cl, "tags")
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"), Body: strings.NewReader("x"),
		Tagging: aws.String("a=1&b%20c=d%2Fe")}); err != nil {
		t.Fatalf("PutObject with tags: %v", err)
	}
	wantObjectTags(t, cl, b, "k", "a=1", "b c=d/e")

	putString(t, cl, b, "plain", "y")
	wantObjectTags(t, cl, b, "plain")

	if _, err := cl.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("plain"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("z"), Value: aws.String("")}, {Key: aws.String("é"), Value: aws.String("ü")}}}}); err != nil {
		t.Fatalf("PutObjectTagging: %v", err)
	}
	wantObjectTags(t, cl, b, "plain", "z=", "é=ü")
	if got := getString(t, cl, b, "plain"); got != "y" {
		t.Fatalf("body after PutObjectTagging = %q", got)
	}

	// Copy: COPY (the default) keeps the source's tags, REPLACE takes the request's.
	for _, tc := range []struct {
		key  string
		in   s3.CopyObjectInput
		want []string
	}{
		{"copy-default", s3.CopyObjectInput{}, []string{"a=1", "b c=d/e"}},
		{"copy-copy", s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveCopy, Tagging: aws.String("ignored=1")}, []string{"a=1", "b c=d/e"}},
		{"copy-replace", s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("r=2")}, []string{"r=2"}},
		{"copy-replace-none", s3.CopyObjectInput{TaggingDirective: types.TaggingDirectiveReplace}, nil},
		{"copy-meta-replace", s3.CopyObjectInput{MetadataDirective: types.MetadataDirectiveReplace}, []string{"a=1", "b c=d/e"}},
	} {
		in := tc.in
		in.Bucket, in.Key, in.CopySource = aws.String(b), aws.String(tc.key), aws.String(b+"/k")
		if _, err := cl.CopyObject(ctx, &in); err != nil {
			t.Fatalf("CopyObject %s: %v", tc.key, err)
		}
		wantObjectTags(t, cl, b, tc.key, tc.want...)
	}

	// Multipart: the tags of CreateMultipartUpload apply at Complete.
	up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp"), Tagging: aws.String("m=p")})
	if err != nil {
		t.Fatalf("CreateMultipartUpload with tags: %v", err)
	}
	parts := []types.CompletedPart{uploadPart(t, cl, b, "mp", aws.ToString(up.UploadId), 1, []byte("part"))}
	if _, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	wantObjectTags(t, cl, b, "mp", "m=p")

	if _, err := cl.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("k")}); err != nil {
		t.Fatalf("DeleteObjectTagging: %v", err)
	}
	wantObjectTags(t, cl, b, "k")
	if got := getString(t, cl, b, "k"); got != "x" {
		t.Fatalf("body after DeleteObjectTagging = %q", got)
	}
	_, err = cl.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("missing")})
	wantAPIError(t, err, "NoSuchKey")
}

func testBucketTagging(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := mustBucket(t, cl, "btags")
	_, err := cl.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String(b)})
	wantAPIError(t, err, "NoSuchTagSet")
	set := []types.Tag{{Key: aws.String("team"), Value: aws.String("backup")}, {Key: aws.String("cost"), Value: aws.String("42")}}
	if _, err := cl.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(b), Tagging: &types.Tagging{TagSet: set}}); err != nil {
		t.Fatalf("PutBucketTagging: %v", err)
	}
	got, err := cl.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String(b)})
	if err != nil {
		t.Fatalf("GetBucketTagging: %v", err)
	}
	if g := tagsOf(got.TagSet); !slices.Equal(g, []string{"team=backup", "cost=42"}) {
		t.Fatalf("bucket tags = %v", g)
	}
	// 51 tags: refused, the stored set unchanged.
	var many []types.Tag
	for i := range 51 {
		many = append(many, types.Tag{Key: aws.String(fmt.Sprintf("k%d", i)), Value: aws.String("v")})
	}
	_, err = cl.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(b), Tagging: &types.Tagging{TagSet: many}})
	wantAPIError(t, err, "InvalidTag")
	if got, err := cl.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String(b)}); err != nil || len(got.TagSet) != 2 {
		t.Fatalf("bucket tags after refused put: %v, %v", got, err)
	}
	if _, err := cl.DeleteBucketTagging(ctx, &s3.DeleteBucketTaggingInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("DeleteBucketTagging: %v", err)
	}
	_, err = cl.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: aws.String(b)})
	wantAPIError(t, err, "NoSuchTagSet")
}

func testTagLimits(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := mustBucket(t, cl, "tlim")
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"), Body: strings.NewReader("x"), Tagging: aws.String("keep=1")}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	tag := func(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }
	var eleven []types.Tag
	for i := range 11 {
		eleven = append(eleven, tag(fmt.Sprintf("k%d", i), "v"))
	}
	for _, tc := range []struct {
		name, code string
		set        []types.Tag
	}{
		{"eleven tags", "BadRequest", eleven}, // AWS's code for the count, not InvalidTag
		{"key 129", "InvalidTag", []types.Tag{tag(strings.Repeat("k", 129), "v")}},
		{"value 257", "InvalidTag", []types.Tag{tag("k", strings.Repeat("v", 257))}},
		{"bad key character", "InvalidTag", []types.Tag{tag("k*", "v")}},
		{"bad value character", "InvalidTag", []types.Tag{tag("k", "v#")}},
		{"aws: prefix", "InvalidTag", []types.Tag{tag("aws:k", "v")}},
		{"duplicate key", "InvalidTag", []types.Tag{tag("k", "1"), tag("k", "2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("k"), Tagging: &types.Tagging{TagSet: tc.set}})
			wantAPIError(t, err, tc.code)
			wantObjectTags(t, cl, b, "k", "keep=1")
			_, err = cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("new"), Body: strings.NewReader("x"), Tagging: aws.String(headerForm(tc.set))})
			if tc.name == "duplicate key" {
				wantAPIError(t, err, "InvalidArgument") // a header with a key twice is no tag set
			} else {
				wantAPIError(t, err, tc.code)
			}
			objectAbsent(t, cl, b, "new")
		})
	}
}

// headerForm is a tag set in x-amz-tagging's form.
func headerForm(ts []types.Tag) string {
	var pairs []string
	for _, tg := range ts {
		pairs = append(pairs, strings.NewReplacer("*", "%2A", "#", "%23", ":", "%3A").Replace(aws.ToString(tg.Key))+"="+
			strings.NewReplacer("#", "%23").Replace(aws.ToString(tg.Value)))
	}
	return strings.Join(pairs, "&")
}

func testTaggingCLI(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	if _, err := exec.LookPath("aws"); err != nil {
		testreq.Missing(t, "aws cli not on PATH: skipping the aws cli tagging test (install the Debian package \"awscli\")")
	}
	cli := newAWSCLI(t, gw)
	b := mustBucket(t, cl, "clitag")
	putString(t, cl, b, "k", "x")
	cli.run(t, "s3api", "put-object-tagging", "--bucket", b, "--key", "k", "--tagging", `{"TagSet":[{"Key":"env","Value":"prod"}]}`)
	if out := cli.run(t, "s3api", "get-object-tagging", "--bucket", b, "--key", "k"); !strings.Contains(out, `"env"`) || !strings.Contains(out, `"prod"`) {
		t.Fatalf("get-object-tagging: %s", out)
	}
	wantObjectTags(t, cl, b, "k", "env=prod")
}

// testTaggingAccess: a key allowed s3:PutObject alone may write untagged
// objects only; tags need s3:PutObjectTagging, as on AWS.
func testTaggingAccess(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := mustBucket(t, root, "tagacc")
	ak, sk := createKey(t, gw, "TAGGER"+strings.ToUpper(b[len(b)-8:]), fmt.Sprintf(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::%[1]s/*"},
		{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::%[1]s/*","Condition":{"StringEquals":{"s3:ExistingObjectTag/Team":"blue"}}}]}`, b))
	up := sdkClientWithKeys(t, gw, ak, sk)
	if _, err := up.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("plain"), Body: strings.NewReader("a")}); err != nil {
		t.Fatalf("PutObject without tags: %v", err)
	}
	_, err := up.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("tagged"), Body: strings.NewReader("a"), Tagging: aws.String("a=b")})
	wantAPIError(t, err, "AccessDenied")
	objectAbsent(t, root, b, "tagged")
	_, err = up.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("plain"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("a"), Value: aws.String("b")}}}})
	wantAPIError(t, err, "AccessDenied")
	wantObjectTags(t, root, b, "plain")
	// s3:ExistingObjectTag reads the object's tags: only the blue object is readable.
	for k, tags := range map[string]string{"blue": "Team=blue", "red": "Team=red"} {
		if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(k), Body: strings.NewReader(k), Tagging: aws.String(tags)}); err != nil {
			t.Fatalf("PutObject %s: %v", k, err)
		}
	}
	if got := getString(t, up, b, "blue"); got != "blue" {
		t.Fatalf("GET blue = %q", got)
	}
	for _, k := range []string{"red", "plain"} {
		_, err = up.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String(k)})
		wantAPIError(t, err, "AccessDenied")
	}
}

// testObjectTaggingRace races PutObjectTagging with overwrites: its
// metadata rewrite is conditional on the ETag it read, so it never gives a
// newer object the older one's metadata (its Content-Type names its body).
// Each round tags or fails as a precondition; every GET finds a body and a
// type that match.
func testObjectTaggingRace(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := mustBucket(t, cl, "tagrace")
	put := func(v string) error {
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"), Body: strings.NewReader(v), ContentType: aws.String("text/" + v)})
		return err
	}
	if err := put("v0"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 30; i++ {
		v := fmt.Sprintf("v%d", i)
		var putErr, tagErr error
		var wg sync.WaitGroup
		wg.Go(func() { putErr = put(v) })
		wg.Go(func() {
			_, tagErr = cl.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: aws.String(b), Key: aws.String("k"),
				Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("round"), Value: aws.String(v)}}}})
		})
		wg.Wait()
		if putErr != nil {
			t.Fatalf("round %d: PutObject: %v", i, putErr)
		}
		if tagErr != nil && apiCode(tagErr) != "PreconditionFailed" {
			t.Fatalf("round %d: PutObjectTagging: %v", i, tagErr)
		}
		got, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("k")})
		if err != nil {
			t.Fatalf("round %d: GetObject: %v", i, err)
		}
		body, err := io.ReadAll(got.Body)
		_ = got.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ct := aws.ToString(got.ContentType); ct != "text/"+string(body) {
			t.Fatalf("round %d: body %q with Content-Type %q: a tagging write gave the new object the old one's metadata", i, body, ct)
		}
	}
}
