package s3api

import (
	"bytes"
	"encoding/base64"
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
		res.Buckets = append(res.Buckets, bucketElem{Name: b.Name, CreationDate: xmlTime(orNow(b.CreatedAt)), BucketRegion: a.regionOf(b)})
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
	if err := checkCannedACL(rq.r.Header); err != nil {
		return err
	}
	if err := checkObjectLockEnabled(rq.r.Header); err != nil {
		return err
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
	if errors.Is(err, store.ErrBucketExists) && a.cfg.Region == defaultRegion {
		err = nil // AWS's legacy us-east-1 answer for a bucket the caller owns
	}
	if err != nil {
		return fmt.Errorf("create bucket %q: %w", rq.bucket, err)
	}
	rq.w.Header().Set("Location", "/"+rq.bucket)
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// checkLocation applies the LocationConstraint rules (see package doc).
func (a *api) checkLocation(lc string) error {
	switch {
	case lc == "" || lc == a.cfg.Region:
		return nil
	case lc == "EU" && a.cfg.Region == "eu-west-1":
		return nil
	case lc == defaultRegion:
		return errInvalidLocation
	default:
		return errIllegalLocation.withMessage("The " + lc + " location constraint is incompatible for the region specific endpoint this request was sent to.")
	}
}

func (a *api) headBucket(rq *request) error {
	b, err := a.st.HeadBucket(rq.ctx, rq.bucket)
	if err != nil {
		return fmt.Errorf("head bucket %q: %w", rq.bucket, err)
	}
	rq.w.Header().Set("x-amz-bucket-region", a.regionOf(b))
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

type versioningConfiguration struct {
	XMLName xml.Name `xml:"VersioningConfiguration"`
	NS      string   `xml:"xmlns,attr"`
}

func (a *api) getBucketVersioning(rq *request) error {
	if _, err := a.st.HeadBucket(rq.ctx, rq.bucket); err != nil {
		return fmt.Errorf("bucket versioning %q: %w", rq.bucket, err)
	}
	return writeXML(rq, versioningConfiguration{NS: s3NS}) // never enabled
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
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

// ownerACL is the only ACL there is: the owner has FULL_CONTROL.
func ownerACL(rq *request) accessControlPolicy {
	o := ownerOf(rq)
	return accessControlPolicy{NS: s3NS, Owner: o, Grants: []grant{{
		Grantee: grantee{
			XMLNSXSI: "http://www.w3.org/2001/XMLSchema-instance", Type: "CanonicalUser",
			ID: o.ID, DisplayName: o.DisplayName,
		},
		Permission: "FULL_CONTROL",
	}}}
}

func (a *api) getBucketACL(rq *request) error {
	if _, err := a.st.HeadBucket(rq.ctx, rq.bucket); err != nil {
		return fmt.Errorf("bucket acl %q: %w", rq.bucket, err)
	}
	return writeXML(rq, ownerACL(rq))
}

// aclRequest is the AccessControlPolicy body of PutBucketAcl/PutObjectAcl.
type aclRequest struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	Owner   *struct {
		ID string `xml:"ID"`
	} `xml:"Owner"`
	Grants []struct {
		Grantee struct {
			Type string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
			ID   string `xml:"ID"`
			URI  string `xml:"URI"`
			Mail string `xml:"EmailAddress"`
		} `xml:"Grantee"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// parseACLBody parses an AccessControlPolicy and accepts it only if it
// grants nothing beyond what the owner already has: FULL_CONTROL (or less)
// to the owner's canonical id. A grant to anyone else is NotImplemented (we
// do not store ACLs); a body that is not an ACL is MalformedACLError.
func parseACLBody(body []byte, ownerID string) error {
	var acl aclRequest
	if err := decodeXML(body, &acl); err != nil {
		return errMalformedACL
	}
	for _, g := range acl.Grants {
		switch g.Permission {
		case "FULL_CONTROL", "READ", "WRITE", "READ_ACP", "WRITE_ACP":
		default:
			return errMalformedACL
		}
		if g.Grantee.URI != "" || g.Grantee.Mail != "" || (g.Grantee.ID != "" && g.Grantee.ID != ownerID) {
			return errNotImplemented.withMessage("ACL grants to other principals are not supported: s3gate keeps every bucket and object private to its owner.")
		}
		if g.Grantee.ID == "" {
			return errMalformedACL
		}
	}
	return nil
}

// checkPutACL accepts a canned owner-only ACL in x-amz-acl, or an
// AccessControlPolicy body granting only the owner (what we already do).
// Neither is MissingSecurityHeader, both InvalidRequest, as on AWS.
func checkPutACL(a *api, rq *request) error {
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	hasBody := len(bytes.TrimSpace(body)) > 0
	hasGrants := false
	for name := range rq.r.Header {
		if strings.HasPrefix(strings.ToLower(name), "x-amz-grant-") {
			hasGrants = true
		}
	}
	switch {
	case rq.r.Header.Get("x-amz-acl") != "" && hasBody:
		return errInvalidRequest.withMessage("Specifying both Canned ACLs and Header Grants is not allowed")
	case hasBody:
		return parseACLBody(body, ownerOf(rq).ID)
	case rq.r.Header.Get("x-amz-acl") != "" || hasGrants:
		return checkCannedACL(rq.r.Header)
	default:
		return errMissingSecurityHeader
	}
}

func (a *api) putBucketACL(rq *request) error {
	if err := checkPutACL(a, rq); err != nil {
		return err
	}
	if _, err := a.st.HeadBucket(rq.ctx, rq.bucket); err != nil {
		return fmt.Errorf("put bucket acl %q: %w", rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// headObject resolves an object's metadata without opening its content.
func (a *api) headObject(rq *request) (store.ObjectInfo, error) {
	info, _, rd, err := a.st.GetObject(rq.ctx, rq.bucket, rq.key, store.GetOptions{}, true)
	if rd != nil {
		_ = rd.Close() // head=true opens nothing; close defensively
	}
	if err != nil {
		return info, fmt.Errorf("head object %q/%q: %w", rq.bucket, rq.key, err)
	}
	return info, nil
}

func (a *api) getObjectACL(rq *request) error {
	if _, err := a.headObject(rq); err != nil {
		return err
	}
	return writeXML(rq, ownerACL(rq))
}

func (a *api) putObjectACL(rq *request) error {
	if err := checkPutACL(a, rq); err != nil {
		return err
	}
	if _, err := a.headObject(rq); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

type tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	NS      string   `xml:"xmlns,attr"`
	TagSet  struct{} `xml:"TagSet"`
}

// getObjectTagging answers an empty tag set: objects never carry tags here,
// and copy tools read tags before copying.
func (a *api) getObjectTagging(rq *request) error {
	if _, err := a.headObject(rq); err != nil {
		return err
	}
	return writeXML(rq, tagging{NS: s3NS})
}
