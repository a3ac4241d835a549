package conformance

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/internal/testgw"
)

// TestConditionalDelete checks S3's conditional deletes (If-Match on
// DeleteObject, ETag in DeleteObjects) through aws-sdk-go-v2, on the
// embedded engine and on PostgreSQL: a wrong ETag is 412 PreconditionFailed,
// a key with no current object (none, or a delete marker) 404 NoSuchKey,
// and the condition is judged with the delete, under the key's lock.
func TestConditionalDelete(t *testing.T) {
	for _, eng := range metaCells() {
		t.Run(eng, func(t *testing.T) {
			t.Parallel()
			gw := testgw.Start(t, testgw.Options{Engine: eng})
			cl := sdkClient(t, gw)
			for _, versioned := range []bool{false, true} {
				t.Run(fmt.Sprintf("versioned=%v", versioned), func(t *testing.T) {
					bucket := mustBucket(t, cl, "cdel")
					if versioned {
						setVersioning(t, cl, bucket, types.BucketVersioningStatusEnabled)
					}
					cdDeleteObject(t, cl, bucket, versioned)
					cdDeleteObjects(t, cl, bucket)
					cdRace(t, cl, bucket)
				})
			}
			if !testgw.External() {
				t.Run("Permissions", func(t *testing.T) { cdPermissions(t, gw, cl) })
			}
		})
	}
}

func cdDeleteObject(t *testing.T, cl *s3.Client, bucket string, versioned bool) {
	ctx := testCtx(t, time.Minute)
	del := func(key, ifMatch string) (*s3.DeleteObjectOutput, error) {
		return cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), IfMatch: aws.String(ifMatch)})
	}
	putString(t, cl, bucket, "k", "one")
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = del("k", `"0123456789abcdef0123456789abcdef"`)
	wantAPIError(t, err, "PreconditionFailed")
	wantStatus(t, err, http.StatusPreconditionFailed)
	if got := getString(t, cl, bucket, "k"); got != "one" {
		t.Fatalf("a failed conditional delete changed the object: %q", got)
	}
	if versioned {
		_, err = cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), IfMatch: head.ETag, VersionId: head.VersionId})
		wantAPIError(t, err, "NotImplemented")
	}
	out, err := del("k", aws.ToString(head.ETag))
	if err != nil {
		t.Fatalf("conditional delete with the object's ETag: %v", err)
	}
	if versioned != aws.ToBool(out.DeleteMarker) || versioned != (aws.ToString(out.VersionId) != "") {
		t.Fatalf("versioned=%v: delete marker %v, version %q", versioned, aws.ToBool(out.DeleteMarker), aws.ToString(out.VersionId))
	}
	objectAbsent(t, cl, bucket, "k")
	// No current object (none, or a delete marker over it): NoSuchKey for
	// either kind of condition, and nothing is added.
	for _, cond := range []string{"*", aws.ToString(head.ETag)} {
		_, err = del("k", cond)
		wantAPIError(t, err, "NoSuchKey")
		wantStatus(t, err, http.StatusNotFound)
		_, err = del("never", cond)
		wantAPIError(t, err, "NoSuchKey")
	}
	if versioned {
		vs, err := cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String("k")})
		if err != nil || len(vs.Versions) != 1 || len(vs.DeleteMarkers) != 1 {
			t.Fatalf("versions after the conditional deletes: %+v, %v", vs, err)
		}
	}
	// "*" deletes whatever object is there.
	putString(t, cl, bucket, "k", "two")
	if _, err := del("k", "*"); err != nil {
		t.Fatalf("If-Match * on an object: %v", err)
	}
	objectAbsent(t, cl, bucket, "k")
}

func cdDeleteObjects(t *testing.T, cl *s3.Client, bucket string) {
	ctx := testCtx(t, time.Minute)
	etags := map[string]string{}
	for _, k := range []string{"m/a", "m/b", "m/d", "m/e"} {
		out, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader("v-" + k)})
		if err != nil {
			t.Fatal(err)
		}
		etags[k] = aws.ToString(out.ETag)
	}
	out, err := cl.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("m/a"), ETag: aws.String(etags["m/a"])},
		{Key: aws.String("m/b"), ETag: aws.String(etags["m/a"])},
		{Key: aws.String("m/c"), ETag: aws.String("*")},
		{Key: aws.String("m/d")},
		{Key: aws.String("m/e"), ETag: aws.String("*")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for _, d := range out.Deleted {
		deleted[aws.ToString(d.Key)] = true
	}
	errs := map[string]string{}
	for _, e := range out.Errors {
		errs[aws.ToString(e.Key)] = aws.ToString(e.Code)
	}
	if len(deleted) != 3 || !deleted["m/a"] || !deleted["m/d"] || !deleted["m/e"] ||
		len(errs) != 2 || errs["m/b"] != "PreconditionFailed" || errs["m/c"] != "NoSuchKey" {
		t.Fatalf("DeleteObjects with ETags: deleted %v, errors %v", deleted, errs)
	}
	if got := getString(t, cl, bucket, "m/b"); got != "v-m/b" {
		t.Fatalf("m/b changed to %q", got)
	}
	for _, k := range []string{"m/a", "m/d", "m/e"} {
		objectAbsent(t, cl, bucket, k)
	}
}

// cdRace races a conditional delete of the first version against a put of
// a second, many times. Whatever the order, the second version must be
// there afterwards: the delete either ran first (and the put followed) or
// found the second version's ETag and failed. A condition judged apart
// from the delete (a read, then an unconditional delete) loses the second
// version when the put lands between the two.
func cdRace(t *testing.T, cl *s3.Client, bucket string) {
	ctx := testCtx(t, 3*time.Minute)
	rounds := 100
	if testing.Short() {
		rounds = 25
	}
	for i := range rounds {
		key := fmt.Sprintf("race/%d", i)
		first, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(fmt.Sprintf("first %d", i))})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var second *s3.PutObjectOutput
		var putErr, delErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			second, putErr = cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(fmt.Sprintf("second %d", i))})
		}()
		go func() {
			defer wg.Done()
			_, delErr = cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), IfMatch: first.ETag})
		}()
		wg.Wait()
		if putErr != nil {
			t.Fatalf("round %d: put: %v", i, putErr)
		}
		if delErr != nil && apiCode(delErr) != "PreconditionFailed" {
			t.Fatalf("round %d: conditional delete: %v", i, delErr)
		}
		head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("round %d: the second version is gone (delete error %v): %v", i, delErr, err)
		}
		if aws.ToString(head.ETag) != aws.ToString(second.ETag) {
			t.Fatalf("round %d: ETag %s, want the second version's %s", i, aws.ToString(head.ETag), aws.ToString(second.ETag))
		}
	}
}

// cdPermissions: an ETag condition tells the caller about the object's
// content, so S3 requires s3:GetObject besides s3:DeleteObject for it; "*"
// needs s3:DeleteObject alone.
func cdPermissions(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	ctx := testCtx(t, time.Minute)
	bucket := mustBucket(t, root, "cdperm")
	ak, sk := createKey(t, gw, "CDEL"+strings.ToUpper(bucket[len(bucket)-8:]), fmt.Sprintf(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::%s/*"}]}`, bucket))
	deleter := sdkClientWithKeys(t, gw, ak, sk)
	out, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: strings.NewReader("x")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = deleter.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), IfMatch: out.ETag})
	wantAPIError(t, err, "AccessDenied")
	dels, err := deleter.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{
		Objects: []types.ObjectIdentifier{{Key: aws.String("k"), ETag: out.ETag}}}})
	if err != nil || len(dels.Errors) != 1 || aws.ToString(dels.Errors[0].Code) != "AccessDenied" {
		t.Fatalf("DeleteObjects with an ETag and no s3:GetObject: %v %+v", err, dels)
	}
	if got := getString(t, root, bucket, "k"); got != "x" {
		t.Fatalf("object changed to %q", got)
	}
	if _, err := deleter.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), IfMatch: aws.String("*")}); err != nil {
		t.Fatalf("If-Match * with s3:DeleteObject: %v", err)
	}
	objectAbsent(t, root, bucket, "k")
}

// TestConditionalCopy checks conditional writes on CopyObject's destination
// (If-None-Match: *, If-Match), as S3 has them for PutObject,
// CompleteMultipartUpload and CopyObject, judged with the copy under the
// destination's lock.
func TestConditionalCopy(t *testing.T) {
	for _, eng := range metaCells() {
		t.Run(eng, func(t *testing.T) {
			t.Parallel()
			gw := testgw.Start(t, testgw.Options{Engine: eng})
			cl := sdkClient(t, gw)
			ctx := testCtx(t, 3*time.Minute)
			bucket := mustBucket(t, cl, "ccopy")
			putString(t, cl, bucket, "src", "source")
			copyTo := func(dst string, in s3.CopyObjectInput) (*s3.CopyObjectOutput, error) {
				in.Bucket, in.Key, in.CopySource = aws.String(bucket), aws.String(dst), aws.String(bucket+"/src")
				return cl.CopyObject(ctx, &in)
			}
			if _, err := copyTo("d", s3.CopyObjectInput{IfNoneMatch: aws.String("*")}); err != nil {
				t.Fatalf("If-None-Match * to a new key: %v", err)
			}
			_, err := copyTo("d", s3.CopyObjectInput{IfNoneMatch: aws.String("*")})
			wantAPIError(t, err, "PreconditionFailed")
			putString(t, cl, bucket, "d", "dest")
			_, err = copyTo("d", s3.CopyObjectInput{IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)})
			wantAPIError(t, err, "PreconditionFailed")
			if got := getString(t, cl, bucket, "d"); got != "dest" {
				t.Fatalf("a failed conditional copy changed the destination: %q", got)
			}
			head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("d")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := copyTo("d", s3.CopyObjectInput{IfMatch: head.ETag}); err != nil {
				t.Fatalf("If-Match with the destination's ETag: %v", err)
			}
			if got := getString(t, cl, bucket, "d"); got != "source" {
				t.Fatalf("destination %q after the copy", got)
			}
			_, err = copyTo("missing", s3.CopyObjectInput{IfMatch: head.ETag})
			wantAPIError(t, err, "NoSuchKey")
			objectAbsent(t, cl, bucket, "missing")
			_, err = copyTo("d", s3.CopyObjectInput{IfNoneMatch: head.ETag})
			wantAPIError(t, err, "NotImplemented")
			// Two copies race to create one key with If-None-Match: *:
			// exactly one wins, every round.
			rounds := 100
			if testing.Short() {
				rounds = 25
			}
			for i := range rounds {
				dst := fmt.Sprintf("race/%d", i)
				var wg sync.WaitGroup
				errs := make([]error, 2)
				for j := range errs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, errs[j] = copyTo(dst, s3.CopyObjectInput{IfNoneMatch: aws.String("*")})
					}()
				}
				wg.Wait()
				won := 0
				for _, err := range errs {
					switch {
					case err == nil:
						won++
					case apiCode(err) != "PreconditionFailed":
						t.Fatalf("round %d: %v", i, err)
					}
				}
				if won != 1 {
					t.Fatalf("round %d: %d copies with If-None-Match: * succeeded, want 1", i, won)
				}
			}
		})
	}
}
