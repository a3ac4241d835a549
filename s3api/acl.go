package s3api

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/s3gate/s3gate/store"
)

// ACLs as S3 has them (docs/adr/011-access-policies.md, "ACLs"). The
// canonical id of an access key is the key id itself (ownerOf): the id
// GetBucketAcl has always answered. A bucket's ACL is its "acl"
// configuration document; an object's lives in its metadata. A bucket or
// object without one is private to its owner, the caller as before.

// The group URIs S3 knows; only the first two grant anything here.
const (
	groupAllUsers      = "http://acs.amazonaws.com/groups/global/AllUsers"
	groupAuthenticated = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
	groupLogDelivery   = "http://acs.amazonaws.com/groups/s3/LogDelivery"
	xsiNS              = "http://www.w3.org/2001/XMLSchema-instance"
)

// aclPermissions are the permissions a grant may give.
var aclPermissions = []string{"FULL_CONTROL", "READ", "WRITE", "READ_ACP", "WRITE_ACP"}

// grantHeaders are the x-amz-grant-* headers and the permission each gives.
var grantHeaders = []struct{ name, perm string }{
	{"X-Amz-Grant-Full-Control", "FULL_CONTROL"}, {"X-Amz-Grant-Read", "READ"}, {"X-Amz-Grant-Write", "WRITE"},
	{"X-Amz-Grant-Read-Acp", "READ_ACP"}, {"X-Amz-Grant-Write-Acp", "WRITE_ACP"},
}

var (
	errBothACLs     = errInvalidRequest.withMessage("Specifying both Canned ACLs and Header Grants is not allowed")
	errEmailGrantee = errInvalidArgument.withMessage("The request contained an unsupported argument: grants by email address are not supported in this region.")
)

// cannedACL expands a canned ACL for owner; bucketOwner is the owner of the
// object's bucket ("" for a bucket's own ACL, where bucket-owner-* do not
// apply).
func cannedACL(name, owner, bucketOwner string, object bool) (*store.ACL, error) {
	acl := &store.ACL{Owner: owner, Grants: []store.ACLGrant{{ID: owner, Permission: "FULL_CONTROL"}}}
	add := func(g store.ACLGrant) { acl.Grants = append(acl.Grants, g) }
	switch name {
	case "private":
	case "public-read":
		add(store.ACLGrant{URI: groupAllUsers, Permission: "READ"})
	case "public-read-write":
		add(store.ACLGrant{URI: groupAllUsers, Permission: "READ"})
		add(store.ACLGrant{URI: groupAllUsers, Permission: "WRITE"})
	case "authenticated-read":
		add(store.ACLGrant{URI: groupAuthenticated, Permission: "READ"})
	case "bucket-owner-read", "bucket-owner-full-control":
		// On a bucket, AWS takes them as private.
		if object && bucketOwner != "" && bucketOwner != owner {
			perm := map[string]string{"bucket-owner-read": "READ", "bucket-owner-full-control": "FULL_CONTROL"}[name]
			add(store.ACLGrant{ID: bucketOwner, Permission: perm})
		}
	case "aws-exec-read", "log-delivery-write":
		// They grant to Amazon EC2 and to S3's log delivery, neither of
		// which exists here.
		return nil, errNotImplemented.withMessage("The canned ACL " + name + " is not supported: s3gate has no " +
			map[string]string{"aws-exec-read": "Amazon EC2", "log-delivery-write": "log delivery"}[name] + " to grant to.")
	default:
		return nil, errInvalidArgument.withMessage("Invalid canned ACL " + strconv.Quote(name) + ".")
	}
	return acl, nil
}

// parseGrantee reads one grantee of an x-amz-grant-* header: id="...",
// uri="..." or emailAddress="..." (refused, as AWS does outside its oldest
// regions).
func parseGrantee(s string) (store.ACLGrant, error) {
	k, v, ok := strings.Cut(strings.TrimSpace(s), "=")
	v = strings.TrimSpace(v)
	if uq, err := strconv.Unquote(v); err == nil {
		v = uq
	}
	if !ok || v == "" {
		return store.ACLGrant{}, errInvalidArgument.withMessage("Invalid grantee " + strconv.Quote(s) + ".")
	}
	switch strings.ToLower(strings.TrimSpace(k)) {
	case "id":
		return store.ACLGrant{ID: v}, nil
	case "uri":
		if err := checkGroup(v); err != nil {
			return store.ACLGrant{}, err
		}
		return store.ACLGrant{URI: v}, nil
	case "emailaddress":
		return store.ACLGrant{}, errEmailGrantee
	}
	return store.ACLGrant{}, errInvalidArgument.withMessage("Invalid grantee " + strconv.Quote(s) + ".")
}

// checkGroup accepts the groups that grant something here.
func checkGroup(uri string) error {
	if uri == groupAllUsers || uri == groupAuthenticated {
		return nil
	}
	return errInvalidArgument.withMessage("Invalid group uri")
}

// aclPolicyBody is the AccessControlPolicy body of PutBucketAcl/PutObjectAcl.
type aclPolicyBody struct {
	XMLName xml.Name `xml:"AccessControlPolicy"`
	Owner   *struct {
		ID string `xml:"ID"`
	} `xml:"Owner"`
	Grants []struct {
		Grantee *struct {
			Type string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
			ID   string `xml:"ID"`
			URI  string `xml:"URI"`
			Mail string `xml:"EmailAddress"`
		} `xml:"Grantee"`
		Permission string `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

// parseACLBody parses an AccessControlPolicy for owner: a body that is not
// one, a grant without grantee or with an unknown permission or grantee
// type is MalformedACLError.
func parseACLBody(body []byte, owner string) (*store.ACL, error) {
	var b aclPolicyBody
	if err := decodeXML(body, &b); err != nil || b.Owner == nil {
		return nil, errMalformedACL
	}
	if b.Owner.ID != owner {
		return nil, errAccessDenied
	}
	acl := &store.ACL{Owner: owner}
	for _, g := range b.Grants {
		if g.Grantee == nil || !slices.Contains(aclPermissions, g.Permission) {
			return nil, errMalformedACL
		}
		var gr store.ACLGrant
		switch g.Grantee.Type {
		case "CanonicalUser":
			if g.Grantee.ID == "" {
				return nil, errMalformedACL
			}
			gr.ID = g.Grantee.ID
		case "Group":
			if g.Grantee.URI == "" {
				return nil, errMalformedACL
			}
			if err := checkGroup(g.Grantee.URI); err != nil {
				return nil, err
			}
			gr.URI = g.Grantee.URI
		case "AmazonCustomerByEmail":
			return nil, errEmailGrantee
		default:
			return nil, errMalformedACL
		}
		gr.Permission = g.Permission
		acl.Grants = append(acl.Grants, gr)
	}
	return acl, nil
}

// requestACL reads the ACL a request sets: x-amz-acl, the x-amz-grant-*
// headers or (where body is not nil) an AccessControlPolicy body; nil when
// it sets none. owner owns the resource; bucketOwner is the bucket's owner
// for an object ("" for a bucket).
func requestACL(rq *request, body []byte, owner, bucketOwner string, object bool) (*store.ACL, error) {
	h := rq.r.Header
	canned := h.Get("X-Amz-Acl")
	var grants []store.ACLGrant
	for _, gh := range grantHeaders {
		for _, v := range h.Values(gh.name) {
			for part := range strings.SplitSeq(v, ",") {
				g, err := parseGrantee(part)
				if err != nil {
					return nil, err
				}
				g.Permission = gh.perm
				grants = append(grants, g)
			}
		}
	}
	hasBody := len(bytes.TrimSpace(body)) > 0
	switch {
	case canned != "" && (grants != nil || hasBody), grants != nil && hasBody:
		return nil, errBothACLs
	case canned != "":
		return cannedACL(canned, owner, bucketOwner, object)
	case grants != nil:
		return &store.ACL{Owner: owner, Grants: grants}, nil
	case hasBody:
		return parseACLBody(body, owner)
	}
	return nil, nil
}

// isPublic reports whether acl grants anything to AllUsers or
// AuthenticatedUsers: AWS's public ACLs.
func isPublicACL(acl *store.ACL) bool {
	return acl != nil && slices.ContainsFunc(acl.Grants, func(g store.ACLGrant) bool {
		return g.URI == groupAllUsers || g.URI == groupAuthenticated
	})
}

// aclGrants reports whether acl gives perm to the principal (key, or
// anonymous). FULL_CONTROL gives every permission; the owner always has
// READ_ACP and WRITE_ACP, as on S3. Under IgnorePublicAcls (ignorePublic)
// the group grants give nothing.
func aclGrants(acl *store.ACL, anonymous bool, key, perm string, ignorePublic bool) bool {
	if acl == nil {
		return false
	}
	if !anonymous && key == acl.Owner && (perm == "READ_ACP" || perm == "WRITE_ACP") {
		return true
	}
	return slices.ContainsFunc(acl.Grants, func(g store.ACLGrant) bool {
		if g.Permission != perm && g.Permission != "FULL_CONTROL" {
			return false
		}
		switch {
		case g.ID != "":
			return !anonymous && g.ID == key
		case g.URI == groupAllUsers:
			return !ignorePublic
		case g.URI == groupAuthenticated:
			return !ignorePublic && !anonymous
		}
		return false
	})
}

// bucketACLPerms and objectACLPerms are the permissions an ACL must give
// for an action, on the bucket and on the object (AWS's mapping of ACL
// permissions to policy actions).
var (
	bucketACLPerms = map[string]string{
		"s3:ListBucket": "READ", "s3:ListBucketVersions": "READ", "s3:ListBucketMultipartUploads": "READ",
		"s3:PutObject": "WRITE", "s3:DeleteObject": "WRITE", "s3:DeleteObjectVersion": "WRITE", "s3:AbortMultipartUpload": "WRITE",
		"s3:GetBucketAcl": "READ_ACP", "s3:PutBucketAcl": "WRITE_ACP",
	}
	objectACLPerms = map[string]string{
		"s3:GetObject": "READ", "s3:GetObjectAcl": "READ_ACP", "s3:PutObjectAcl": "WRITE_ACP",
		"s3:GetObjectVersion": "READ", "s3:GetObjectVersionAcl": "READ_ACP", "s3:PutObjectVersionAcl": "WRITE_ACP",
	}
)

// parseStoredACL reads a bucket's stored ACL document ("" for none).
func parseStoredACL(doc string) (*store.ACL, error) {
	if doc == "" {
		return nil, nil
	}
	var acl store.ACL
	if err := json.Unmarshal([]byte(doc), &acl); err != nil {
		return nil, fmt.Errorf("stored ACL: %w", err)
	}
	return &acl, nil
}

// aclXML renders acl (nil: private to ownerID) as S3's AccessControlPolicy.
func aclXML(acl *store.ACL, ownerID string) accessControlPolicy {
	if acl == nil {
		acl = &store.ACL{Owner: ownerID, Grants: []store.ACLGrant{{ID: ownerID, Permission: "FULL_CONTROL"}}}
	}
	out := accessControlPolicy{NS: s3NS, Owner: &owner{ID: acl.Owner, DisplayName: acl.Owner}}
	for _, g := range acl.Grants {
		ge := grantee{XMLNSXSI: xsiNS, Type: "CanonicalUser", ID: g.ID, DisplayName: g.ID}
		if g.URI != "" {
			ge = grantee{XMLNSXSI: xsiNS, Type: "Group", URI: g.URI}
		}
		out.Grants = append(out.Grants, grant{Grantee: ge, Permission: g.Permission})
	}
	return out
}

// ownerOnlyACL reports whether acl grants to its owner alone.
func ownerOnlyACL(acl *store.ACL) bool {
	return !slices.ContainsFunc(acl.Grants, func(g store.ACLGrant) bool { return g.ID != acl.Owner })
}

// checkACL applies the bucket's settings to an ACL about to be set (on an
// object of bucketOwner's bucket; "" for a bucket's own): under
// BucketOwnerEnforced only the bucket owner's full control
// (AccessControlListNotSupported); without access evaluation only owner-only
// ACLs exist (NotImplemented otherwise); BlockPublicAcls refuses a public
// one (AccessDenied, as on AWS).
func (a *api) checkACL(cfgs map[string]string, acl *store.ACL, bucketOwner string) error {
	if err := a.checkOwnership(cfgs, acl, bucketOwner); err != nil {
		return err
	}
	if a.access == nil || a.access.configs == nil {
		if !ownerOnlyACL(acl) {
			return errNotImplemented.withMessage("ACL grants to other principals need a gateway that evaluates access (access keys in the store).")
		}
		return nil
	}
	bpa, _, err := a.access.effectiveBPA(cfgs)
	if err != nil {
		return err
	}
	if bpa.BlockPublicAcls && isPublicACL(acl) {
		return errAccessDenied
	}
	return nil
}

// writeACL reads the ACL a PutObject, CopyObject or CreateMultipartUpload
// sets in its headers (nil: none, private to the writer).
func (a *api) writeACL(rq *request) (*store.ACL, error) {
	var cfgs map[string]string
	if rq.decision != nil {
		cfgs = rq.decision.cfgs
	}
	_, bucketOwner, err := bucketACL(rq, cfgs)
	if err != nil {
		return nil, err
	}
	acl, err := requestACL(rq, nil, ownerOf(rq).ID, bucketOwner, true)
	if err != nil || acl == nil {
		return nil, err
	}
	if o, _ := ownershipOf(a.access, cfgs); o == ownerPreferred && rq.r.Header.Get("X-Amz-Acl") == "bucket-owner-full-control" {
		acl.Owner = bucketOwner // the bucket owner takes the object
	}
	return acl, a.checkACL(cfgs, acl, bucketOwner)
}

// copyACL gives a copy the ACL of its request (nil: private to the
// writer), never its source's, and the tags of its request under
// x-amz-tagging-directive REPLACE (tags non-nil), else its source's. When
// the source's metadata is needed it is read here and given, with that ACL,
// conditional on the ETag read (a source overwritten in between fails the
// copy: PreconditionFailed).
func (a *api) copyACL(rq *request, src *store.CopySource, opts *store.CopyOptions, acl *store.ACL, tags []store.Tag) error {
	if opts.ReplaceMeta {
		opts.Meta.ACL = acl
		if tags != nil {
			opts.Meta.Tags = tags
			return nil
		}
	}
	info, _, rd, err := a.st.GetObject(rq.ctx, src.Bucket, src.Key, store.GetOptions{VersionID: src.VersionID}, true)
	if rd != nil {
		_ = rd.Close() // head=true opens nothing; close defensively
	}
	switch {
	case errors.Is(err, store.ErrNoSuchKey) || errors.Is(err, store.ErrNoSuchBucket) ||
		errors.Is(err, store.ErrNoSuchVersion) || errors.Is(err, store.ErrDeleteMarker):
		return nil // the copy answers it, after its own checks
	case err != nil:
		return fmt.Errorf("copy source %q/%q: %w", src.Bucket, src.Key, err)
	case !opts.ReplaceMeta && info.Meta.ACL == nil && acl == nil && tags == nil:
		return nil
	}
	if !opts.ReplaceMeta {
		opts.ReplaceMeta, opts.Meta = true, info.Meta
		opts.Meta.ACL = acl
	}
	opts.Meta.Tags = info.Meta.Tags
	if tags != nil {
		opts.Meta.Tags = tags
	}
	if src.Cond.IfMatch == "" {
		src.Cond.IfMatch = info.ETag // the client's own If-Match already pins the source
	}
	return nil
}

// aclToPut reads and checks the ACL of PutBucketAcl or PutObjectAcl, which
// must set one (MissingSecurityHeader).
func (a *api) aclToPut(rq *request, cfgs map[string]string, body []byte, owner, bucketOwner string, object bool) (*store.ACL, error) {
	acl, err := requestACL(rq, body, owner, bucketOwner, object)
	if err != nil {
		return nil, err
	}
	if acl == nil {
		return nil, errMissingSecurityHeader
	}
	return acl, a.checkACL(cfgs, acl, bucketOwner)
}
