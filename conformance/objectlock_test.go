package conformance

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // Content-MD5 of a request body
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/s3gate/s3gate/internal/testgw"
)

// TestObjectLock: Object Lock through aws-sdk-go-v2 on the embedded default
// and on PostgreSQL. A COMPLIANCE version survives DeleteObject and
// DeleteObjects by version id (a per-key AccessDenied), overwrites, a delete
// marker, online GC sweeps and DeleteBucket until its retain-until date,
// which the test waits for in database time; GOVERNANCE yields only to the
// bypass header with s3:BypassGovernanceRetention; a legal hold blocks until
// lifted; the default retention counts from each new version's
// last-modified; COMPLIANCE is never shortened; each new call answers AWS's
// XML.
func TestObjectLock(t *testing.T) {
	for _, engine := range metaCells() {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			// Online GC sweeps every 100 ms, so a sweep runs while versions are locked.
			gw := testgw.Start(t, testgw.Options{Engine: engine, InlineMax: 1024,
				Env: []string{"S3GATE_GC_INTERVAL=100ms", "S3GATE_GC_GRACE=1ms"}})
			cl := sdkClient(t, gw)
			t.Run("Compliance", func(t *testing.T) { olCompliance(t, gw, cl) })
			if !testgw.External() { // creates access keys with s3gate admin
				t.Run("Governance", func(t *testing.T) { olGovernance(t, gw, cl) })
			}
			t.Run("LegalHold", func(t *testing.T) { olLegalHold(t, cl) })
			t.Run("DefaultRetention", func(t *testing.T) { olDefaultRetention(t, cl) })
			t.Run("ExactXML", func(t *testing.T) { olExactXML(t, gw, cl) })
			t.Run("Refusals", func(t *testing.T) { olRefusals(t, gw, cl) })
			if engine == testgw.Embedded { // restic's requests do not depend on the engine
				t.Run("Restic", func(t *testing.T) { olRestic(t, gw, cl) })
			}
		})
	}
}

// lockBucket creates a bucket with Object Lock. It is not removed at the
// end: what it holds is locked (the gateway goes with the test).
func lockBucket(t *testing.T, cl *s3.Client, prefix string) string {
	t.Helper()
	name := bucketName(prefix)
	if _, err := cl.CreateBucket(testCtx(t, time.Minute), &s3.CreateBucketInput{Bucket: aws.String(name), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatalf("CreateBucket %s with Object Lock: %v", name, err)
	}
	return name
}

func putLocked(t *testing.T, cl *s3.Client, b, k string, body []byte, mod func(*s3.PutObjectInput)) *s3.PutObjectOutput {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(k), Body: bytes.NewReader(body)}
	if mod != nil {
		mod(in)
	}
	out, err := cl.PutObject(testCtx(t, time.Minute), in)
	if err != nil {
		t.Fatalf("PutObject %s: %v", k, err)
	}
	if aws.ToString(out.VersionId) == "" {
		t.Fatalf("PutObject %s in a bucket with Object Lock answered no version id", k)
	}
	return out
}

func deleteVersion(ctx context.Context, cl *s3.Client, b, k, v string, bypass bool) error {
	in := &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String(k), VersionId: aws.String(v)}
	if bypass {
		in.BypassGovernanceRetention = aws.Bool(true)
	}
	_, err := cl.DeleteObject(ctx, in)
	return err
}

// versionBody reads one version.
func versionBody(t *testing.T, cl *s3.Client, b, k, v string) []byte {
	t.Helper()
	out, err := cl.GetObject(testCtx(t, time.Minute), &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String(k), VersionId: aws.String(v)})
	if err != nil {
		t.Fatalf("GET %s version %s: %v", k, v, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// metric reads one sample of the gateway's metrics (0 if absent).
func metric(t *testing.T, gw *testgw.Gateway, name string) float64 {
	t.Helper()
	resp, err := gw.HTTPClient.Get(gw.MetricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(m), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", l, err)
			}
			return f
		}
	}
	return 0
}

func olCompliance(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := lockBucket(t, cl, "olcomp")
	body := bytes.Repeat([]byte("compliance "), 300) // above the knee: a blob GC could reclaim
	until := time.Now().Add(6 * time.Second)
	v1 := aws.ToString(putLocked(t, cl, b, "k", body, func(in *s3.PutObjectInput) {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockModeCompliance, aws.Time(until)
	}).VersionId)
	other := aws.ToString(putLocked(t, cl, b, "other", []byte("free"), nil).VersionId)

	wantAPIError(t, deleteVersion(ctx, cl, b, "k", v1, false), "AccessDenied")
	wantAPIError(t, deleteVersion(ctx, cl, b, "k", v1, true), "AccessDenied")
	out, err := cl.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(b), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("k"), VersionId: aws.String(v1)}, {Key: aws.String("other"), VersionId: aws.String(other)}}}})
	if err != nil {
		t.Fatalf("DeleteObjects with a locked version failed as a whole: %v", err)
	}
	if len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "k" || aws.ToString(out.Errors[0].Code) != "AccessDenied" ||
		len(out.Deleted) != 1 || aws.ToString(out.Deleted[0].Key) != "other" {
		t.Fatalf("DeleteObjects: deleted %+v, errors %+v", out.Deleted, out.Errors)
	}
	// Overwrites and a delete without a version id make new versions and a
	// marker; the locked version stays.
	putLocked(t, cl, b, "k", []byte("newer"), nil)
	if _, err := cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String("k")}); err != nil {
		t.Fatalf("a delete marker over a locked version: %v", err)
	}
	// COMPLIANCE cannot be shortened or removed, bypass or not.
	_, err = cl.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1),
		BypassGovernanceRetention: aws.Bool(true),
		Retention:                 &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(until.Add(-time.Second))}})
	wantAPIError(t, err, "AccessDenied")
	_, err = cl.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1),
		BypassGovernanceRetention: aws.Bool(true), Retention: &types.ObjectLockRetention{}})
	wantAPIError(t, err, "AccessDenied")
	_, err = cl.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b)})
	wantAPIError(t, err, "BucketNotEmpty")
	// Online GC sweeps (twice, so one started after the attempts) leave the
	// locked version's blob alone.
	if !testgw.External() {
		sweeps := metric(t, gw, "s3gate_gc_sweeps_total")
		deadline := time.Now().Add(30 * time.Second)
		for metric(t, gw, "s3gate_gc_sweeps_total") < sweeps+2 {
			if time.Now().After(deadline) {
				t.Fatal("no GC sweep ran")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if got := versionBody(t, cl, b, "k", v1); !bytes.Equal(got, body) {
		t.Fatalf("the locked version reads %d bytes, want its %d", len(got), len(body))
	}
	// Once the database's clock passes the date, the version goes (polled:
	// the clock that counts is the database's).
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := deleteVersion(ctx, cl, b, "k", v1, false)
		if err == nil {
			break
		}
		if apiCode(err) != "AccessDenied" || time.Now().After(deadline) {
			t.Fatalf("delete after the retain-until date: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	_, err = cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v1)})
	wantStatus(t, err, http.StatusNotFound)
}

func olGovernance(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := lockBucket(t, cl, "olgov")
	hour := time.Now().Add(time.Hour)
	gov := func(k string) string {
		return aws.ToString(putLocked(t, cl, b, k, []byte(k), func(in *s3.PutObjectInput) {
			in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockModeGovernance, aws.Time(hour)
		}).VersionId)
	}
	a, c, d := gov("a"), gov("c"), gov("d")
	wantAPIError(t, deleteVersion(ctx, cl, b, "a", a, false), "AccessDenied")
	// A key whose policy lacks s3:BypassGovernanceRetention is refused even
	// with the header; one that has it deletes.
	actions := `"s3:PutObject","s3:GetObject","s3:GetObjectVersion","s3:DeleteObject","s3:DeleteObjectVersion","s3:PutObjectRetention"`
	doc := func(extra string) string {
		return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":[%s%s],"Resource":"arn:aws:s3:::%s/*"}]}`, actions, extra, b)
	}
	suffix := strings.ToUpper(b[len(b)-8:])
	ak, sk := createKey(t, gw, "NOBYPASS"+suffix, doc(""))
	nob := sdkClientWithKeys(t, gw, ak, sk)
	ak, sk = createKey(t, gw, "BYPASS"+suffix, doc(`,"s3:BypassGovernanceRetention"`))
	byp := sdkClientWithKeys(t, gw, ak, sk)
	wantAPIError(t, deleteVersion(ctx, nob, b, "a", a, true), "AccessDenied")
	_, err := nob.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("c"), VersionId: aws.String(c),
		BypassGovernanceRetention: aws.Bool(true), Retention: &types.ObjectLockRetention{}})
	wantAPIError(t, err, "AccessDenied")
	if err := deleteVersion(ctx, byp, b, "a", a, true); err != nil {
		t.Fatalf("delete with the bypass and its permission: %v", err)
	}
	// Shortening needs the bypass; extending does not.
	_, err = cl.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("c"), VersionId: aws.String(c),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(hour.Add(-time.Minute))}})
	wantAPIError(t, err, "AccessDenied")
	if _, err := nob.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("c"), VersionId: aws.String(c),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(hour.Add(time.Minute))}}); err != nil {
		t.Fatalf("extending GOVERNANCE: %v", err)
	}
	if _, err := byp.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("d"), VersionId: aws.String(d),
		BypassGovernanceRetention: aws.Bool(true), Retention: &types.ObjectLockRetention{}}); err != nil {
		t.Fatalf("removing GOVERNANCE with the bypass: %v", err)
	}
	if err := deleteVersion(ctx, nob, b, "d", d, false); err != nil {
		t.Fatalf("delete after the retention was removed: %v", err)
	}
	// DeleteObjects carries the bypass for every entry.
	out, err := cl.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(b), BypassGovernanceRetention: aws.Bool(true),
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("c"), VersionId: aws.String(c)}}}})
	if err != nil || len(out.Errors) != 0 || len(out.Deleted) != 1 {
		t.Fatalf("DeleteObjects with the bypass: %+v, %v", out, err)
	}
}

func olLegalHold(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := lockBucket(t, cl, "olhold")
	v := aws.ToString(putLocked(t, cl, b, "k", []byte("held"), func(in *s3.PutObjectInput) {
		in.ObjectLockLegalHoldStatus = types.ObjectLockLegalHoldStatusOn
	}).VersionId)
	wantAPIError(t, deleteVersion(ctx, cl, b, "k", v, true), "AccessDenied")
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("k")})
	if err != nil || head.ObjectLockLegalHoldStatus != types.ObjectLockLegalHoldStatusOn || head.ObjectLockMode != "" {
		t.Fatalf("HEAD: hold %q mode %q, %v", head.ObjectLockLegalHoldStatus, head.ObjectLockMode, err)
	}
	if _, err := cl.PutObjectLegalHold(ctx, &s3.PutObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v),
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOff}}); err != nil {
		t.Fatal(err)
	}
	got, err := cl.GetObjectLegalHold(ctx, &s3.GetObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(v)})
	if err != nil || got.LegalHold.Status != types.ObjectLockLegalHoldStatusOff {
		t.Fatalf("GetObjectLegalHold: %+v, %v", got, err)
	}
	if err := deleteVersion(ctx, cl, b, "k", v, false); err != nil {
		t.Fatalf("delete after the hold was lifted: %v", err)
	}
}

func olDefaultRetention(t *testing.T, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := lockBucket(t, cl, "oldef")
	if _, err := cl.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String(b),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(2)}}}}); err != nil {
		t.Fatal(err)
	}
	v := aws.ToString(putLocked(t, cl, b, "put", []byte("p"), nil).VersionId)
	if _, err := cl.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("copy"), CopySource: aws.String(b + "/put")}); err != nil {
		t.Fatal(err)
	}
	up, err := cl.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mpu")})
	if err != nil {
		t.Fatal(err)
	}
	part, err := cl.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(b), Key: aws.String("mpu"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("m")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mpu"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}}); err != nil {
		t.Fatal(err)
	}
	// A retention named by the request wins over the default.
	named := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	putLocked(t, cl, b, "named", []byte("n"), func(in *s3.PutObjectInput) {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockModeCompliance, aws.Time(named)
	})
	// Each version's retain-until date is its own last-modified + 2 days
	// (the listing's millisecond times).
	lv, err := cl.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(b)})
	if err != nil {
		t.Fatal(err)
	}
	if len(lv.Versions) != 4 {
		t.Fatalf("%d versions, want 4", len(lv.Versions))
	}
	for _, ver := range lv.Versions {
		k := aws.ToString(ver.Key)
		r, err := cl.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(b), Key: ver.Key, VersionId: ver.VersionId})
		if err != nil {
			t.Fatalf("GetObjectRetention %s: %v", k, err)
		}
		mode, want := types.ObjectLockRetentionModeGovernance, aws.ToTime(ver.LastModified).AddDate(0, 0, 2)
		if k == "named" {
			mode, want = types.ObjectLockRetentionModeCompliance, named
		}
		if r.Retention.Mode != mode || !aws.ToTime(r.Retention.RetainUntilDate).Equal(want) {
			t.Errorf("%s: retention %s until %v, want %s until %v (last-modified %v)", k, r.Retention.Mode,
				aws.ToTime(r.Retention.RetainUntilDate), mode, want, aws.ToTime(ver.LastModified))
		}
	}
	head, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("put"), VersionId: aws.String(v)})
	if err != nil || head.ObjectLockMode != types.ObjectLockModeGovernance || head.ObjectLockRetainUntilDate == nil {
		t.Fatalf("HEAD: mode %q until %v, %v", head.ObjectLockMode, head.ObjectLockRetainUntilDate, err)
	}
}

// olExactXML checks the bodies of the new calls byte for byte, as AWS
// writes them.
func olExactXML(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := lockBucket(t, cl, "olxml")
	until := time.Date(2099, 1, 2, 3, 4, 5, 0, time.UTC)
	v := aws.ToString(putLocked(t, cl, b, "k", []byte("x"), func(in *s3.PutObjectInput) {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockModeGovernance, aws.Time(until)
		in.ObjectLockLegalHoldStatus = types.ObjectLockLegalHoldStatusOn
	}).VersionId)
	get := func(path string, q url.Values, want string) {
		t.Helper()
		status, h, body := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: path, Query: q})
		if status != http.StatusOK || string(body) != want || h.Get("Content-Type") != "application/xml" {
			t.Fatalf("GET %s?%s: HTTP %d %s\n%s\nwant\n%s", path, q.Encode(), status, h.Get("Content-Type"), body, want)
		}
	}
	const decl = `<?xml version="1.0" encoding="UTF-8"?>` + "\n"
	get("/"+b, url.Values{"object-lock": {""}}, decl+`<ObjectLockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ObjectLockEnabled>Enabled</ObjectLockEnabled></ObjectLockConfiguration>`)
	get("/"+b+"/k", url.Values{"retention": {""}, "versionId": {v}}, decl+`<Retention xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Mode>GOVERNANCE</Mode><RetainUntilDate>2099-01-02T03:04:05.000Z</RetainUntilDate></Retention>`)
	get("/"+b+"/k", url.Values{"legal-hold": {""}}, decl+`<LegalHold xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>ON</Status></LegalHold>`)
	// PUTs of AWS's own documents (with Content-MD5), then read back.
	put := func(path string, q url.Values, doc string) {
		t.Helper()
		sum := md5.Sum([]byte(doc)) //nolint:gosec // Content-MD5
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: path, Query: q, Body: []byte(doc),
			Header: http.Header{"Content-Md5": {base64.StdEncoding.EncodeToString(sum[:])}}})
		if status != http.StatusOK || len(body) != 0 {
			t.Fatalf("PUT %s?%s: HTTP %d %s", path, q.Encode(), status, body)
		}
	}
	cfg := `<ObjectLockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><ObjectLockEnabled>Enabled</ObjectLockEnabled><Rule><DefaultRetention><Mode>COMPLIANCE</Mode><Years>1</Years></DefaultRetention></Rule></ObjectLockConfiguration>`
	put("/"+b, url.Values{"object-lock": {""}}, cfg)
	get("/"+b, url.Values{"object-lock": {""}}, decl+cfg)
	put("/"+b+"/k", url.Values{"retention": {""}, "versionId": {v}}, `<Retention xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Mode>GOVERNANCE</Mode><RetainUntilDate>2099-06-01T00:00:00Z</RetainUntilDate></Retention>`)
	get("/"+b+"/k", url.Values{"retention": {""}}, decl+`<Retention xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Mode>GOVERNANCE</Mode><RetainUntilDate>2099-06-01T00:00:00.000Z</RetainUntilDate></Retention>`)
	put("/"+b+"/k", url.Values{"legal-hold": {""}, "versionId": {v}}, `<LegalHold xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>OFF</Status></LegalHold>`)
	get("/"+b+"/k", url.Values{"legal-hold": {""}}, decl+`<LegalHold xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>OFF</Status></LegalHold>`)
	// GET's headers.
	status, h, _ := doRaw(t, gw, rawReq{Method: http.MethodGet, Path: "/" + b + "/k"})
	if status != http.StatusOK || h.Get("X-Amz-Object-Lock-Mode") != "GOVERNANCE" ||
		h.Get("X-Amz-Object-Lock-Retain-Until-Date") != "2099-06-01T00:00:00.000Z" || h.Get("X-Amz-Object-Lock-Legal-Hold") != "OFF" {
		t.Fatalf("GET: HTTP %d, lock headers %v", status, h)
	}
	_ = ctx
}

// olRefusals: AWS's errors, and nothing changed.
func olRefusals(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := lockBucket(t, cl, "olref")
	// A bucket with Object Lock keeps versioning Enabled.
	_, err := cl.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(b),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	wantAPIError(t, err, "InvalidBucketState")
	vc, err := cl.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(b)})
	if err != nil || vc.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("versioning of a bucket with Object Lock: %q, %v", vc.Status, err)
	}
	// Object Lock needs versioning Enabled on an existing bucket.
	plain := mustBucket(t, cl, "olplain")
	lockCfg := &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}
	_, err = cl.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String(plain), ObjectLockConfiguration: lockCfg})
	wantAPIError(t, err, "InvalidBucketState")
	_, err = cl.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String(plain)})
	wantAPIError(t, err, "ObjectLockConfigurationNotFoundError")
	// Bad configurations, dates and values.
	for _, d := range []*types.DefaultRetention{
		{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(0)},
		{Mode: types.ObjectLockRetentionModeGovernance, Years: aws.Int32(-1)},
	} {
		_, err = cl.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String(b),
			ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled, Rule: &types.ObjectLockRule{DefaultRetention: d}}})
		wantAPIError(t, err, "InvalidArgument")
	}
	_, err = cl.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String(b),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled, Rule: &types.ObjectLockRule{
			DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1), Years: aws.Int32(1)}}}})
	wantAPIError(t, err, "MalformedXML")
	put := func(mod func(*s3.PutObjectInput)) error {
		in := &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("bad"), Body: strings.NewReader("x")}
		mod(in)
		_, err := cl.PutObject(ctx, in)
		return err
	}
	for name, mod := range map[string]func(*s3.PutObjectInput){
		"date in the past": func(in *s3.PutObjectInput) {
			in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockModeGovernance, aws.Time(time.Now().Add(-time.Minute))
		},
		"mode without date": func(in *s3.PutObjectInput) { in.ObjectLockMode = types.ObjectLockModeGovernance },
		"date without mode": func(in *s3.PutObjectInput) { in.ObjectLockRetainUntilDate = aws.Time(time.Now().Add(time.Hour)) },
		"unknown mode": func(in *s3.PutObjectInput) {
			in.ObjectLockMode, in.ObjectLockRetainUntilDate = "FOREVER", aws.Time(time.Now().Add(time.Hour))
		},
		"unknown legal hold": func(in *s3.PutObjectInput) { in.ObjectLockLegalHoldStatus = "MAYBE" },
	} {
		t.Run(name, func(t *testing.T) {
			wantAPIError(t, put(mod), "InvalidArgument")
			objectAbsent(t, cl, b, "bad")
		})
	}
	// A version without retention or legal hold.
	v := aws.ToString(putLocked(t, cl, b, "bare", []byte("b"), nil).VersionId)
	_, err = cl.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("bare"), VersionId: aws.String(v)})
	wantAPIError(t, err, "NoSuchObjectLockConfiguration")
	_, err = cl.GetObjectLegalHold(ctx, &s3.GetObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("bare")})
	wantAPIError(t, err, "NoSuchObjectLockConfiguration")
	// Lock headers without Content-MD5, a checksum or a signed payload hash
	// (a raw request), and PutObjectLegalHold without Content-MD5 or a
	// checksum.
	status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + b + "/nodigest", Body: []byte("x"), Payload: "UNSIGNED-PAYLOAD",
		Header: http.Header{"X-Amz-Object-Lock-Legal-Hold": {"ON"}}})
	if status != http.StatusBadRequest || apiCodeOf(body) != "InvalidRequest" {
		t.Fatalf("lock headers without a digest: HTTP %d %s", status, body)
	}
	objectAbsent(t, cl, b, "nodigest")
	status, _, body = doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + b + "/bare", Query: url.Values{"legal-hold": {""}},
		Body: []byte(`<LegalHold xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>ON</Status></LegalHold>`)})
	if status != http.StatusBadRequest || apiCodeOf(body) != "InvalidRequest" {
		t.Fatalf("PutObjectLegalHold without a digest: HTTP %d %s", status, body)
	}
	if _, err := cl.GetObjectLegalHold(ctx, &s3.GetObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("bare")}); apiCode(err) != "NoSuchObjectLockConfiguration" {
		t.Fatalf("a refused PutObjectLegalHold set a hold: %v", err)
	}
}

// apiCodeOf is the Code of an S3 error body.
func apiCodeOf(body []byte) string {
	_, rest, ok := strings.Cut(string(body), "<Code>")
	code, _, _ := strings.Cut(rest, "</Code>")
	if !ok {
		return ""
	}
	return code
}

// olRestic: a restic backup into a bucket with a COMPLIANCE default
// retention survives `forget --prune` by the same key, and so does every
// pack it deleted: prune's deletes only add delete markers, and deleting
// the packs' versions by id, as an attacker holding the key would, is
// refused for every one of them.
func olRestic(t *testing.T, gw *testgw.Gateway, cl *s3.Client) {
	needBinary(t, "restic", "restic")
	ctx := testCtx(t, 3*time.Minute)
	b := lockBucket(t, cl, "olrestic")
	if _, err := cl.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String(b),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeCompliance, Days: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	rs := newTool(t, "restic", "RESTIC_REPOSITORY=s3:"+gw.Endpoint+"/"+b+"/repo", "RESTIC_PASSWORD=s3gate-conformance",
		"AWS_ACCESS_KEY_ID="+gw.AccessKey, "AWS_SECRET_ACCESS_KEY="+gw.SecretKey)
	base := []string{"--quiet", "-o", "s3.bucket-lookup=path"}
	if gw.CAFile != "" {
		base = append(base, "--cacert", gw.CAFile)
	}
	run := func(args ...string) string { return rs.run(t, append(append([]string{}, base...), args...)...) }
	tree := t.TempDir()
	for i := range 4 {
		writeFile(t, fmt.Sprintf("%s/f%d", tree, i), strings.Repeat(fmt.Sprintf("file %d ", i), 40000+i))
	}
	run("init")
	run("backup", "--host", "s3gate-test", tree)
	for i := range 4 { // a second snapshot whose data replaces all of the first
		writeFile(t, fmt.Sprintf("%s/f%d", tree, i), strings.Repeat(fmt.Sprintf("changed %d ", i), 30000+i))
	}
	run("backup", "--host", "s3gate-test", tree)
	packs := map[string]string{} // key -> version id of every pack written
	for _, v := range allVersions(t, cl, b, "repo/data/") {
		packs[aws.ToString(v.Key)] = aws.ToString(v.VersionId)
	}
	run("forget", "--keep-last", "1", "--prune", "--max-unused", "0")
	current := keySet(listObjects(t, cl, b, "repo/data/"))
	pruned := 0
	for k, vid := range packs {
		if current[k] {
			continue
		}
		pruned++
		out, err := cl.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String(k), VersionId: aws.String(vid)})
		if err != nil || out.ObjectLockMode != types.ObjectLockModeCompliance {
			t.Fatalf("pruned pack %s: version %s: mode %q, %v", k, vid, out.ObjectLockMode, err)
		}
		wantAPIError(t, deleteVersion(ctx, cl, b, k, vid, true), "AccessDenied")
	}
	if pruned == 0 {
		t.Fatalf("restic's prune deleted none of the %d packs: the test proves nothing", len(packs))
	}
	t.Logf("restic prune deleted %d of %d packs; every one of them is still stored and locked", pruned, len(packs))
}

// allVersions lists every version under prefix.
func allVersions(t *testing.T, cl *s3.Client, b, prefix string) []types.ObjectVersion {
	t.Helper()
	var out []types.ObjectVersion
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(b), Prefix: aws.String(prefix)}
	for {
		page, err := cl.ListObjectVersions(testCtx(t, time.Minute), in)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Versions...)
		if !aws.ToBool(page.IsTruncated) {
			return out
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}
