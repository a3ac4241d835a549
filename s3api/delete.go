package s3api

import (
	"encoding/xml"
	"fmt"
)

// maxDeleteKeys is AWS's limit of keys per DeleteObjects request.
const maxDeleteKeys = 1000

type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool     `xml:"Quiet"`
	Objects []struct {
		Key       string  `xml:"Key"`
		VersionID *string `xml:"VersionId"`
		// Conditional deletes, refused per key (errConditionalDelete).
		ETag             *string `xml:"ETag"`
		LastModifiedTime *string `xml:"LastModifiedTime"`
		Size             *string `xml:"Size"`
	} `xml:"Object"`
}

type deleteResult struct {
	XMLName xml.Name      `xml:"DeleteResult"`
	NS      string        `xml:"xmlns,attr"`
	Deleted []deletedElem `xml:"Deleted"`
	Errors  []deleteError `xml:"Error"`
}

type deletedElem struct {
	Key string `xml:"Key"`
}

type deleteError struct {
	Key     string `xml:"Key"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
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
	keys := make([]string, 0, len(req.Objects))
	for _, o := range req.Objects {
		if o.VersionID != nil && *o.VersionID != "" && *o.VersionID != "null" {
			out.Errors = append(out.Errors, deleteError{Key: o.Key, Code: errInvalidVersionID.Code, Message: errInvalidVersionID.Message})
			continue
		}
		if o.ETag != nil || o.LastModifiedTime != nil || o.Size != nil {
			out.Errors = append(out.Errors, deleteError{Key: o.Key, Code: errConditionalDelete.Code, Message: errConditionalDelete.Message})
			continue
		}
		if err := a.allowKey(rq, o.Key); err != nil {
			out.Errors = append(out.Errors, deleteError{Key: o.Key, Code: errAccessDenied.Code, Message: errAccessDenied.Message})
			continue
		}
		keys = append(keys, o.Key)
	}
	if len(keys) > 0 {
		results, err := a.st.DeleteObjects(rq.ctx, rq.bucket, keys)
		if err != nil {
			return fmt.Errorf("delete objects in %q: %w", rq.bucket, err)
		}
		for _, r := range results {
			if r.Err == nil {
				if !req.Quiet {
					out.Deleted = append(out.Deleted, deletedElem{Key: r.Key})
				}
				continue
			}
			e, internal := toAPIError(r.Err)
			if internal {
				a.log.ErrorContext(rq.ctx, "s3 delete objects: key failed",
					"request_id", rq.id, "bucket", rq.bucket, "key", r.Key, "error", r.Err)
			}
			out.Errors = append(out.Errors, deleteError{Key: r.Key, Code: e.Code, Message: e.Message})
		}
	}
	return writeXML(rq, out)
}
