package s3api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/s3gate/s3gate/store"
)

type listAllMyBucketsResult struct {
	XMLName xml.Name     `xml:"ListAllMyBucketsResult"`
	NS      string       `xml:"xmlns,attr"`
	Owner   *owner       `xml:"Owner"`
	Buckets []bucketElem `xml:"Buckets>Bucket"`
	// ContinuationToken is the token of the next page (only when truncated).
	ContinuationToken string  `xml:"ContinuationToken,omitempty"`
	Prefix            *string `xml:"Prefix"`
}

// maxBuckets is AWS's bound of max-buckets.
const maxBuckets = 10000

type bucketElem struct {
	Name         string `xml:"Name"`
	CreationDate string `xml:"CreationDate"`
	BucketRegion string `xml:"BucketRegion,omitempty"`
}

func (a *api) listBuckets(rq *request) error {
	bs, err := a.st.ListBuckets(rq.ctx)
	if err != nil {
		return fmt.Errorf("list buckets: %w", err)
	}
	if bs, err = a.visibleBuckets(rq, bs); err != nil {
		return err
	}
	limit := maxBuckets
	if rq.q.Has("max-buckets") {
		n, err := strconv.Atoi(rq.q.Get("max-buckets"))
		if err != nil || n < 1 || n > maxBuckets {
			return errInvalidArgument.withMessage("max-buckets must be an integer between 1 and 10000")
		}
		limit = n
	}
	// The token is the last name of the previous page; an empty token lists
	// from the start.
	after := ""
	if t := rq.q.Get("continuation-token"); t != "" {
		raw, err := base64.StdEncoding.DecodeString(t)
		if err != nil || len(raw) == 0 {
			return errInvalidToken
		}
		after = string(raw)
	}
	prefix, region := rq.q.Get("prefix"), rq.q.Get("bucket-region")
	// S3 names each bucket's region only "if the request contains at least
	// one valid parameter" (the API reference's Bucket.BucketRegion).
	withRegion := false
	for _, p := range []string{"max-buckets", "continuation-token", "prefix", "bucket-region"} {
		withRegion = withRegion || rq.q.Has(p)
	}
	res := listAllMyBucketsResult{NS: s3NS, Owner: ownerOf(rq), Buckets: []bucketElem{}}
	if rq.q.Has("prefix") {
		res.Prefix = &prefix
	}
	for _, b := range bs { // sorted by name
		if b.Name <= after || !strings.HasPrefix(b.Name, prefix) || (region != "" && a.regionOf(b) != region) {
			continue
		}
		if len(res.Buckets) == limit {
			res.ContinuationToken = base64.StdEncoding.EncodeToString([]byte(res.Buckets[limit-1].Name))
			break
		}
		e := bucketElem{Name: b.Name, CreationDate: xmlTime(orNow(b.CreatedAt))}
		if withRegion {
			e.BucketRegion = a.regionOf(b)
		}
		res.Buckets = append(res.Buckets, e)
	}
	return writeXML(rq, res)
}

func (a *api) regionOf(b store.Bucket) string {
	if b.Region != "" {
		return b.Region
	}
	return a.cfg.Region
}

type createBucketConfiguration struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string   `xml:"LocationConstraint"`
}

// parseCreateBucketConfiguration returns the LocationConstraint of a
// CreateBucket body ("" for an empty body).
func parseCreateBucketConfiguration(body []byte) (string, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil
	}
	var cfg createBucketConfiguration
	if err := decodeXML(body, &cfg); err != nil {
		return "", err
	}
	return strings.TrimSpace(cfg.LocationConstraint), nil
}

func (a *api) createBucket(rq *request) error {
	acl, err := requestACL(rq, nil, ownerOf(rq).ID, "", false)
	if err != nil {
		return err
	}
	ownership, err := a.createOwnership(rq, acl)
	if err != nil {
		return err
	}
	if acl != nil {
		// A new bucket has the gateway's default settings (with the
		// ownership the request gives: checked above).
		if err := a.checkACL(map[string]string{store.BucketConfigOwnership: objectWriter}, acl, ""); err != nil {
			return err
		}
	}
	lock, err := parseObjectLockEnabled(rq.r.Header)
	if err != nil {
		return err
	}
	if _, err := a.policyConfigs(); lock && err != nil {
		return err // refused before the bucket exists
	}
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	lc, err := parseCreateBucketConfiguration(body)
	if err != nil {
		return err
	}
	if err := a.checkLocation(lc); err != nil {
		return err
	}
	err = a.st.CreateBucket(rq.ctx, rq.bucket, a.cfg.Region)
	created := err == nil
	if errors.Is(err, store.ErrBucketExists) && a.cfg.Region == defaultRegion && !lock {
		err = nil // AWS's legacy us-east-1 answer for a bucket the caller owns (not one it asks Object Lock of)
	}
	if err != nil {
		return fmt.Errorf("create bucket %q: %w", rq.bucket, err)
	}
	if created {
		if err := a.createConfigs(rq, acl, ownership); err != nil {
			return err
		}
		if lock {
			if err := a.createLockBucket(rq); err != nil {
				return err
			}
		}
	}
	rq.w.Header().Set("Location", "/"+rq.bucket)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// createConfigs stores a new bucket's ACL and ownership where they are not
// the defaults (createOwnership and checkACL let them through only on a
// gateway that keeps bucket configurations).
func (a *api) createConfigs(rq *request, acl *store.ACL, ownership string) error {
	if ownership != "" && ownership != ownerEnforced {
		if err := a.access.configs.PutBucketConfig(rq.ctx, rq.bucket, store.BucketConfigOwnership, ownership); err != nil {
			return fmt.Errorf("create bucket %q: ownership: %w", rq.bucket, err)
		}
	}
	if acl == nil || ownerOnlyACL(acl) {
		return nil
	}
	doc, err := json.Marshal(acl)
	if err != nil {
		return fmt.Errorf("create bucket %q: acl: %w", rq.bucket, err)
	}
	if err := a.access.configs.PutBucketConfig(rq.ctx, rq.bucket, store.BucketConfigACL, string(doc)); err != nil {
		return fmt.Errorf("create bucket %q: acl: %w", rq.bucket, err)
	}
	return nil
}

// checkLocation applies the LocationConstraint rules (see package doc).
func (a *api) checkLocation(lc string) error {
	switch {
	case lc == "":
		return nil
	case lc == defaultRegion: // before the match: refused even in us-east-1
		return errInvalidLocation
	case lc == a.cfg.Region:
		return nil
	case lc == "EU" && a.cfg.Region == "eu-west-1":
		return nil
	default:
		return errIllegalLocation.withMessage("The " + lc + " location constraint is incompatible for the region specific endpoint this request was sent to.")
	}
}

func (a *api) headBucket(rq *request) error {
	b, err := a.st.HeadBucket(rq.ctx, rq.bucket)
	if err != nil {
		return fmt.Errorf("head bucket %q: %w", rq.bucket, err)
	}
	rq.w.Header().Set("X-Amz-Bucket-Region", a.regionOf(b))
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (a *api) deleteBucket(rq *request) error {
	if err := a.st.DeleteBucket(rq.ctx, rq.bucket); err != nil {
		return fmt.Errorf("delete bucket %q: %w", rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

type locationConstraint struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	NS      string   `xml:"xmlns,attr"`
	Region  string   `xml:",chardata"`
}

func (a *api) getBucketLocation(rq *request) error {
	b, err := a.st.HeadBucket(rq.ctx, rq.bucket)
	if err != nil {
		return fmt.Errorf("bucket location %q: %w", rq.bucket, err)
	}
	region := a.regionOf(b)
	if region == defaultRegion {
		region = "" // AWS answers us-east-1 with an empty constraint
	}
	return writeXML(rq, locationConstraint{NS: s3NS, Region: region})
}

// notFoundConfig answers a configuration that is never set: the bucket must
// exist, then the AWS "no such configuration" error.
func notFoundConfig(e *apiError) handlerFunc {
	return func(a *api, rq *request) error {
		if _, err := a.st.HeadBucket(rq.ctx, rq.bucket); err != nil {
			return fmt.Errorf("%s %q: %w", rq.op, rq.bucket, err)
		}
		return e
	}
}

type accessControlPolicy struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	NS      string   `xml:"xmlns,attr"`
	Owner   *owner   `xml:"Owner"`
	Grants  []grant  `xml:"AccessControlList>Grant"`
}

type grant struct {
	Grantee    grantee `xml:"Grantee"`
	Permission string  `xml:"Permission"`
}

type grantee struct {
	XMLNSXSI    string `xml:"xmlns:xsi,attr"`
	Type        string `xml:"xsi:type,attr"`
	ID          string `xml:"ID,omitempty"`
	DisplayName string `xml:"DisplayName,omitempty"`
	URI         string `xml:"URI,omitempty"`
}

// bucketACL reads the bucket's ACL from its configuration documents (nil:
// private to its owner) and the owner it names (the caller without one).
func bucketACL(rq *request, cfgs map[string]string) (*store.ACL, string, error) {
	acl, err := parseStoredACL(cfgs[store.BucketConfigACL])
	if err != nil {
		return nil, "", fmt.Errorf("bucket acl %q: %w", rq.bucket, err)
	}
	if acl == nil {
		return nil, ownerOf(rq).ID, nil
	}
	return acl, acl.Owner, nil
}

func (a *api) getBucketACL(rq *request) error {
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	acl, owner, err := bucketACL(rq, cfgs)
	if err != nil {
		return err
	}
	return writeXML(rq, aclXML(acl, owner))
}

func (a *api) putBucketACL(rq *request) error {
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	_, owner, err := bucketACL(rq, cfgs)
	if err != nil {
		return err
	}
	acl, err := a.aclToPut(rq, cfgs, body, owner, "", false)
	if err != nil {
		return err
	}
	if a.access == nil || a.access.configs == nil {
		return nil // only owner-only ACLs pass checkACL here: nothing to keep
	}
	doc, err := json.Marshal(acl)
	if err != nil {
		return fmt.Errorf("put bucket acl %q: %w", rq.bucket, err)
	}
	return a.putConfig(rq, store.BucketConfigACL, string(doc), http.StatusOK)
}

// headObject resolves the metadata of an object's version (the latest for
// vid "") without opening its content.
func (a *api) headObject(rq *request, vid string) (store.ObjectInfo, error) {
	info, _, rd, err := a.st.GetObject(rq.ctx, rq.bucket, rq.key, store.GetOptions{VersionID: vid}, true)
	if rd != nil {
		_ = rd.Close() // head=true opens nothing; close defensively
	}
	if err != nil {
		return info, a.versionError(rq, info, fmt.Errorf("head object %q/%q: %w", rq.bucket, rq.key, err))
	}
	return info, nil
}

// headVersion resolves the version rq's versionId names (the latest
// without one).
func (a *api) headVersion(rq *request) (store.ObjectInfo, error) {
	vid, err := versionParam(rq)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	return a.headObject(rq, vid)
}

func (a *api) getObjectACL(rq *request) error {
	info, err := a.headVersion(rq)
	if err != nil {
		return err
	}
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	acl := info.Meta.ACL
	if o, _ := ownershipOf(a.access, cfgs); o == ownerEnforced {
		// ACLs are off: the bucket owner has full control, whatever the
		// object kept from before.
		_, bucketOwner, err := bucketACL(rq, cfgs)
		if err != nil {
			return err
		}
		acl = &store.ACL{Owner: bucketOwner, Grants: []store.ACLGrant{{ID: bucketOwner, Permission: "FULL_CONTROL"}}}
	}
	return writeXML(rq, aclXML(acl, ownerOf(rq).ID))
}

// putObjectACL replaces the object's ACL in its metadata (rewriteMeta).
func (a *api) putObjectACL(rq *request) error {
	if _, err := versionParam(rq); err != nil {
		return err
	}
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	info, err := a.headVersion(rq)
	if err != nil {
		return err
	}
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	_, bucketOwner, err := bucketACL(rq, cfgs)
	if err != nil {
		return err
	}
	owner := ownerOf(rq).ID
	if info.Meta.ACL != nil {
		owner = info.Meta.ACL.Owner
	}
	acl, err := a.aclToPut(rq, cfgs, body, owner, bucketOwner, true)
	if err != nil {
		return err
	}
	meta := info.Meta
	meta.ACL = acl
	if err := a.rewriteMeta(rq, info, meta); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// rewriteMeta gives the version info read its new metadata (ACL, tags)
// in place: no new version, the same content, version id and last-modified
// time, as S3. It is conditional on the ETag read, so that an overwrite in
// between is not given the old object's metadata (it answers
// PreconditionFailed instead).
func (a *api) rewriteMeta(rq *request, info store.ObjectInfo, meta store.ObjectMeta) error {
	if _, err := a.st.ReplaceObjectMeta(rq.ctx, rq.bucket, rq.key, info.VersionID, info.ETag, meta); err != nil {
		return fmt.Errorf("%s %q/%q: %w", rq.op, rq.bucket, rq.key, err)
	}
	return nil
}
