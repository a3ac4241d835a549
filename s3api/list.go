package s3api

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/s3gate/s3gate/store"
)

const maxListKeys = 1000

type objectElem struct {
	Key          string `xml:"Key"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	StorageClass string `xml:"StorageClass"`
	Owner        *owner `xml:"Owner,omitempty"`
	// ChecksumAlgorithm names the algorithm of the stored checksum.
	ChecksumAlgorithm string `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType      string `xml:"ChecksumType,omitempty"`
}

type prefixElem struct {
	Prefix string `xml:"Prefix"`
}

type listBucketResultV2 struct {
	XMLName               xml.Name     `xml:"ListBucketResult"`
	NS                    string       `xml:"xmlns,attr"`
	Name                  string       `xml:"Name"`
	Prefix                string       `xml:"Prefix"`
	Delimiter             *string      `xml:"Delimiter"`
	MaxKeys               int          `xml:"MaxKeys"`
	EncodingType          string       `xml:"EncodingType,omitempty"`
	KeyCount              int          `xml:"KeyCount"`
	IsTruncated           bool         `xml:"IsTruncated"`
	ContinuationToken     *string      `xml:"ContinuationToken"`
	NextContinuationToken string       `xml:"NextContinuationToken,omitempty"`
	StartAfter            *string      `xml:"StartAfter"`
	Contents              []objectElem `xml:"Contents"`
	CommonPrefixes        []prefixElem `xml:"CommonPrefixes"`
}

type listBucketResultV1 struct {
	XMLName        xml.Name     `xml:"ListBucketResult"`
	NS             string       `xml:"xmlns,attr"`
	Name           string       `xml:"Name"`
	Prefix         string       `xml:"Prefix"`
	Marker         string       `xml:"Marker"`
	NextMarker     string       `xml:"NextMarker,omitempty"`
	MaxKeys        int          `xml:"MaxKeys"`
	Delimiter      *string      `xml:"Delimiter"`
	EncodingType   string       `xml:"EncodingType,omitempty"`
	IsTruncated    bool         `xml:"IsTruncated"`
	Contents       []objectElem `xml:"Contents"`
	CommonPrefixes []prefixElem `xml:"CommonPrefixes"`
}

// textParams are the query parameters that carry keys, markers or ids. No
// key can hold a NUL or invalid UTF-8 (store.ValidateKey refuses them), so
// neither can a marker; the engines never see them.
var textParams = []string{"prefix", "marker", "start-after", "key-marker", "version-id-marker",
	"upload-id-marker", "uploadId", "continuation-token", "delimiter"}

// checkTextParams refuses a NUL or invalid UTF-8 in any of textParams with
// InvalidArgument (on every operation: uploadId is not only a list parameter).
func checkTextParams(q url.Values) error {
	for _, name := range textParams {
		for _, v := range q[name] {
			if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				return errInvalidArgument.withMessage("The " + name + " parameter must be valid UTF-8 without NUL characters.")
			}
		}
	}
	return nil
}

// parseMaxKeys reads max-keys: 0..1000 (larger values are clamped as AWS does);
// negative or non-numeric values are InvalidArgument.
func parseMaxKeys(rq *request, name string) (int, error) {
	n, err := parseIntParam(rq, name, maxListKeys, errInvalidMaxKeys)
	if err != nil {
		return 0, err
	}
	return min(n, maxListKeys), nil
}

// list runs one listing page; max-keys 0 only checks the bucket.
func (a *api) list(rq *request, p store.ListParams) (store.ListResult, error) {
	if p.MaxKeys == 0 {
		if _, err := a.st.HeadBucket(rq.ctx, rq.bucket); err != nil {
			return store.ListResult{}, fmt.Errorf("list %q: %w", rq.bucket, err)
		}
		return store.ListResult{}, nil
	}
	res, err := a.st.ListObjects(rq.ctx, rq.bucket, p)
	if err != nil {
		return res, fmt.Errorf("list %q: %w", rq.bucket, err)
	}
	return res, nil
}

func objectElems(res store.ListResult, enc encoder, own *owner) ([]objectElem, []prefixElem) {
	objs := make([]objectElem, 0, len(res.Objects))
	for _, o := range res.Objects {
		objs = append(objs, objectElem{
			Key: enc.enc(o.Key), LastModified: xmlTime(orNow(o.LastModified)),
			ETag: quoteETag(o.ETag), Size: o.Size, StorageClass: storageClassName(o.Meta), Owner: own,
			ChecksumAlgorithm: o.Checksum.Algorithm, ChecksumType: checksumType(o.Checksum),
		})
	}
	prefixes := make([]prefixElem, 0, len(res.CommonPrefixes))
	for _, p := range res.CommonPrefixes {
		prefixes = append(prefixes, prefixElem{Prefix: enc.enc(p)})
	}
	return objs, prefixes
}

func (a *api) listObjectsV2(rq *request) error {
	enc, encType, err := parseEncodingType(rq.q)
	if err != nil {
		return err
	}
	maxKeys, err := parseMaxKeys(rq, "max-keys")
	if err != nil {
		return err
	}
	// An empty continuation-token lists from the start and is echoed empty,
	// as AWS answers it; a token we did not issue is InvalidArgument.
	var token *string
	after := rq.q.Get("start-after")
	if rq.q.Has("continuation-token") {
		t := rq.q.Get("continuation-token")
		token = &t
		raw, err := base64.StdEncoding.DecodeString(t)
		if err != nil {
			return errInvalidToken
		}
		after = max(after, string(raw))
	}
	p := store.ListParams{Prefix: rq.q.Get("prefix"), Delimiter: rq.q.Get("delimiter"), After: after, MaxKeys: maxKeys}
	res, err := a.list(rq, p)
	if err != nil {
		return err
	}
	var own *owner
	if rq.q.Get("fetch-owner") == "true" {
		own = ownerOf(rq)
	}
	objs, prefixes := objectElems(res, enc, own)
	out := listBucketResultV2{
		NS: s3NS, Name: rq.bucket, Prefix: enc.enc(p.Prefix), Delimiter: givenDelimiter(rq, enc),
		MaxKeys: maxKeys, EncodingType: encType, KeyCount: len(objs) + len(prefixes),
		IsTruncated: res.Truncated, ContinuationToken: token, StartAfter: given(rq, "start-after", enc),
		Contents: objs, CommonPrefixes: prefixes,
	}
	if res.Truncated {
		out.NextContinuationToken = base64.StdEncoding.EncodeToString([]byte(res.NextAfter))
	}
	return writeXML(rq, &out)
}

func (a *api) listObjectsV1(rq *request) error {
	enc, encType, err := parseEncodingType(rq.q)
	if err != nil {
		return err
	}
	maxKeys, err := parseMaxKeys(rq, "max-keys")
	if err != nil {
		return err
	}
	p := store.ListParams{Prefix: rq.q.Get("prefix"), Delimiter: rq.q.Get("delimiter"), After: rq.q.Get("marker"), MaxKeys: maxKeys}
	res, err := a.list(rq, p)
	if err != nil {
		return err
	}
	objs, prefixes := objectElems(res, enc, ownerOf(rq))
	out := listBucketResultV1{
		NS: s3NS, Name: rq.bucket, Prefix: enc.enc(p.Prefix), Marker: enc.enc(p.After),
		MaxKeys: maxKeys, Delimiter: givenDelimiter(rq, enc), EncodingType: encType,
		IsTruncated: res.Truncated, Contents: objs, CommonPrefixes: prefixes,
	}
	// AWS sends NextMarker only with a delimiter; without one clients use the
	// last key.
	if res.Truncated && p.Delimiter != "" {
		out.NextMarker = enc.enc(res.NextAfter)
	}
	return writeXML(rq, &out)
}

// givenDelimiter is the (encoded) delimiter to echo: AWS echoes a delimiter
// only when it is not empty (an empty delimiter= groups nothing and is not
// echoed).
func givenDelimiter(rq *request, enc encoder) *string {
	if rq.q.Get("delimiter") == "" {
		return nil
	}
	return given(rq, "delimiter", enc)
}

// given returns the (encoded) query parameter name when the request named it,
// even empty, and nil otherwise: AWS echoes <StartAfter/> exactly when it
// was given, and botocore indexes it when present.
func given(rq *request, name string, enc encoder) *string {
	if !rq.q.Has(name) {
		return nil
	}
	v := enc.enc(rq.q.Get(name))
	return &v
}

// checksumType is the ChecksumType AWS reports for a stored checksum: a
// single put's checksum is FULL_OBJECT; "" when there is none.
func checksumType(c store.Checksum) string {
	if c.Algorithm == "" {
		return ""
	}
	if c.Type == "" {
		return store.ChecksumFullObject
	}
	return c.Type
}

// A listing page (ListObjects V1 and V2, ListObjectVersions,
// ListMultipartUploads) is encoded by hand, not by xml.Marshal: reflection
// over a thousand entries was most of the gateway's CPU per listed key. The appenders
// write exactly what xml.Marshal writes for the same struct (fields in order,
// omitempty and nil pointers left out, text escaped by encoding/xml's rules);
// TestListXMLMatchesMarshal holds them to it.

func (r *listBucketResultV2) appendXML(b []byte) []byte {
	b = xmlOpenNS(b, "ListBucketResult", r.NS)
	b = xmlElem(b, "Name", r.Name)
	b = xmlElem(b, "Prefix", r.Prefix)
	b = xmlElemPtr(b, "Delimiter", r.Delimiter)
	b = xmlInt(b, "MaxKeys", int64(r.MaxKeys))
	b = xmlElemOmit(b, "EncodingType", r.EncodingType)
	b = xmlInt(b, "KeyCount", int64(r.KeyCount))
	b = xmlBool(b, "IsTruncated", r.IsTruncated)
	b = xmlElemPtr(b, "ContinuationToken", r.ContinuationToken)
	b = xmlElemOmit(b, "NextContinuationToken", r.NextContinuationToken)
	b = xmlElemPtr(b, "StartAfter", r.StartAfter)
	b = appendEntries(b, r.Contents, r.CommonPrefixes)
	return append(b, "</ListBucketResult>"...)
}

func (r *listBucketResultV1) appendXML(b []byte) []byte {
	b = xmlOpenNS(b, "ListBucketResult", r.NS)
	b = xmlElem(b, "Name", r.Name)
	b = xmlElem(b, "Prefix", r.Prefix)
	b = xmlElem(b, "Marker", r.Marker)
	b = xmlElemOmit(b, "NextMarker", r.NextMarker)
	b = xmlInt(b, "MaxKeys", int64(r.MaxKeys))
	b = xmlElemPtr(b, "Delimiter", r.Delimiter)
	b = xmlElemOmit(b, "EncodingType", r.EncodingType)
	b = xmlBool(b, "IsTruncated", r.IsTruncated)
	b = appendEntries(b, r.Contents, r.CommonPrefixes)
	return append(b, "</ListBucketResult>"...)
}

// appendEntries appends Contents and CommonPrefixes elements.
func appendEntries(b []byte, objs []objectElem, prefixes []prefixElem) []byte {
	start := len(b)
	for i := range objs {
		o := &objs[i]
		b = append(b, "<Contents>"...)
		b = xmlElem(b, "Key", o.Key)
		b = xmlElem(b, "LastModified", o.LastModified)
		b = xmlElem(b, "ETag", o.ETag)
		b = xmlInt(b, "Size", o.Size)
		b = xmlElem(b, "StorageClass", o.StorageClass)
		b = xmlOwner(b, "Owner", o.Owner)
		b = xmlElemOmit(b, "ChecksumAlgorithm", o.ChecksumAlgorithm)
		b = xmlElemOmit(b, "ChecksumType", o.ChecksumType)
		b = append(b, "</Contents>"...)
		b = growLike(b, start, i, len(objs))
	}
	return appendPrefixes(b, prefixes)
}

// growLike makes room in b, after entry i of n (written from start on), for
// the rest of the entries at the first one's size and a margin: a page is
// then one or two allocations, not a doubling copy per size class.
func growLike(b []byte, start, i, n int) []byte {
	if i != 0 {
		return b
	}
	return slices.Grow(b, (len(b)-start)*(n-1)*9/8+1024)
}

// appendPrefixes appends CommonPrefixes elements.
func appendPrefixes(b []byte, prefixes []prefixElem) []byte {
	for _, p := range prefixes {
		b = append(b, "<CommonPrefixes>"...)
		b = xmlElem(b, "Prefix", p.Prefix)
		b = append(b, "</CommonPrefixes>"...)
	}
	return b
}

// appendXML writes the entries' element names from their XMLName.Local,
// which the handler always sets (xml.Marshal would name an unnamed one
// Entries).
func (r *listVersionsResult) appendXML(b []byte) []byte {
	b = xmlOpenNS(b, "ListVersionsResult", r.NS)
	b = xmlElem(b, "Name", r.Name)
	b = xmlElem(b, "Prefix", r.Prefix)
	b = xmlElem(b, "KeyMarker", r.KeyMarker)
	b = xmlElem(b, "VersionIdMarker", r.VersionIDMarker)
	b = xmlElemOmit(b, "NextKeyMarker", r.NextKeyMarker)
	b = xmlElemOmit(b, "NextVersionIdMarker", r.NextVersionIDMarker)
	b = xmlInt(b, "MaxKeys", int64(r.MaxKeys))
	b = xmlElemPtr(b, "Delimiter", r.Delimiter)
	b = xmlElemOmit(b, "EncodingType", r.EncodingType)
	b = xmlBool(b, "IsTruncated", r.IsTruncated)
	start := len(b)
	for i := range r.Entries {
		e := &r.Entries[i]
		b = append(append(append(b, '<'), e.XMLName.Local...), '>')
		b = xmlElem(b, "Key", e.Key)
		b = xmlElem(b, "VersionId", e.VersionID)
		b = xmlBool(b, "IsLatest", e.IsLatest)
		b = xmlElem(b, "LastModified", e.LastModified)
		b = xmlElemOmit(b, "ETag", e.ETag)
		if e.Size != nil {
			b = xmlInt(b, "Size", *e.Size)
		}
		b = xmlElemOmit(b, "StorageClass", e.StorageClass)
		b = xmlOwner(b, "Owner", e.Owner)
		b = xmlElemOmit(b, "ChecksumAlgorithm", e.ChecksumAlgorithm)
		b = xmlElemOmit(b, "ChecksumType", e.ChecksumType)
		b = append(append(append(b, "</"...), e.XMLName.Local...), '>')
		b = growLike(b, start, i, len(r.Entries))
	}
	b = appendPrefixes(b, r.CommonPrefixes)
	return append(b, "</ListVersionsResult>"...)
}

func (r *listMultipartUploadsResult) appendXML(b []byte) []byte {
	b = xmlOpenNS(b, "ListMultipartUploadsResult", r.NS)
	b = xmlElem(b, "Bucket", r.Bucket)
	b = xmlElem(b, "KeyMarker", r.KeyMarker)
	b = xmlElem(b, "UploadIdMarker", r.UploadIDMarker)
	b = xmlElem(b, "NextKeyMarker", r.NextKeyMarker)
	b = xmlElem(b, "NextUploadIdMarker", r.NextUploadIDMarker)
	b = xmlElem(b, "Prefix", r.Prefix)
	b = xmlElemOmit(b, "Delimiter", r.Delimiter)
	b = xmlInt(b, "MaxUploads", int64(r.MaxUploads))
	b = xmlElemOmit(b, "EncodingType", r.EncodingType)
	b = xmlBool(b, "IsTruncated", r.IsTruncated)
	start := len(b)
	for i := range r.Uploads {
		u := &r.Uploads[i]
		b = append(b, "<Upload>"...)
		b = xmlElem(b, "Key", u.Key)
		b = xmlElem(b, "UploadId", u.UploadID)
		b = xmlOwner(b, "Initiator", u.Initiator)
		b = xmlOwner(b, "Owner", u.Owner)
		b = xmlElem(b, "StorageClass", u.StorageClass)
		b = xmlElem(b, "Initiated", u.Initiated)
		b = xmlElemOmit(b, "ChecksumAlgorithm", u.ChecksumAlgorithm)
		b = xmlElemOmit(b, "ChecksumType", u.ChecksumType)
		b = append(b, "</Upload>"...)
		b = growLike(b, start, i, len(r.Uploads))
	}
	b = appendPrefixes(b, r.CommonPrefixes)
	return append(b, "</ListMultipartUploadsResult>"...)
}

// xmlOwner appends an owner element named name; nil writes nothing.
func xmlOwner(b []byte, name string, o *owner) []byte {
	if o == nil {
		return b
	}
	b = append(append(append(b, '<'), name...), '>')
	b = xmlElem(b, "ID", o.ID)
	b = xmlElem(b, "DisplayName", o.DisplayName)
	return append(append(append(b, "</"...), name...), '>')
}

// xmlOpenNS appends the opening tag of name with its xmlns attribute.
func xmlOpenNS(b []byte, name, ns string) []byte {
	b = append(append(append(b, '<'), name...), ` xmlns="`...)
	return append(xmlEscape(b, ns), `">`...)
}

// xmlElem appends <name>text</name>, text escaped.
func xmlElem(b []byte, name, text string) []byte {
	b = append(append(append(b, '<'), name...), '>')
	b = xmlEscape(b, text)
	return append(append(append(b, "</"...), name...), '>')
}

// xmlElemOmit is xmlElem for an omitempty field.
func xmlElemOmit(b []byte, name, text string) []byte {
	if text == "" {
		return b
	}
	return xmlElem(b, name, text)
}

// xmlElemPtr is xmlElem for a *string field: nil writes nothing.
func xmlElemPtr(b []byte, name string, text *string) []byte {
	if text == nil {
		return b
	}
	return xmlElem(b, name, *text)
}

func xmlInt(b []byte, name string, n int64) []byte {
	b = append(append(append(b, '<'), name...), '>')
	b = strconv.AppendInt(b, n, 10)
	return append(append(append(b, "</"...), name...), '>')
}

func xmlBool(b []byte, name string, v bool) []byte { return xmlElem(b, name, strconv.FormatBool(v)) }

// xmlEscape appends s escaped as encoding/xml escapes text and attribute
// values: the five markup characters and tab, newline and carriage return
// as character references, and a code point XML cannot hold (or a byte of
// invalid UTF-8) as U+FFFD.
func xmlEscape(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); {
		c, width := s[i], 1
		esc := ""
		if c < utf8.RuneSelf {
			if esc = xmlEscapes[c]; esc == "" && c >= 0x20 {
				i++ // the common case: printable ASCII that needs nothing
				continue
			}
		} else {
			var r rune
			r, width = utf8.DecodeRuneInString(s[i:])
			if xmlChar(r) && (r != utf8.RuneError || width > 1) {
				i += width
				continue
			}
		}
		if esc == "" {
			esc = "\uFFFD" // a control character, or what XML cannot hold
		}
		b = append(append(b, s[last:i]...), esc...)
		i += width
		last = i
	}
	return append(b, s[last:]...)
}

// xmlEscapes are encoding/xml's escapes of ASCII characters.
var xmlEscapes = [utf8.RuneSelf]string{'"': "&#34;", '\'': "&#39;", '&': "&amp;", '<': "&lt;", '>': "&gt;",
	'\t': "&#x9;", '\n': "&#xA;", '\r': "&#xD;"}

// xmlChar reports whether XML 1.0 allows r (its Char production).
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}
