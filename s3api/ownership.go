package s3api

import (
	"encoding/xml"
	"net/http"

	"github.com/s3gate/s3gate/store"
)

// Object ownership (Put/Get/DeleteBucketOwnershipControls), as on AWS since
// 2023: a bucket that never had the setting is BucketOwnerEnforced, ACLs
// off; DeleteBucketOwnershipControls leaves it without one, which behaves
// as ObjectWriter (stored as "", like a deleted Block Public Access).
const (
	ownerEnforced  = "BucketOwnerEnforced"
	ownerPreferred = "BucketOwnerPreferred"
	objectWriter   = "ObjectWriter"
)

var (
	errACLNotSupported     = &apiError{"AccessControlListNotSupported", http.StatusBadRequest, "The bucket does not allow ACLs"}
	errACLWithOwnership    = &apiError{"InvalidBucketAclWithObjectOwnership", http.StatusBadRequest, "Bucket cannot have ACLs set with ObjectOwnership's BucketOwnerEnforced setting"}
	errNoOwnershipControls = &apiError{"OwnershipControlsNotFoundError", http.StatusNotFound, "The bucket ownership controls were not found"}
)

type ownershipControls struct {
	XMLName xml.Name `xml:"OwnershipControls"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	Rules   []struct {
		ObjectOwnership string `xml:"ObjectOwnership"`
	} `xml:"Rule"`
}

// ownershipOf is the bucket's object ownership from its configuration
// documents, and whether it has one (GetBucketOwnershipControls). Without
// bucket configurations (ac nil, or its configs) no ACL other than the
// owner's exists: ObjectWriter.
func ownershipOf(ac *access, cfgs map[string]string) (string, bool) {
	if ac == nil || ac.configs == nil {
		return objectWriter, false
	}
	v, ok := cfgs[store.BucketConfigOwnership]
	switch {
	case !ok:
		return ownerEnforced, true
	case v == "":
		return objectWriter, false
	}
	return v, true
}

// checkOwnership refuses an ACL that grants to anyone but the bucket owner
// where ACLs are off (BucketOwnerEnforced): AccessControlListNotSupported.
func (a *api) checkOwnership(cfgs map[string]string, acl *store.ACL, bucketOwner string) error {
	if o, _ := ownershipOf(a.access, cfgs); o != ownerEnforced {
		return nil
	}
	if ownerOnlyACL(acl) && (bucketOwner == "" || acl.Owner == bucketOwner) {
		return nil
	}
	return errACLNotSupported
}

func (a *api) putOwnershipControls(rq *request) error {
	if _, err := a.policyConfigs(); err != nil {
		return err
	}
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	var oc ownershipControls
	if err := decodeXML(body, &oc); err != nil || len(oc.Rules) != 1 {
		return errMalformedXML
	}
	o := oc.Rules[0].ObjectOwnership
	switch o {
	case ownerEnforced, ownerPreferred, objectWriter:
	default:
		return errMalformedXML
	}
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	acl, _, err := bucketACL(rq, cfgs)
	if err != nil {
		return err
	}
	if o == ownerEnforced && acl != nil && !ownerOnlyACL(acl) {
		return errACLWithOwnership
	}
	return a.putConfig(rq, store.BucketConfigOwnership, o, http.StatusOK)
}

func (a *api) getOwnershipControls(rq *request) error {
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	o, ok := ownershipOf(a.access, cfgs)
	if !ok {
		return errNoOwnershipControls
	}
	out := ownershipControls{NS: s3NS}
	out.Rules = append(out.Rules, struct {
		ObjectOwnership string `xml:"ObjectOwnership"`
	}{o})
	return writeXML(rq, out)
}

func (a *api) deleteOwnershipControls(rq *request) error {
	if _, err := a.policyConfigs(); err != nil {
		return err
	}
	if _, err := a.bucketConfigs(rq); err != nil {
		return err
	}
	return a.putConfig(rq, store.BucketConfigOwnership, "", http.StatusNoContent)
}

// createOwnership reads CreateBucket's x-amz-object-ownership ("" for the
// default) and checks the bucket's ACL against the ownership it gives.
func (a *api) createOwnership(rq *request, acl *store.ACL) (string, error) {
	o := rq.r.Header.Get("X-Amz-Object-Ownership")
	switch o {
	case "", ownerEnforced, ownerPreferred, objectWriter:
	default:
		return "", errInvalidArgument.withMessage("Invalid x-amz-object-ownership header: " + o)
	}
	if a.access == nil || a.access.configs == nil {
		if o != "" && o != objectWriter {
			return "", errNotImplemented.withMessage("Object ownership needs a gateway that keeps bucket configurations.")
		}
		return "", nil
	}
	if (o == "" || o == ownerEnforced) && acl != nil && !ownerOnlyACL(acl) {
		return "", errACLWithOwnership
	}
	return o, nil
}
