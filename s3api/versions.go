package s3api

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"

	"github.com/s3gate/s3gate/store"
)

var (
	errEmptyVersionID    = errInvalidArgument.withMessage("Version id cannot be the empty string")
	errVersionIDNoMarker = errInvalidArgument.withMessage("A version-id marker cannot be specified without a key marker.")
	// errMFADelete is AWS's answer to MFA delete without MFA: s3gate has no
	// MFA devices, so it never turns MFA delete on.
	errMFADelete = &apiError{"AccessDenied", http.StatusForbidden, "Mfa Authentication must be used for this request"}
	// errMFANotSupported answers a request that carries x-amz-mfa: the
	// gateway cannot check it, and an unchecked MFA is not accepted.
	errMFANotSupported = errNotImplemented.withMessage("MFA delete is not supported: s3gate has no MFA devices to check x-amz-mfa against.")
)

// checkVersionID returns v ("" when no version was named) or the error AWS
// answers for a malformed one.
func checkVersionID(v string, given bool) (string, error) {
	switch {
	case !given:
		return "", nil
	case v == "":
		return "", errEmptyVersionID
	case !store.ValidVersionID(v):
		return "", errInvalidVersionID
	}
	return v, nil
}

// versionParam reads rq's versionId query parameter ("" when absent).
func versionParam(rq *request) (string, error) {
	return checkVersionID(rq.q.Get("versionId"), rq.q.Has("versionId"))
}

// bucketVersioning returns the versioning state of bucket ("" if it never
// had one), from the configuration the request's policy decision already
// read when it can.
func (a *api) bucketVersioning(rq *request, bucket string) (string, error) {
	if bucket == rq.bucket && rq.decision != nil && rq.decision.cfgs != nil {
		return rq.decision.cfgs[store.BucketConfigVersioning], nil
	}
	st, err := a.st.BucketVersioning(rq.ctx, bucket)
	if err != nil {
		return "", fmt.Errorf("versioning of %q: %w", bucket, err)
	}
	return st, nil
}

// shownVersion returns the version id S3 reports for id, a version of
// bucket, and whether it reports one: a bucket that never had versioning
// reports none (its objects' "null" included).
func (a *api) shownVersion(rq *request, bucket, id string) (string, bool, error) {
	switch id {
	case "":
		return "", false, nil
	case store.NullVersion:
		st, err := a.bucketVersioning(rq, bucket)
		return id, err == nil && st != "", err
	}
	return id, true, nil // only a versioned bucket has such an id
}

// setVersionHeader sets x-amz-version-id for id, a version of rq's bucket,
// where S3 sends it.
func (a *api) setVersionHeader(rq *request, id string) error {
	return a.setVersionHeaderOf(rq, rq.bucket, "x-amz-version-id", id)
}

// setVersionHeaderOf sets the header name to id, a version of bucket,
// where S3 sends it.
func (a *api) setVersionHeaderOf(rq *request, bucket, name, id string) error {
	v, ok, err := a.shownVersion(rq, bucket, id)
	if err != nil {
		return err
	}
	if ok {
		rq.w.Header().Set(name, v)
	}
	return nil
}

// versionError adds to a failed read of a version what S3 answers with it:
// the delete marker's headers (x-amz-delete-marker, its version id, for a
// 405 its Last-Modified and Allow), and the 405 body's Method and
// ResourceType.
func (a *api) versionError(rq *request, info store.ObjectInfo, err error) error {
	switch {
	case errors.Is(err, store.ErrDeleteMarker):
		h := rq.w.Header()
		h.Set("X-Amz-Delete-Marker", "true")
		h.Set("X-Amz-Version-Id", info.VersionID)
		h.Set("Allow", "DELETE")
		if !info.LastModified.IsZero() {
			h.Set("Last-Modified", httpTime(info.LastModified))
		}
		return withDetails(errMethodNotAllowed, "Method", rq.r.Method, "ResourceType", "DeleteMarker")
	case errors.Is(err, store.ErrNoSuchKey) && info.DeleteMarker:
		rq.w.Header().Set("X-Amz-Delete-Marker", "true")
		if verr := a.setVersionHeader(rq, info.VersionID); verr != nil {
			return verr
		}
	case errors.Is(err, store.ErrNoSuchVersion) && rq.r.Method != http.MethodHead:
		return withDetails(errNoSuchVersion, "Key", rq.key, "VersionId", rq.q.Get("versionId"))
	}
	return err
}

// versioningConfiguration is the body of Get/PutBucketVersioning. A bucket
// that never had versioning answers it empty; MfaDelete is never on here.
type versioningConfiguration struct {
	XMLName   xml.Name `xml:"VersioningConfiguration"`
	NS        string   `xml:"xmlns,attr,omitempty"`
	Status    string   `xml:"Status,omitempty"`
	MfaDelete string   `xml:"MfaDelete,omitempty"`
}

func (a *api) getBucketVersioning(rq *request) error {
	if _, err := a.st.HeadBucket(rq.ctx, rq.bucket); err != nil {
		return fmt.Errorf("bucket versioning %q: %w", rq.bucket, err)
	}
	st, err := a.st.BucketVersioning(rq.ctx, rq.bucket)
	if err != nil {
		return fmt.Errorf("bucket versioning %q: %w", rq.bucket, err)
	}
	return writeXML(rq, versioningConfiguration{NS: s3NS, Status: st})
}

// parseVersioningConfiguration reads a PutBucketVersioning body: Status
// Enabled or Suspended; MfaDelete absent or Disabled (Enabled is refused as
// AWS refuses it without MFA).
func parseVersioningConfiguration(body []byte) (string, error) {
	var cfg versioningConfiguration
	if err := decodeXML(body, &cfg); err != nil {
		return "", err
	}
	switch cfg.Status {
	case store.VersioningEnabled, store.VersioningSuspended:
	default:
		return "", errMalformedXML
	}
	switch cfg.MfaDelete {
	case "", "Disabled":
	case "Enabled":
		return "", errMFADelete
	default:
		return "", errMalformedXML
	}
	return cfg.Status, nil
}

func (a *api) putBucketVersioning(rq *request) error {
	if rq.r.Header.Get("X-Amz-Mfa") != "" {
		return errMFANotSupported
	}
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	if err := verifySmallBody(rq, body); err != nil {
		return err
	}
	status, err := parseVersioningConfiguration(body)
	if err != nil {
		return err
	}
	if err := a.st.SetBucketVersioning(rq.ctx, rq.bucket, status); err != nil {
		return fmt.Errorf("put bucket versioning %q: %w", rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// versionEntry is one Version or DeleteMarker element of
// ListVersionsResult (XMLName says which: S3 interleaves them in listing
// order).
type versionEntry struct {
	XMLName           xml.Name
	Key               string `xml:"Key"`
	VersionID         string `xml:"VersionId"`
	IsLatest          bool   `xml:"IsLatest"`
	LastModified      string `xml:"LastModified"`
	ETag              string `xml:"ETag,omitempty"`
	Size              *int64 `xml:"Size"`
	StorageClass      string `xml:"StorageClass,omitempty"`
	Owner             *owner `xml:"Owner"`
	ChecksumAlgorithm string `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType      string `xml:"ChecksumType,omitempty"`
}

type listVersionsResult struct {
	XMLName             xml.Name       `xml:"ListVersionsResult"`
	NS                  string         `xml:"xmlns,attr"`
	Name                string         `xml:"Name"`
	Prefix              string         `xml:"Prefix"`
	KeyMarker           string         `xml:"KeyMarker"`
	VersionIDMarker     string         `xml:"VersionIdMarker"`
	NextKeyMarker       string         `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string         `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int            `xml:"MaxKeys"`
	Delimiter           *string        `xml:"Delimiter"`
	EncodingType        string         `xml:"EncodingType,omitempty"`
	IsTruncated         bool           `xml:"IsTruncated"`
	Entries             []versionEntry // Version and DeleteMarker elements
	CommonPrefixes      []prefixElem   `xml:"CommonPrefixes"`
}

// listObjectVersions answers ListObjectVersions from the store's listing:
// versions and delete markers in key order, newest first within a key,
// paged by key-marker and version-id-marker.
func (a *api) listObjectVersions(rq *request) error {
	enc, encType, err := parseEncodingType(rq.q)
	if err != nil {
		return err
	}
	maxKeys, err := parseMaxKeys(rq, "max-keys")
	if err != nil {
		return err
	}
	keyMarker := rq.q.Get("key-marker")
	vidMarker, err := checkVersionID(rq.q.Get("version-id-marker"), rq.q.Get("version-id-marker") != "")
	switch {
	case vidMarker != "" && keyMarker == "":
		return errVersionIDNoMarker
	case err != nil:
		return err
	}
	p := store.ListVersionsParams{Prefix: rq.q.Get("prefix"), Delimiter: rq.q.Get("delimiter"),
		KeyMarker: keyMarker, VersionIDMarker: vidMarker, MaxKeys: maxKeys}
	var res store.ListVersionsResult
	if maxKeys == 0 {
		_, err = a.st.HeadBucket(rq.ctx, rq.bucket)
	} else {
		res, err = a.st.ListObjectVersions(rq.ctx, rq.bucket, p)
	}
	if err != nil {
		return fmt.Errorf("list versions of %q: %w", rq.bucket, err)
	}
	own := ownerOf(rq)
	out := listVersionsResult{
		NS: s3NS, Name: rq.bucket, Prefix: enc.enc(p.Prefix), KeyMarker: enc.enc(keyMarker),
		VersionIDMarker: vidMarker, MaxKeys: maxKeys, Delimiter: givenDelimiter(rq, enc),
		EncodingType: encType, IsTruncated: res.Truncated,
		Entries: make([]versionEntry, 0, len(res.Versions)),
	}
	for _, v := range res.Versions {
		e := versionEntry{XMLName: xml.Name{Local: "Version"}, Key: enc.enc(v.Key), VersionID: v.VersionID,
			IsLatest: v.IsLatest, LastModified: xmlTime(orNow(v.LastModified)), Owner: own}
		if v.DeleteMarker {
			e.XMLName.Local = "DeleteMarker"
		} else {
			size := v.Size
			e.ETag, e.Size, e.StorageClass = quoteETag(v.ETag), &size, storageClassName(v.Meta)
			e.ChecksumAlgorithm, e.ChecksumType = v.Checksum.Algorithm, checksumType(v.Checksum)
		}
		out.Entries = append(out.Entries, e)
	}
	for _, cp := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixElem{Prefix: enc.enc(cp)})
	}
	if res.Truncated {
		out.NextKeyMarker, out.NextVersionIDMarker = enc.enc(res.NextKeyMarker), res.NextVersionIDMarker
	}
	return writeXML(rq, &out)
}
