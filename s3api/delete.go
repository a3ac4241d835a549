package s3api

import (
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/s3gate/s3gate/store"
)

// maxDeleteKeys is AWS's limit of keys per DeleteObjects request.
const maxDeleteKeys = 1000

type deleteRequest struct {
	XMLName xml.Name       `xml:"Delete"`
	Quiet   bool           `xml:"Quiet"`
	Objects []deleteObject `xml:"Object"`
}

// deleteObject is one entry of a DeleteObjects body.
type deleteObject struct {
	Key       string  `xml:"Key"`
	VersionID *string `xml:"VersionId"`
	// ETag is the entry's If-Match; LastModifiedTime and Size (directory
	// buckets' conditions) are refused per key (errConditionalDelete).
	ETag             *string `xml:"ETag"`
	LastModifiedTime *string `xml:"LastModifiedTime"`
	Size             *string `xml:"Size"`
}

type deleteResult struct {
	XMLName xml.Name      `xml:"DeleteResult"`
	NS      string        `xml:"xmlns,attr"`
	Deleted []deletedElem `xml:"Deleted"`
	Errors  []deleteError `xml:"Error"`
}

// deletedElem is one Deleted element. As S3: VersionId is the version
// named in the request; DeleteMarker and DeleteMarkerVersionId say that a
// delete marker was created (its id) or that the version removed was one.
type deletedElem struct {
	Key                   string `xml:"Key"`
	VersionID             string `xml:"VersionId,omitempty"`
	DeleteMarker          bool   `xml:"DeleteMarker,omitempty"`
	DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
}

type deleteError struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

// ifMatch is an entry's ETag condition ("" none).
func ifMatch(o deleteObject) string {
	if o.ETag == nil {
		return ""
	}
	return strings.TrimSpace(*o.ETag)
}

// parseDeleteRequest parses a DeleteObjects body: 1 to 1000 objects
// (MalformedXML otherwise, as AWS answers both).
func parseDeleteRequest(body []byte) (deleteRequest, error) {
	var req deleteRequest
	if err := decodeXML(body, &req); err != nil {
		return req, err
	}
	if len(req.Objects) == 0 || len(req.Objects) > maxDeleteKeys {
		return req, errMalformedXML
	}
	return req, nil
}

func (a *api) deleteObjects(rq *request) error {
	body, err := readBody(rq, max(a.cfg.MaxXMLBody, bigXMLBody))
	if err != nil {
		return err
	}
	if err := verifySmallBody(rq, body); err != nil {
		return err
	}
	req, err := parseDeleteRequest(body)
	if err != nil {
		return err
	}
	out := deleteResult{NS: s3NS}
	refuse := func(key, vid string, e *apiError) {
		out.Errors = append(out.Errors, deleteError{Key: key, VersionID: vid, Code: e.Code, Message: e.Message})
	}
	ids := make([]store.ObjectID, 0, len(req.Objects))
	versioned := false
	for _, o := range req.Objects {
		vid := ""
		if o.VersionID != nil && *o.VersionID != "" {
			vid = *o.VersionID
		}
		switch {
		case vid != "" && !store.ValidVersionID(vid):
			refuse(o.Key, vid, errInvalidVersionID)
		case o.LastModifiedTime != nil || o.Size != nil:
			refuse(o.Key, vid, errConditionalDelete)
		case ifMatch(o) != "" && vid != "":
			refuse(o.Key, vid, errConditionalVersionDelete)
		case a.allowKey(rq, o.Key, vid, ifMatch(o)) != nil:
			refuse(o.Key, vid, errAccessDenied)
		default:
			ids = append(ids, store.ObjectID{Key: o.Key, VersionID: vid, IfMatch: ifMatch(o), BypassGovernance: a.bypassGovernance(rq, o.Key)})
			// A condition is judged by the versioned path, under the key's lock.
			versioned = versioned || vid != "" || ifMatch(o) != ""
		}
	}
	if len(ids) == 0 {
		return writeXML(rq, out)
	}
	if !versioned {
		state, err := a.bucketVersioning(rq, rq.bucket)
		if err != nil {
			return err
		}
		versioned = state != ""
	}
	results, err := a.deleteIDs(rq, ids, versioned)
	if err != nil {
		return fmt.Errorf("delete objects in %q: %w", rq.bucket, err)
	}
	for i, r := range results {
		vid := ids[i].VersionID
		if r.Err != nil {
			e, internal := toAPIError(r.Err)
			if internal {
				a.log.ErrorContext(rq.ctx, "s3 delete objects: key failed",
					"request_id", rq.id, "bucket", rq.bucket, "key", r.Key, "version", vid, "error", r.Err)
			}
			refuse(r.Key, vid, e)
			continue
		}
		if req.Quiet {
			continue
		}
		d := deletedElem{Key: r.Key, VersionID: vid, DeleteMarker: r.DeleteMarker}
		if r.DeleteMarker {
			d.DeleteMarkerVersionID = r.VersionID
		}
		out.Deleted = append(out.Deleted, d)
	}
	return writeXML(rq, out)
}

// deleteIDs deletes keys or versions, one result per id in order: by the
// plain delete in a bucket that never had versioning when no version is
// named (the answer then names none).
func (a *api) deleteIDs(rq *request, ids []store.ObjectID, versioned bool) ([]store.DeleteVersionResult, error) {
	if versioned {
		return a.st.DeleteObjectVersions(rq.ctx, rq.bucket, ids)
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = id.Key
	}
	res, err := a.st.DeleteObjects(rq.ctx, rq.bucket, keys)
	if err != nil {
		return nil, err
	}
	out := make([]store.DeleteVersionResult, len(res))
	for i, r := range res {
		out[i] = store.DeleteVersionResult{Key: r.Key, Err: r.Err}
	}
	return out, nil
}
