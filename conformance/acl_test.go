package conformance

import (
	"fmt"
	"io"
	"net/http"
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

const allUsers = "http://acs.amazonaws.com/groups/global/AllUsers"

// TestACLs: canned ACLs, grant headers and AccessControlPolicy bodies
// round-trip; an object's public-read ACL lets curl read it anonymously;
// IgnorePublicAcls and BlockPublicAcls; ownership controls switch ACLs off
// and on with S3's errors.
func TestACLs(t *testing.T) {
	needBinary(t, "curl", "curl")
	forEachEngine(t, func(t *testing.T, c combo, gw *testgw.Gateway) {
		root := sdkClient(t, gw)
		t.Run("Objects", func(t *testing.T) { testObjectACLs(t, gw, root) })
		t.Run("Ownership", func(t *testing.T) { testOwnershipControls(t, gw, root) })
		t.Run("PutObjectAclRace", func(t *testing.T) { testObjectACLRace(t, root) })
		t.Run("VersionACLs", func(t *testing.T) { testVersionACLs(t, gw, root) })
		if c.Engine == testgw.Embedded { // the cli's requests do not depend on the engine
			t.Run("AWSCLI", func(t *testing.T) { testACLCLI(t, gw, root) })
		}
	})
}

// aclBucket creates a bucket with ACLs on (ObjectWriter) and without Block
// Public Access: a new bucket has neither, as on AWS.
func aclBucket(t *testing.T, cl *s3.Client, prefix string) string {
	t.Helper()
	b := mustBucket(t, cl, prefix)
	ctx := testCtx(t, time.Minute)
	setOwnership(t, cl, b, types.ObjectOwnershipObjectWriter)
	if _, err := cl.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("DeletePublicAccessBlock: %v", err)
	}
	return b
}

func setOwnership(t *testing.T, cl *s3.Client, b string, o types.ObjectOwnership) {
	t.Helper()
	if err := putOwnership(t, cl, b, o); err != nil {
		t.Fatalf("PutBucketOwnershipControls %s: %v", o, err)
	}
}

func putOwnership(t *testing.T, cl *s3.Client, b string, o types.ObjectOwnership) error {
	_, err := cl.PutBucketOwnershipControls(testCtx(t, time.Minute), &s3.PutBucketOwnershipControlsInput{Bucket: aws.String(b),
		OwnershipControls: &types.OwnershipControls{Rules: []types.OwnershipControlsRule{{ObjectOwnership: o}}}})
	return err
}

// grantsOf is an ACL's grants as "PERMISSION id-or-uri", sorted.
func grantsOf(gs []types.Grant) []string {
	var out []string
	for _, g := range gs {
		who := aws.ToString(g.Grantee.ID) + aws.ToString(g.Grantee.URI)
		out = append(out, string(g.Permission)+" "+who)
	}
	slices.Sort(out)
	return out
}

func wantObjectGrants(t *testing.T, cl *s3.Client, b, k string, want ...string) {
	t.Helper()
	got, err := cl.GetObjectAcl(testCtx(t, time.Minute), &s3.GetObjectAclInput{Bucket: aws.String(b), Key: aws.String(k)})
	if err != nil {
		t.Fatalf("GetObjectAcl %s: %v", k, err)
	}
	slices.Sort(want)
	if g := grantsOf(got.Grants); !slices.Equal(g, want) {
		t.Fatalf("GetObjectAcl %s grants %q, want %q", k, g, want)
	}
}

func testObjectACLs(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := aclBucket(t, root, "acl")
	owner := "FULL_CONTROL " + gw.AccessKey
	put := func(k string, acl types.ObjectCannedACL) {
		t.Helper()
		if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(k), Body: strings.NewReader("body of " + k), ACL: acl}); err != nil {
			t.Fatalf("PutObject %s %s: %v", k, acl, err)
		}
	}
	put("pub", types.ObjectCannedACLPublicRead)
	put("priv", "")
	put("auth", types.ObjectCannedACLAuthenticatedRead)
	wantObjectGrants(t, root, b, "pub", owner, "READ "+allUsers)
	wantObjectGrants(t, root, b, "priv", owner)
	wantObjectGrants(t, root, b, "auth", owner, "READ http://acs.amazonaws.com/groups/global/AuthenticatedUsers")
	wantAnon(t, gw, b+"/pub", http.StatusOK, "")
	wantAnon(t, gw, b+"/priv", http.StatusForbidden, "AccessDenied")
	wantAnon(t, gw, b+"/auth", http.StatusForbidden, "AccessDenied") // AuthenticatedUsers: a valid key

	// Grant headers, then a body; both replace the whole ACL.
	if _, err := root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("priv"),
		GrantRead: aws.String(`uri="` + allUsers + `"`), GrantFullControl: aws.String(`id="` + gw.AccessKey + `"`)}); err != nil {
		t.Fatalf("PutObjectAcl grant headers: %v", err)
	}
	wantObjectGrants(t, root, b, "priv", owner, "READ "+allUsers)
	wantAnon(t, gw, b+"/priv", http.StatusOK, "")
	body := &types.AccessControlPolicy{Owner: &types.Owner{ID: aws.String(gw.AccessKey)}, Grants: []types.Grant{
		{Grantee: &types.Grantee{Type: types.TypeCanonicalUser, ID: aws.String(gw.AccessKey)}, Permission: types.PermissionFullControl},
		{Grantee: &types.Grantee{Type: types.TypeCanonicalUser, ID: aws.String("AKOTHER")}, Permission: types.PermissionReadAcp},
	}}
	if _, err := root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("priv"), AccessControlPolicy: body}); err != nil {
		t.Fatalf("PutObjectAcl body: %v", err)
	}
	wantObjectGrants(t, root, b, "priv", owner, "READ_ACP AKOTHER")
	wantAnon(t, gw, b+"/priv", http.StatusForbidden, "AccessDenied")
	if got, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("priv")}); err != nil {
		t.Fatalf("GetObject after PutObjectAcl: %v", err)
	} else {
		_ = got.Body.Close()
	}

	// S3's refusals; none changes the ACL.
	_, err := root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("priv"), ACL: types.ObjectCannedACLPublicRead, GrantRead: aws.String(`uri="` + allUsers + `"`)})
	wantAPIError(t, err, "InvalidRequest")
	_, err = root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("priv"), GrantRead: aws.String(`emailAddress="a@example.com"`)})
	wantAPIError(t, err, "InvalidArgument")
	status, _, raw := doRaw(t, gw, rawReq{Method: "PUT", Path: "/" + b + "/priv?acl", Body: []byte("<AccessControlPolicy><Owner>")})
	wantRawError(t, "PutObjectAcl malformed body", status, raw, http.StatusBadRequest, "MalformedACLError")
	_, err = root.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: aws.String(b), Key: aws.String("priv"), VersionId: aws.String("v1")})
	wantAPIError(t, err, "InvalidArgument")
	wantObjectGrants(t, root, b, "priv", owner, "READ_ACP AKOTHER")

	// The ACL of a copy and of a multipart upload is their request's.
	if _, err := root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("copy"), CopySource: aws.String(b + "/pub")}); err != nil {
		t.Fatalf("CopyObject: %v", err)
	}
	wantObjectGrants(t, root, b, "copy", owner)
	if _, err := root.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("copy"), CopySource: aws.String(b + "/priv"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatalf("CopyObject public-read: %v", err)
	}
	wantAnon(t, gw, b+"/copy", http.StatusOK, "")
	up, err := root.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mpu"), ACL: types.ObjectCannedACLPublicRead})
	if err != nil {
		t.Fatalf("CreateMultipartUpload: %v", err)
	}
	part, err := root.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(b), Key: aws.String("mpu"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
	if err != nil {
		t.Fatalf("UploadPart: %v", err)
	}
	if _, err := root.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mpu"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag}}}}); err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	wantAnon(t, gw, b+"/mpu", http.StatusOK, "")

	// A bucket ACL: public-read lets anyone list; GetBucketAcl round-trips it.
	wantAnon(t, gw, b+"/", http.StatusForbidden, "AccessDenied")
	if _, err := root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String(b), ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatalf("PutBucketAcl public-read: %v", err)
	}
	bacl, err := root.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: aws.String(b)})
	if err != nil || aws.ToString(bacl.Owner.ID) != gw.AccessKey || !slices.Equal(grantsOf(bacl.Grants), []string{owner, "READ " + allUsers}) {
		t.Fatalf("GetBucketAcl: %+v %v", bacl, err)
	}
	wantAnon(t, gw, b+"/", http.StatusOK, "")

	// IgnorePublicAcls: the public grants count for nothing, and stay.
	pab := func(cfg types.PublicAccessBlockConfiguration) {
		t.Helper()
		if _, err := root.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String(b), PublicAccessBlockConfiguration: &cfg}); err != nil {
			t.Fatalf("PutPublicAccessBlock: %v", err)
		}
	}
	pab(types.PublicAccessBlockConfiguration{IgnorePublicAcls: aws.Bool(true)})
	wantAnon(t, gw, b+"/pub", http.StatusForbidden, "AccessDenied")
	wantAnon(t, gw, b+"/", http.StatusForbidden, "AccessDenied")
	wantObjectGrants(t, root, b, "pub", owner, "READ "+allUsers)
	put("pub2", types.ObjectCannedACLPublicRead) // IgnorePublicAcls alone does not refuse them

	// BlockPublicAcls: public ACLs are refused, in headers and bodies.
	pab(types.PublicAccessBlockConfiguration{BlockPublicAcls: aws.Bool(true)})
	wantAnon(t, gw, b+"/pub", http.StatusOK, "") // existing ACLs still count
	_, err = root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("priv"), ACL: types.ObjectCannedACLPublicRead})
	wantAPIError(t, err, "AccessDenied")
	public := &types.AccessControlPolicy{Owner: &types.Owner{ID: aws.String(gw.AccessKey)}, Grants: []types.Grant{
		{Grantee: &types.Grantee{Type: types.TypeGroup, URI: aws.String(allUsers)}, Permission: types.PermissionRead}}}
	_, err = root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String(b), AccessControlPolicy: public})
	wantAPIError(t, err, "AccessDenied")
	wantObjectGrants(t, root, b, "priv", owner, "READ_ACP AKOTHER")
}

func testOwnershipControls(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := mustBucket(t, root, "own")
	if _, err := root.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("DeletePublicAccessBlock: %v", err)
	}
	wantOwnership := func(want types.ObjectOwnership) {
		t.Helper()
		got, err := root.GetBucketOwnershipControls(ctx, &s3.GetBucketOwnershipControlsInput{Bucket: aws.String(b)})
		if err != nil || len(got.OwnershipControls.Rules) != 1 || got.OwnershipControls.Rules[0].ObjectOwnership != want {
			t.Fatalf("GetBucketOwnershipControls: %+v %v, want %s", got, err, want)
		}
	}
	// New buckets: ACLs off. Only the owner's full control may be set.
	wantOwnership(types.ObjectOwnershipBucketOwnerEnforced)
	_, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"), Body: strings.NewReader("x"), ACL: types.ObjectCannedACLPublicRead})
	wantAPIError(t, err, "AccessControlListNotSupported")
	objectAbsent(t, root, b, "k")
	if _, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"), Body: strings.NewReader("x"), ACL: types.ObjectCannedACLBucketOwnerFullControl}); err != nil {
		t.Fatalf("PutObject bucket-owner-full-control under BucketOwnerEnforced: %v", err)
	}
	_, err = root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String(b), ACL: types.BucketCannedACLPublicRead})
	wantAPIError(t, err, "AccessControlListNotSupported")
	_, err = root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("k"), GrantRead: aws.String(`uri="` + allUsers + `"`)})
	wantAPIError(t, err, "AccessControlListNotSupported")
	_, err = root.PutBucketOwnershipControls(ctx, &s3.PutBucketOwnershipControlsInput{Bucket: aws.String(b),
		OwnershipControls: &types.OwnershipControls{Rules: []types.OwnershipControlsRule{{ObjectOwnership: "Nobody"}}}})
	wantAPIError(t, err, "MalformedXML")

	// ACLs on: a public object; BucketOwnerEnforced again turns them off
	// (the ACL stays, and counts for nothing).
	setOwnership(t, root, b, types.ObjectOwnershipBucketOwnerPreferred)
	wantOwnership(types.ObjectOwnershipBucketOwnerPreferred)
	if _, err := root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("k"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatalf("PutObjectAcl public-read under BucketOwnerPreferred: %v", err)
	}
	wantAnon(t, gw, b+"/k", http.StatusOK, "")
	setOwnership(t, root, b, types.ObjectOwnershipBucketOwnerEnforced)
	wantAnon(t, gw, b+"/k", http.StatusForbidden, "AccessDenied")
	wantObjectGrants(t, root, b, "k", "FULL_CONTROL "+gw.AccessKey)

	// A public bucket ACL keeps BucketOwnerEnforced out.
	setOwnership(t, root, b, types.ObjectOwnershipObjectWriter)
	if _, err := root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: aws.String(b), ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatalf("PutBucketAcl public-read under ObjectWriter: %v", err)
	}
	wantAPIError(t, putOwnership(t, root, b, types.ObjectOwnershipBucketOwnerEnforced), "InvalidBucketAclWithObjectOwnership")
	wantOwnership(types.ObjectOwnershipObjectWriter)

	// Deleted: no controls, ACLs on (ObjectWriter's behaviour).
	if _, err := root.DeleteBucketOwnershipControls(ctx, &s3.DeleteBucketOwnershipControlsInput{Bucket: aws.String(b)}); err != nil {
		t.Fatalf("DeleteBucketOwnershipControls: %v", err)
	}
	_, err = root.GetBucketOwnershipControls(ctx, &s3.GetBucketOwnershipControlsInput{Bucket: aws.String(b)})
	wantAPIError(t, err, "OwnershipControlsNotFoundError")
	wantAnon(t, gw, b+"/k", http.StatusOK, "")

	// CreateBucket: a public ACL needs ownership that allows ACLs.
	_, err = root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucketName("ownpub")), ACL: types.BucketCannedACLPublicRead})
	wantAPIError(t, err, "InvalidBucketAclWithObjectOwnership")
	ow := bucketName("ownow")
	if _, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(ow), ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatalf("CreateBucket ObjectWriter: %v", err)
	}
	t.Cleanup(func() { emptyAndDelete(t, root, ow) })
	got, err := root.GetBucketOwnershipControls(ctx, &s3.GetBucketOwnershipControlsInput{Bucket: aws.String(ow)})
	if err != nil || got.OwnershipControls.Rules[0].ObjectOwnership != types.ObjectOwnershipObjectWriter {
		t.Fatalf("GetBucketOwnershipControls of a bucket created ObjectWriter: %+v %v", got, err)
	}
}

// testACLCLI: the aws cli's --acl and --grant-read set ACLs that curl reads
// through anonymously.
func testACLCLI(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	if _, err := exec.LookPath("aws"); err != nil {
		testreq.Missing(t, "aws cli not on PATH: skipping the aws cli ACL test (install the Debian package \"awscli\")")
	}
	cli := newAWSCLI(t, gw)
	b := aclBucket(t, root, "cliacl")
	cli.run(t, "s3api", "put-object", "--bucket", b, "--key", "canned", "--acl", "public-read")
	cli.run(t, "s3api", "put-object", "--bucket", b, "--key", "granted", "--grant-read", "uri="+allUsers)
	if out := cli.run(t, "s3api", "get-object-acl", "--bucket", b, "--key", "granted"); !strings.Contains(out, allUsers) || !strings.Contains(out, `"READ"`) {
		t.Fatalf("get-object-acl: %s", out)
	}
	wantObjectGrants(t, root, b, "canned", "FULL_CONTROL "+gw.AccessKey, "READ "+allUsers)
	for _, k := range []string{"canned", "granted"} {
		wantAnon(t, gw, b+"/"+k, http.StatusOK, "")
	}
	if _, err := root.PutObjectAcl(testCtx(t, time.Minute), &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("granted"), ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatalf("PutObjectAcl private: %v", err)
	}
	wantAnon(t, gw, b+"/granted", http.StatusForbidden, "AccessDenied")
}

// testObjectACLRace races PutObjectAcl with overwrites of the object: the
// ACL's metadata rewrite is conditional on the ETag it read, so it never
// gives a newer object the older one's metadata (here its Content-Type,
// which names its body). Each round either sets the ACL or fails as a
// precondition; every GET then finds a body and a type that match.
func testObjectACLRace(t *testing.T, root *s3.Client) {
	ctx := testCtx(t, 2*time.Minute)
	b := aclBucket(t, root, "aclrace")
	put := func(v string) error {
		_, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"), Body: strings.NewReader(v), ContentType: aws.String("text/" + v)})
		return err
	}
	if err := put("v0"); err != nil {
		t.Fatal(err)
	}
	const rounds = 40
	for i := 1; i <= rounds; i++ {
		v := fmt.Sprintf("v%d", i)
		var putErr, aclErr error
		var wg sync.WaitGroup
		wg.Go(func() { putErr = put(v) })
		wg.Go(func() {
			_, aclErr = root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("k"), ACL: types.ObjectCannedACLPublicRead})
		})
		wg.Wait()
		if putErr != nil {
			t.Fatalf("round %d: PutObject: %v", i, putErr)
		}
		if aclErr != nil && apiCode(aclErr) != "PreconditionFailed" {
			t.Fatalf("round %d: PutObjectAcl: %v", i, aclErr)
		}
		got, err := root.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String("k")})
		if err != nil {
			t.Fatalf("round %d: GetObject: %v", i, err)
		}
		body, err := io.ReadAll(got.Body)
		_ = got.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ct := aws.ToString(got.ContentType); ct != "text/"+string(body) {
			t.Fatalf("round %d: body %q with Content-Type %q: an ACL write gave the new object the old one's metadata", i, body, ct)
		}
	}
}

// testVersionACLs: on a versioned bucket each version has its own ACL, and a
// request that names a version is judged by that version's: an old
// public-read version stays readable anonymously by its id under a private
// latest one, and the reverse.
func testVersionACLs(t *testing.T, gw *testgw.Gateway, root *s3.Client) {
	ctx := testCtx(t, time.Minute)
	b := aclBucket(t, root, "aclv")
	if _, err := root.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(b),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("PutBucketVersioning: %v", err)
	}
	put := func(body string, acl types.ObjectCannedACL) string {
		t.Helper()
		out, err := root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String("k"), Body: strings.NewReader(body), ACL: acl})
		if err != nil {
			t.Fatalf("PutObject %s: %v", acl, err)
		}
		return aws.ToString(out.VersionId)
	}
	pub := put("public one", types.ObjectCannedACLPublicRead)
	priv := put("private two", types.ObjectCannedACLPrivate)
	wantAnon(t, gw, b+"/k", http.StatusForbidden, "AccessDenied")
	wantAnon(t, gw, b+"/k?versionId="+pub, http.StatusOK, "")
	wantAnon(t, gw, b+"/k?versionId="+priv, http.StatusForbidden, "AccessDenied")
	if _, err := root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("k"), VersionId: aws.String(pub), ACL: types.ObjectCannedACLPrivate}); err != nil {
		t.Fatalf("PutObjectAcl by version: %v", err)
	}
	if _, err := root.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: aws.String(b), Key: aws.String("k"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatalf("PutObjectAcl of the latest: %v", err)
	}
	wantAnon(t, gw, b+"/k", http.StatusOK, "")
	wantAnon(t, gw, b+"/k?versionId="+priv, http.StatusOK, "")
	wantAnon(t, gw, b+"/k?versionId="+pub, http.StatusForbidden, "AccessDenied")
}
