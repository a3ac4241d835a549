package s3api

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
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
	var body []byte
	if a, ok := v.(xmlAppender); ok {
		body = a.appendXML(make([]byte, 0, 64<<10))
	} else {
		var err error
		if body, err = xml.Marshal(v); err != nil {
			return fmt.Errorf("marshal %T: %w", v, err)
		}
	}
	h := rq.w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(xml.Header)+len(body)))
	rq.w.WriteHeader(http.StatusOK)
	if rq.r.Method == http.MethodHead {
		return nil
	}
	// A write error means the client went away; the answer is already decided.
	_, _ = rq.w.Write([]byte(xml.Header))
	_, _ = rq.w.Write(body)
	return nil
}

// Limits of every XML request body. S3's request bodies are at most five
// elements deep (AccessControlPolicy/AccessControlList/Grant/Grantee/ID) and
// the largest, a CompleteMultipartUpload of 10,000 parts, has about 60,000
// elements; keys are at most 1 KiB. Anything beyond is refused as MalformedXML
// as soon as it is seen, so a hostile body costs neither memory nor CPU.
const (
	maxXMLDepth    = 16
	maxXMLElements = 1 << 17
	// maxXMLToken caps the bytes read for one token (a name, an attribute,
	// a run of text): encoding/xml buffers a token whole.
	maxXMLToken = 256 << 10
)

// errXMLLimit is the cause of a MalformedXML answer for a body beyond the limits.
var errXMLLimit = errors.New("xml body beyond the depth, element or token limit")

// readBody reads the whole (verified) request body, at most limit bytes. The
// body is scanned as it arrives: one beyond the XML limits (depth, element
// count, token size) is MalformedXML at once, without reading the rest. A body
// that is not well-formed is still read whole, so that the handler's own
// parser reports it with its code.
func readBody(rq *request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	lim := &io.LimitedReader{R: rq.body, N: limit + 1}
	tr := &tokenBudget{r: io.TeeReader(lim, &buf)}
	err := scanXML(tr)
	switch {
	case errors.Is(err, errXMLLimit):
		return nil, fmt.Errorf("%w: %w", errMalformedXML, err)
	case tr.err != nil:
		// The body reader failed (a client gone, a bad chunk signature).
		return nil, fmt.Errorf("read request body: %w", tr.err)
	}
	// Well-formed (scanned to EOF) or not: read what is left, still capped.
	if _, err := io.Copy(&buf, lim); err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if int64(buf.Len()) > limit {
		return nil, errMaxMessageLength
	}
	return buf.Bytes(), nil
}

// scanXML reads r token by token (RawToken keeps no element stack) and
// enforces the depth and element limits. It returns nil at EOF, an error
// wrapping errXMLLimit beyond a limit, and any other error (a syntax error,
// or the reader's, which r keeps) otherwise.
func scanXML(r *tokenBudget) error {
	d := xml.NewDecoder(r)
	depth, elements := 0, 0
	for {
		r.used = 0
		tok, err := d.RawToken()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if errors.Is(r.err, errXMLLimit) {
				return r.err
			}
			return err
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
			elements++
			if depth > maxXMLDepth || elements > maxXMLElements {
				return errXMLLimit
			}
		case xml.EndElement:
			depth--
		}
	}
}

// tokenBudget fails a read once more than maxXMLToken bytes were read since
// the scanner last reset used (after every token).
type tokenBudget struct {
	r    io.Reader
	used int
	err  error // the reader's own error, kept to tell it from a syntax error
}

func (t *tokenBudget) Read(p []byte) (int, error) {
	if t.used > maxXMLToken {
		t.err = errXMLLimit
		return 0, t.err
	}
	n, err := t.r.Read(p)
	t.used += n
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
}

// depthLimit is a token stream that refuses nesting beyond maxXMLDepth and
// more than maxXMLElements elements, so decoding never builds a deep stack.
type depthLimit struct {
	d               *xml.Decoder
	depth, elements int
}

func (l *depthLimit) Token() (xml.Token, error) {
	tok, err := l.d.Token()
	if err != nil {
		return tok, err
	}
	switch tok.(type) {
	case xml.StartElement:
		l.depth++
		l.elements++
		if l.depth > maxXMLDepth || l.elements > maxXMLElements {
			return nil, errXMLLimit
		}
	case xml.EndElement:
		l.depth--
	}
	return tok, nil
}

// decodeXML parses data into v; any syntax or shape error, and nesting or
// size beyond the XML limits, is MalformedXML.
func decodeXML(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errMalformedXML
	}
	d := xml.NewTokenDecoder(&depthLimit{d: xml.NewDecoder(bytes.NewReader(data))})
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", errMalformedXML, err) //nolint:errorlint // the parse detail is for logs only
	}
	return nil
}

// s3URLEncode encodes a key or prefix for encoding-type=url as S3 does: query
// escaping, with "/" left readable and a space as "%20" (QueryEscape's "+"
// would decode as a literal "+" in clients that path-unescape; a literal "+"
// is already "%2B").
func s3URLEncode(s string) string { return s3URLFixes.Replace(url.QueryEscape(s)) }

// s3URLFixes turns url.QueryEscape's form into S3's: built once, not per key.
var s3URLFixes = strings.NewReplacer("%2F", "/", "+", "%20")

// xmlAppender is an answer that writes its own XML, byte for byte what
// xml.Marshal writes (listing pages: no reflection per entry).
type xmlAppender interface{ appendXML(b []byte) []byte }

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
