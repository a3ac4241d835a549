package s3api

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/s3gate/s3gate/store"
)

// s3NS is the S3 XML namespace of every answer.
const s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"

// xmlTime formats t as S3 does in XML: ISO 8601, UTC, milliseconds.
func xmlTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// httpTime formats t for headers (RFC 1123, GMT).
func httpTime(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

// quoteETag returns the ETag in quotes, as S3 sends it in headers and XML.
func quoteETag(etag string) string {
	if etag == "" {
		return ""
	}
	return `"` + strings.Trim(etag, `"`) + `"`
}

// unquoteETag strips surrounding spaces and quotes from a client-sent ETag.
func unquoteETag(etag string) string {
	return strings.Trim(strings.TrimSpace(etag), `"`)
}

// writeXML answers 200 with v as the XML body.
func writeXML(rq *request, v any) error {
	body, err := xml.Marshal(v)
	if err != nil {
		return fmt.Errorf("marshal %T: %w", v, err)
	}
	h := rq.w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", fmt.Sprint(len(xml.Header)+len(body)))
	rq.w.WriteHeader(http.StatusOK)
	if rq.r.Method == http.MethodHead {
		return nil
	}
	// A write error means the client went away; the answer is already decided.
	_, _ = rq.w.Write([]byte(xml.Header))
	_, _ = rq.w.Write(body)
	return nil
}

// readBody reads the whole (verified) request body, at most limit bytes.
func readBody(rq *request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(rq.body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, errMaxMessageLength
	}
	return data, nil
}

// decodeXML parses data into v; any syntax or shape error is MalformedXML.
func decodeXML(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errMalformedXML
	}
	if err := xml.NewDecoder(bytes.NewReader(data)).Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errMalformedXML, err) //nolint:errorlint // the parse detail is for logs only
	}
	return nil
}

// s3URLEncode encodes a key or prefix for encoding-type=url as S3 does: query
// escaping, with "/" left readable.
func s3URLEncode(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/")
}

// encoder applies encoding-type=url when requested.
type encoder bool

func (e encoder) enc(s string) string {
	if e {
		return s3URLEncode(s)
	}
	return s
}

func parseEncodingType(q url.Values) (encoder, string, error) {
	switch et := q.Get("encoding-type"); et {
	case "":
		return false, "", nil
	case "url":
		return true, et, nil
	default:
		return false, "", errInvalidEncodingType
	}
}

// owner is the Owner / Initiator element.
type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

func ownerOf(rq *request) *owner { return &owner{ID: rq.accessKey, DisplayName: rq.accessKey} }

// checksumFields are the ChecksumXXX elements of object and part entries.
type checksumFields struct {
	ChecksumCRC32     string `xml:"ChecksumCRC32,omitempty"`
	ChecksumCRC32C    string `xml:"ChecksumCRC32C,omitempty"`
	ChecksumCRC64NVME string `xml:"ChecksumCRC64NVME,omitempty"`
	ChecksumSHA1      string `xml:"ChecksumSHA1,omitempty"`
	ChecksumSHA256    string `xml:"ChecksumSHA256,omitempty"`
	ChecksumMD5       string `xml:"ChecksumMD5,omitempty"`
	ChecksumSHA512    string `xml:"ChecksumSHA512,omitempty"`
	ChecksumXXHASH64  string `xml:"ChecksumXXHASH64,omitempty"`
	ChecksumXXHASH3   string `xml:"ChecksumXXHASH3,omitempty"`
	ChecksumXXHASH128 string `xml:"ChecksumXXHASH128,omitempty"`
}

// field returns the element of f that carries alg's value (nil if none).
func (f *checksumFields) field(alg string) *string {
	switch alg {
	case store.AlgCRC32:
		return &f.ChecksumCRC32
	case store.AlgCRC32C:
		return &f.ChecksumCRC32C
	case store.AlgCRC64NVME:
		return &f.ChecksumCRC64NVME
	case store.AlgSHA1:
		return &f.ChecksumSHA1
	case store.AlgSHA256:
		return &f.ChecksumSHA256
	case store.AlgMD5:
		return &f.ChecksumMD5
	case store.AlgSHA512:
		return &f.ChecksumSHA512
	case store.AlgXXHASH64:
		return &f.ChecksumXXHASH64
	case store.AlgXXHASH3:
		return &f.ChecksumXXHASH3
	case store.AlgXXHASH128:
		return &f.ChecksumXXHASH128
	}
	return nil
}

func checksumXML(c store.Checksum) checksumFields {
	var f checksumFields
	if p := f.field(c.Algorithm); p != nil {
		*p = c.Value
	}
	return f
}

// checksumMap returns the non-empty checksums of f by algorithm.
func (f checksumFields) checksumMap() map[string]string {
	m := map[string]string{}
	for _, alg := range store.ChecksumAlgorithms() {
		if v := strings.TrimSpace(*f.field(alg)); v != "" {
			m[alg] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}
