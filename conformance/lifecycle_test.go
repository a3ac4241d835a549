package conformance

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/s3gate/s3gate/internal/testgw"
)

// lifecycleEngines: the lifecycle runner runs over the store's interfaces,
// so one PostgreSQL engine (under the lease, on the database clock) and the
// embedded default (no lease, the process clock) cover its two wirings.
var lifecycleEngines = []string{testgw.Embedded, "pgchunks"}

// lcLongDays is a rule's day count that a one-second day makes about 28 hours.
const lcLongDays = 100000

// TestLifecycle runs, on one gateway per engine whose lifecycle day is a
// second, the runner's scenarios side by side in their own buckets (the
// metrics then add up exactly), and then the API's.
func TestLifecycle(t *testing.T) {
	for _, engine := range lifecycleEngines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			gw := lifecycleGateway(t, engine)
			t.Run("runs", func(t *testing.T) { lcRuns(t, gw) })
			t.Run("api", func(t *testing.T) { lcAPI(t, gw) })
		})
	}
}

// lcScenario writes a bucket's objects, sets its rules and returns the
// check of what must be left once the runner and GC are done.
type lcScenario func(t *testing.T, cl *s3.Client) (check func())

// lcRuns: stale uploads aborted, current objects expired (prefix and tag
// filters), a versioned bucket's current versions turned into delete
// markers, its noncurrent versions (beyond NewerNoncurrentVersions) and then
// its expired markers removed; GC then reclaims exactly the blobs of what
// went. Counts are the three scenarios' sums.
func lcRuns(t *testing.T, gw *testgw.Gateway) {
	cl := sdkClient(t, gw)
	start := metricsOf(t, gw)
	if start["s3gate_blobs"] != 0 {
		t.Fatalf("a fresh gateway holds %v blobs", start["s3gate_blobs"])
	}
	// The scenarios write 7+8+9 blobs; the runner may start on one while
	// the next is written, so the counts are checked when all is done: 10
	// blobs left and 14 reclaimed.
	var checks []func()
	for _, sc := range []lcScenario{lcUploads, lcExpires, lcVersions} {
		checks = append(checks, sc(t, cl))
	}
	want := map[string]float64{"s3gate_lifecycle_aborted_uploads_total": 2, "s3gate_lifecycle_expired_objects_total": 5 + 2,
		"s3gate_lifecycle_noncurrent_versions_total": 5, "s3gate_lifecycle_delete_markers_total": 2,
		"s3gate_lifecycle_errors_total": 0, "s3gate_lifecycle_refused_deletes_total": 0,
		"s3gate_blobs": 3 + 3 + 4, "s3gate_gc_reclaimed_blobs_total": 4 + 5 + 5}
	delta := func(m map[string]float64, name string) float64 { return m[name] - start[name] }
	m := waitMetrics(t, gw, "every rule applied and GC done", func(m map[string]float64) bool {
		for _, name := range []string{"s3gate_lifecycle_aborted_uploads_total", "s3gate_lifecycle_expired_objects_total",
			"s3gate_lifecycle_noncurrent_versions_total", "s3gate_lifecycle_delete_markers_total", "s3gate_gc_reclaimed_blobs_total"} {
			if delta(m, name) < want[name] { // GC counts a run's reclaimed blobs when the run ends
				return false
			}
		}
		return m["s3gate_blobs"] <= want["s3gate_blobs"]
	})
	for name, w := range want {
		if got := delta(m, name); name != "s3gate_blobs" && got != w {
			t.Errorf("%s rose by %v, want %v", name, got, w)
		}
	}
	if m["s3gate_blobs"] != want["s3gate_blobs"] {
		t.Errorf("%v blobs left, want %v", m["s3gate_blobs"], want["s3gate_blobs"])
	}
	for _, check := range checks {
		check()
	}
}

// lcUploads: an AbortIncompleteMultipartUpload rule aborts the stale uploads
// under its prefix, not the others: 7 blobs written, 4 reclaimed.
func lcUploads(t *testing.T, cl *s3.Client) func() {
	ctx := testCtx(t, 2*time.Minute)
	bucket := mustBucket(t, cl, "lcup")
	if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("up/kept"), Body: strings.NewReader("object")}); err != nil {
		t.Fatal(err)
	}
	uploads := map[string]string{} // key -> upload id
	for _, key := range []string{"up/a", "up/b", "other/c"} {
		mu, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		uploads[key] = aws.ToString(mu.UploadId)
		for part := int32(1); part <= 2; part++ {
			if _, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: aws.String(key), UploadId: mu.UploadId,
				PartNumber: aws.Int32(part), Body: strings.NewReader(key + fmt.Sprint(part))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := cl.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: &bucket,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{ID: aws.String("stale"),
			Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("up/")},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)}}}}}); err != nil {
		t.Fatal(err)
	}
	return func() {
		list, err := cl.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Uploads) != 1 || aws.ToString(list.Uploads[0].UploadId) != uploads["other/c"] {
			t.Errorf("uploads left %+v, want only other/c's", list.Uploads)
		}
		readBackSDK(t, cl, bucket, "up/kept", []byte("object"))
	}
}

// lcExpires: an Expiration rule removes the current objects under its
// prefix or with its tag, not the others, and PUT announced which: 8 blobs
// written, 5 reclaimed.
func lcExpires(t *testing.T, cl *s3.Client) func() {
	ctx := testCtx(t, 2*time.Minute)
	bucket := mustBucket(t, cl, "lcexp")
	if _, err := cl.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: &bucket,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
			{ID: aws.String("exp"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("exp/")},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
			{ID: aws.String("scratch"), Status: types.ExpirationStatusEnabled,
				Filter:     &types.LifecycleRuleFilter{Tag: &types.Tag{Key: aws.String("class"), Value: aws.String("scratch")}},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
		}}}); err != nil {
		t.Fatal(err)
	}
	objects := map[string]string{ // key -> tagging
		"exp/0": "", "exp/1": "", "exp/2": "", "exp/3": "", "t/scratch": "class=scratch",
		"keep/0": "", "keep/1": "", "t/kept": "class=keep",
	}
	for key, tagging := range objects {
		body := key + strings.Repeat("x", len(key)*100) // distinct contents, a blob each
		in := &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(key), Body: strings.NewReader(body)}
		if tagging != "" {
			in.Tagging = aws.String(tagging)
		}
		out, err := cl.PutObject(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		expires := strings.HasPrefix(key, "exp/") || key == "t/scratch"
		if (out.Expiration != nil) != expires {
			t.Errorf("%s: x-amz-expiration %q, want one: %v", key, aws.ToString(out.Expiration), expires)
		}
	}
	return func() {
		list, err := cl.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &bucket})
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, o := range list.Contents {
			left = append(left, aws.ToString(o.Key))
		}
		if strings.Join(left, " ") != "keep/0 keep/1 t/kept" {
			t.Errorf("objects left %v, want keep/0 keep/1 t/kept", left)
		}
	}
}

// lcVersions: on a versioned bucket, Expiration turns current versions into
// delete markers, NoncurrentVersionExpiration removes the versions below
// them (keeping NewerNoncurrentVersions where it says so), and
// ExpiredObjectDeleteMarker then removes the markers left alone: 9 blobs
// written, 5 reclaimed (v/a's three, v/b's, n/x's oldest).
func lcVersions(t *testing.T, cl *s3.Client) func() {
	ctx := testCtx(t, 2*time.Minute)
	bucket := mustBucket(t, cl, "lcver")
	if _, err := cl.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: &bucket,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	for i, key := range []string{"v/a", "v/a", "v/a", "v/b", "n/x", "n/x", "n/x", "keep/c", "keep/c"} {
		body := fmt.Sprintf("%s %d %s", key, i, strings.Repeat("v", i*200)) // distinct: a blob each
		if _, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	// The rules come after the writes: everything is due at once, whatever
	// the pace of the writes, so the counts are exact.
	if _, err := cl.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: &bucket,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
			{ID: aws.String("v"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("v/")},
				Expiration:                  &types.LifecycleExpiration{Days: aws.Int32(1)},
				NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}},
			{ID: aws.String("markers"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("v/")},
				Expiration: &types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)}},
			{ID: aws.String("n"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("n/")},
				NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1), NewerNoncurrentVersions: aws.Int32(1)}},
		}}}); err != nil {
		t.Fatal(err)
	}
	return func() {
		out, err := cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: &bucket})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range out.Versions {
			got = append(got, fmt.Sprintf("%s latest=%v", aws.ToString(v.Key), aws.ToBool(v.IsLatest)))
		}
		if len(out.DeleteMarkers) != 0 || strings.Join(got, ", ") != "keep/c latest=true, keep/c latest=false, n/x latest=true, n/x latest=false" {
			t.Errorf("versions left %v, markers %d: want keep/c's and n/x's two each, no marker", got, len(out.DeleteMarkers))
		}
		readBackSDK(t, cl, bucket, "n/x", []byte("n/x 6 "+strings.Repeat("v", 6*200)))
	}
}

// lcAPI: Put/Get/DeleteBucketLifecycleConfiguration through the SDK as S3
// answers them, the refusals with S3's codes, and x-amz-expiration on PUT,
// GET and HEAD. The gateway's day is a second: rules of 100,000 days expire
// nothing while the test runs.
func lcAPI(t *testing.T, gw *testgw.Gateway) {
	{
		cl := sdkClient(t, gw)
		ctx := testCtx(t, 2*time.Minute)
		bucket := mustBucket(t, cl, "lc")
		_, err := cl.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &bucket})
		wantAPIError(t, err, "NoSuchLifecycleConfiguration")
		if httpStatus(err) != http.StatusNotFound {
			t.Errorf("status %d, want 404", httpStatus(err))
		}

		rules := []types.LifecycleRule{
			{ID: aws.String("tmp"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("tmp/")},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(lcLongDays)}},
			{ID: aws.String("tagged"), Status: types.ExpirationStatusEnabled,
				Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{Prefix: aws.String("t/"),
					Tags: []types.Tag{{Key: aws.String("class"), Value: aws.String("scratch")}}, ObjectSizeLessThan: aws.Int64(100)}},
				Expiration:                  &types.LifecycleExpiration{Days: aws.Int32(lcLongDays)},
				NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(lcLongDays), NewerNoncurrentVersions: aws.Int32(2)}},
			{ID: aws.String("markers"), Status: types.ExpirationStatusDisabled, Filter: &types.LifecycleRuleFilter{},
				Expiration:                     &types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)},
				AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(2)}},
			{ID: aws.String("dated rule"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("d/")},
				Expiration: &types.LifecycleExpiration{Date: aws.Time(time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC))}},
		}
		if _, err := cl.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: &bucket,
			LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: rules}}); err != nil {
			t.Fatalf("PutBucketLifecycleConfiguration: %v", err)
		}
		got, err := cl.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &bucket})
		if err != nil {
			t.Fatalf("GetBucketLifecycleConfiguration: %v", err)
		}
		if g, w := describeRules(got.Rules), describeRules(rules); g != w {
			t.Errorf("rules read back\n%s\nwant\n%s", g, w)
		}

		// x-amz-expiration: LastModified + Days rounded up to the next whole
		// day (here seconds; with 24h the next midnight UTC, lifecycle's unit
		// tests), and the rule's URL-encoded ID.
		put, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("tmp/a"), Body: strings.NewReader("x")})
		if err != nil {
			t.Fatal(err)
		}
		head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("tmp/a")})
		if err != nil {
			t.Fatal(err)
		}
		due := head.LastModified.UTC().Add(lcLongDays * time.Second).Truncate(time.Second).Add(time.Second)
		want := fmt.Sprintf(`expiry-date="%s", rule-id="tmp"`, due.Format(http.TimeFormat))
		get, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: aws.String("tmp/a")})
		if err != nil {
			t.Fatal(err)
		}
		get.Body.Close()
		for what, v := range map[string]*string{"PUT": put.Expiration, "HEAD": head.Expiration, "GET": get.Expiration} {
			if aws.ToString(v) != want {
				t.Errorf("%s x-amz-expiration %q, want %q", what, aws.ToString(v), want)
			}
		}
		// CopyObject and CompleteMultipartUpload name the expiry of what
		// they wrote, from its own last-modified time.
		cp, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &bucket, Key: aws.String("tmp/copy"), CopySource: aws.String(bucket + "/tmp/a")})
		if err != nil {
			t.Fatal(err)
		}
		up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &bucket, Key: aws.String("tmp/mp")})
		if err != nil {
			t.Fatal(err)
		}
		part, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: &bucket, Key: aws.String("tmp/mp"), UploadId: up.UploadId,
			PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
		if err != nil {
			t.Fatal(err)
		}
		done, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &bucket, Key: aws.String("tmp/mp"), UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}})
		if err != nil {
			t.Fatal(err)
		}
		for what, c := range map[string]struct{ key, got string }{"CopyObject": {"tmp/copy", aws.ToString(cp.Expiration)},
			"CompleteMultipartUpload": {"tmp/mp", aws.ToString(done.Expiration)}} {
			h, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String(c.key)})
			if err != nil {
				t.Fatal(err)
			}
			if c.got == "" || c.got != aws.ToString(h.Expiration) {
				t.Errorf("%s x-amz-expiration %q, HEAD of what it wrote %q", what, c.got, aws.ToString(h.Expiration))
			}
		}
		dated, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String("d/x"), Body: strings.NewReader("x")})
		if err != nil {
			t.Fatal(err)
		}
		if want := `expiry-date="Wed, 02 Jan 2030 00:00:00 GMT", rule-id="dated+rule"`; aws.ToString(dated.Expiration) != want {
			t.Errorf("dated x-amz-expiration %q, want %q", aws.ToString(dated.Expiration), want)
		}
		// A tag filter: only the tagged, small object carries the header.
		for _, o := range []struct {
			key, tagging string
			size         int
			expires      bool
		}{{"t/small", "class=scratch", 10, true}, {"t/big", "class=scratch", 100, false}, {"t/other", "class=keep", 10, false}, {"other", "", 1, false}} {
			in := &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(o.key), Body: bytes.NewReader(make([]byte, o.size))}
			if o.tagging != "" {
				in.Tagging = aws.String(o.tagging)
			}
			out, err := cl.PutObject(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			h, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String(o.key)})
			if err != nil {
				t.Fatal(err)
			}
			for what, v := range map[string]*string{"PUT": out.Expiration, "HEAD": h.Expiration} {
				if has := strings.Contains(aws.ToString(v), `rule-id="tagged"`); has != o.expires {
					t.Errorf("%s %s: x-amz-expiration %q, want the tagged rule: %v", what, o.key, aws.ToString(v), o.expires)
				}
			}
		}

		// Refusals, each as S3 answers it; the stored rules stay.
		for _, tt := range []struct {
			name string
			rule types.LifecycleRule
			code string
		}{
			{"transition", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{},
				Transitions: []types.Transition{{Days: aws.Int32(30), StorageClass: types.TransitionStorageClassGlacier}}}, "NotImplemented"},
			{"days zero", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(0)}}, "InvalidArgument"},
			{"abort with tag", types.LifecycleRule{Status: types.ExpirationStatusEnabled,
				Filter:                         &types.LifecycleRuleFilter{Tag: &types.Tag{Key: aws.String("k"), Value: aws.String("v")}},
				AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)}}, "InvalidRequest"},
			{"no action", types.LifecycleRule{Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{}}, "InvalidRequest"},
			{"id too long", types.LifecycleRule{ID: aws.String(strings.Repeat("i", 256)), Status: types.ExpirationStatusEnabled,
				Filter: &types.LifecycleRuleFilter{}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}}, "InvalidArgument"},
			{"bad status", types.LifecycleRule{Status: "On", Filter: &types.LifecycleRuleFilter{},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}}, "MalformedXML"},
		} {
			_, err := cl.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: &bucket,
				LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{tt.rule}}})
			if apiCode(err) != tt.code {
				t.Errorf("%s: %v, want %s", tt.name, err, tt.code)
			}
		}
		doc := `<LifecycleConfiguration><Rule><ID>x</ID><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>`
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket, Query: url.Values{"lifecycle": {""}}, Body: []byte(doc)})
		if status != http.StatusBadRequest || !strings.Contains(string(body), "<Code>InvalidRequest</Code>") ||
			!strings.Contains(string(body), "Missing required header for this request: Content-MD5") {
			t.Errorf("PUT without Content-MD5 or a checksum: %d %s", status, body)
		}
		again, err := cl.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &bucket})
		if err != nil || describeRules(again.Rules) != describeRules(rules) {
			t.Errorf("a refused PUT changed the rules: %v", err)
		}

		if _, err := cl.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: &bucket}); err != nil {
			t.Fatalf("DeleteBucketLifecycle: %v", err)
		}
		_, err = cl.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &bucket})
		wantAPIError(t, err, "NoSuchLifecycleConfiguration")
		if h, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String("tmp/a")}); err != nil || h.Expiration != nil {
			t.Errorf("x-amz-expiration without rules: %v %v", aws.ToString(h.Expiration), err)
		}
		if _, err := cl.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: &bucket}); err != nil {
			t.Errorf("DeleteBucketLifecycle without rules: %v, want 204", err)
		}
	}
}

// describeRules renders rules comparably (the SDK's types hold pointers).
func describeRules(rules []types.LifecycleRule) string {
	var b strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&b, "id=%s status=%s", aws.ToString(r.ID), r.Status)
		if f := r.Filter; f != nil {
			fmt.Fprintf(&b, " prefix=%q", aws.ToString(f.Prefix))
			if a := f.And; a != nil {
				fmt.Fprintf(&b, " and(prefix=%q lt=%d", aws.ToString(a.Prefix), aws.ToInt64(a.ObjectSizeLessThan))
				for _, tg := range a.Tags {
					fmt.Fprintf(&b, " %s=%s", aws.ToString(tg.Key), aws.ToString(tg.Value))
				}
				b.WriteString(")")
			}
		}
		if e := r.Expiration; e != nil {
			fmt.Fprintf(&b, " exp(days=%d date=%v marker=%v)", aws.ToInt32(e.Days), aws.ToTime(e.Date).UTC(), aws.ToBool(e.ExpiredObjectDeleteMarker))
		}
		if n := r.NoncurrentVersionExpiration; n != nil {
			fmt.Fprintf(&b, " noncurrent(%d keep %d)", aws.ToInt32(n.NoncurrentDays), aws.ToInt32(n.NewerNoncurrentVersions))
		}
		if a := r.AbortIncompleteMultipartUpload; a != nil {
			fmt.Fprintf(&b, " abort(%d)", aws.ToInt32(a.DaysAfterInitiation))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// metricsOf scrapes the gateway's metrics: the value of each counter and
// gauge, series of one name summed.
func metricsOf(t *testing.T, gw *testgw.Gateway) map[string]float64 {
	t.Helper()
	resp, err := http.Get(gw.MetricsURL + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[name] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

// waitMetrics polls the gateway's metrics until ok holds.
func waitMetrics(t *testing.T, gw *testgw.Gateway, what string, ok func(m map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		m := metricsOf(t, gw)
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within a minute; lifecycle %v/%v/%v, gc %v, blobs %v", what,
				m["s3gate_lifecycle_expired_objects_total"], m["s3gate_lifecycle_aborted_uploads_total"], m["s3gate_lifecycle_errors_total"],
				m["s3gate_gc_reclaimed_blobs_total"], m["s3gate_blobs"])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lifecycleGateway is a gateway whose lifecycle day is a second, with the
// runner and online GC running often.
func lifecycleGateway(t *testing.T, engine string) *testgw.Gateway {
	return testgw.Start(t, testgw.Options{Engine: engine, Env: []string{"S3GATE_LIFECYCLE_DAY=1s", "S3GATE_LIFECYCLE_INTERVAL=100ms",
		"S3GATE_GC_INTERVAL=100ms", "S3GATE_GC_GRACE=1ms", "S3GATE_METRICS_STATS_TTL=0"}})
}
