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

	"github.com/s3gate/s3gate/store"
)

type initiateMultipartUploadResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	NS       string   `xml:"xmlns,attr"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	UploadID string   `xml:"UploadId"`
}

func (a *api) createMultipartUpload(rq *request) error {
	h := rq.r.Header
	acl, err := a.writeACL(rq)
	if err != nil {
		return err
	}
	if err := checkWriteFeatures(h); err != nil {
		return err
	}
	meta, err := parseMeta(h)
	if err != nil {
		return err
	}
	meta.ACL = acl // applied at Complete, with the rest of the metadata
	if meta.Lock, err = a.writeLock(rq, false); err != nil {
		return err
	}
	alg, err := parseChecksumAlgorithm(h)
	if err != nil {
		return err
	}
	typ := strings.ToUpper(h.Get("x-amz-checksum-type"))
	switch typ {
	case "", store.ChecksumComposite, store.ChecksumFullObject:
	default:
		return errInvalidRequest.withMessage("Value for x-amz-checksum-type header is invalid.")
	}
	up, err := a.st.CreateMultipartUpload(rq.ctx, rq.bucket, rq.key, meta, alg, typ)
	if err != nil {
		return fmt.Errorf("create upload %q/%q: %w", rq.bucket, rq.key, err)
	}
	if up.ChecksumAlgorithm != "" {
		rq.w.Header().Set("x-amz-checksum-algorithm", up.ChecksumAlgorithm)
		if up.ChecksumType != "" {
			rq.w.Header().Set("x-amz-checksum-type", up.ChecksumType)
		}
	}
	return writeXML(rq, initiateMultipartUploadResult{NS: s3NS, Bucket: rq.bucket, Key: rq.key, UploadID: up.UploadID})
}

func (a *api) uploadPart(rq *request) error {
	part, err := parsePartNumber(rq, true)
	if err != nil {
		return err
	}
	opts, err := putOptions(rq, false)
	if err != nil {
		return err
	}
	opts.PayloadSHA256 = signedPayload(rq)
	info, err := a.st.UploadPart(rq.ctx, rq.bucket, rq.key, rq.q.Get("uploadId"), part, rq.body, opts)
	if err != nil {
		return fmt.Errorf("upload part %d of %q/%q: %w", part, rq.bucket, rq.key, err)
	}
	h := rq.w.Header()
	h.Set("ETag", quoteETag(info.ETag))
	if info.Checksum.Algorithm != "" {
		h.Set(checksumHeaderKey(info.Checksum.Algorithm), info.Checksum.Value)
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

// parseCopyRange reads x-amz-copy-source-range ("bytes=first-last").
func parseCopyRange(v string) (*store.ByteRange, error) {
	if v == "" {
		return nil, nil
	}
	spec, ok := strings.CutPrefix(v, "bytes=")
	if !ok {
		return nil, errInvalidCopyRange
	}
	first, last, ok := strings.Cut(spec, "-")
	if !ok {
		return nil, errInvalidCopyRange
	}
	s, err1 := strconv.ParseInt(first, 10, 64)
	e, err2 := strconv.ParseInt(last, 10, 64)
	if err1 != nil || err2 != nil || s < 0 || e < s {
		return nil, errInvalidCopyRange
	}
	return &store.ByteRange{Start: s, End: e}, nil
}

type copyPartResult struct {
	XMLName      xml.Name `xml:"CopyPartResult"`
	NS           string   `xml:"xmlns,attr"`
	LastModified string   `xml:"LastModified"`
	ETag         string   `xml:"ETag"`
	checksumFields
}

func (a *api) uploadPartCopy(rq *request) error {
	part, err := parsePartNumber(rq, true)
	if err != nil {
		return err
	}
	src, err := parseCopySource(rq.r.Header)
	if err != nil {
		return err
	}
	if src.Range, err = parseCopyRange(rq.r.Header.Get("x-amz-copy-source-range")); err != nil {
		return err
	}
	info, err := a.st.UploadPartCopy(rq.ctx, src, rq.bucket, rq.key, rq.q.Get("uploadId"), part)
	if err != nil {
		return fmt.Errorf("upload part copy %d of %q/%q: %w", part, rq.bucket, rq.key, err)
	}
	if err := a.setCopyVersionHeaders(rq, src, "", info.CopySourceVersionID); err != nil {
		return err
	}
	return writeXML(rq, copyPartResult{
		NS: s3NS, LastModified: xmlTime(orNow(info.LastModified)), ETag: quoteETag(info.ETag),
		checksumFields: checksumXML(info.Checksum),
	})
}

type completeResult struct {
	XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
	NS       string   `xml:"xmlns,attr"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
	checksumFields
	ChecksumType string `xml:"ChecksumType,omitempty"`
}

func (a *api) completeMultipartUpload(rq *request) error {
	if err := checkIfNoneMatchWrite(rq.r.Header); err != nil {
		return err
	}
	parts, err := readCompleteRequest(rq, max(a.cfg.MaxXMLBody, bigXMLBody))
	if err != nil {
		return err
	}
	h := rq.r.Header
	opts := store.PutOptions{Size: -1, IfMatch: h.Get("If-Match"), IfNoneMatch: h.Get("If-None-Match"),
		ChecksumType: strings.ToUpper(h.Get("x-amz-checksum-type"))}
	if opts.Checksums, err = parseChecksumValues(h, true); err != nil {
		return err
	}
	switch opts.ChecksumType {
	case "", store.ChecksumComposite, store.ChecksumFullObject:
	default:
		return errInvalidRequest.withMessage("Value for x-amz-checksum-type header is invalid.")
	}
	if v := h.Get("x-amz-mp-object-size"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return errInvalidMPObjectSize.withMessage("Value for x-amz-mp-object-size header is invalid: '" + v + "'")
		}
		opts.MPObjectSize = &n
	}
	info, err := a.st.CompleteMultipartUpload(rq.ctx, rq.bucket, rq.key, rq.q.Get("uploadId"), parts, opts)
	if err != nil {
		return fmt.Errorf("complete upload of %q/%q: %w", rq.bucket, rq.key, err)
	}
	a.setExpiration(rq, info, info.Meta.Tags)
	if err := a.setVersionHeader(rq, info.VersionID); err != nil {
		return err
	}
	out := completeResult{
		NS: s3NS, Location: a.location(rq), Bucket: rq.bucket, Key: rq.key,
		ETag: quoteETag(info.ETag), checksumFields: checksumXML(info.Checksum),
	}
	if info.Checksum.Algorithm != "" {
		out.ChecksumType = info.Checksum.Type
	}
	return writeXML(rq, out)
}

// readCompleteRequest reads and parses a CompleteMultipartUpload body in one
// pass, with readBody's limits and its answers in its order: MalformedXML at
// once beyond the depth, element or token limit; else a failure of the body
// reader, then MaxMessageLengthExceeded past limit bytes, then the
// document's own errors (parseCompleteRequest's). What follows the root
// element is scanned under the same limits and otherwise ignored, as it was
// when the body was read whole before it was parsed.
func readCompleteRequest(rq *request, limit int64) ([]store.CompletePart, error) {
	lim := &io.LimitedReader{R: rq.body, N: limit + 1}
	tb := &tokenBudget{r: lim}
	src := &budgetedTokens{d: &depthLimit{d: xml.NewDecoder(tb)}, b: tb}
	parts, perr := completeParts(src)
	// Scan on to the first error (the end of the body at best), as readBody
	// does whatever the document holds, so that the limits apply throughout.
	var serr error
	for serr == nil && !errors.Is(perr, errXMLLimit) {
		_, serr = src.Token()
	}
	if errors.Is(perr, errXMLLimit) || errors.Is(serr, errXMLLimit) || errors.Is(tb.err, errXMLLimit) {
		return nil, fmt.Errorf("%w: %w", errMalformedXML, errXMLLimit)
	}
	if tb.err != nil {
		return nil, fmt.Errorf("read request body: %w", tb.err)
	}
	if _, err := io.Copy(io.Discard, lim); err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	if lim.N <= 0 {
		return nil, errMaxMessageLength
	}
	return parts, perr
}

// budgetedTokens resets the token budget before every token, as readBody's
// scan does.
type budgetedTokens struct {
	d *depthLimit
	b *tokenBudget
}

func (t *budgetedTokens) Token() (xml.Token, error) {
	t.b.used = 0
	return t.d.Token()
}

// parseCompleteRequest parses a CompleteMultipartUpload body: 1 to 10000
// parts (MalformedXML otherwise), each with a valid part number.
func parseCompleteRequest(body []byte) ([]store.CompletePart, error) {
	return completeParts(&depthLimit{d: xml.NewDecoder(bytes.NewReader(body))})
}

// completeParts parses a CompleteMultipartUpload document from tokens. It
// walks them itself, with the result encoding/xml would decode into the
// body's struct shape (completeDecoder) at a fraction of the reflective
// decoder's cost per part: a body of 10,000 parts is the largest S3 sends.
func completeParts(tokens xml.TokenReader) ([]store.CompletePart, error) {
	d := &completeDecoder{src: xml.NewTokenDecoder(tokens)}
	parts, err := d.parse()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformedXML, err)
	}
	if len(parts) == 0 || len(parts) > store.MaxPartNumber {
		return nil, errMalformedXML
	}
	for _, p := range parts {
		if p.Number < 1 || p.Number > store.MaxPartNumber {
			return nil, errInvalidPartNumber
		}
	}
	return parts, nil
}

// completeDecoder reads a CompleteMultipartUpload document from a token
// stream: the root element, its Part children, and in each the PartNumber,
// ETag and Checksum* elements (the last of a repeated one wins); other
// elements are skipped, as encoding/xml skips unknown fields.
type completeDecoder struct {
	src  *xml.Decoder
	text []byte // reused buffer of an element's character data
}

func (d *completeDecoder) parse() ([]store.CompletePart, error) {
	for {
		tok, err := d.src.Token()
		if err != nil {
			return nil, err
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "CompleteMultipartUpload" {
				return nil, fmt.Errorf("expected element <CompleteMultipartUpload>, have <%s>", se.Name.Local)
			}
			break
		}
	}
	var parts []store.CompletePart
	for {
		tok, err := d.src.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local != "Part" {
				if err := d.src.Skip(); err != nil {
					return nil, err
				}
				continue
			}
			p, err := d.part()
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case xml.EndElement:
			return parts, nil
		}
	}
}

// part reads one Part element after its start.
func (d *completeDecoder) part() (store.CompletePart, error) {
	var p store.CompletePart
	var sums checksumFields
	for {
		tok, err := d.src.Token()
		if err != nil {
			return p, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			var dst *string
			if alg, ok := strings.CutPrefix(name, "Checksum"); ok {
				dst = sums.field(alg)
			}
			if dst == nil && name != "PartNumber" && name != "ETag" {
				if err := d.src.Skip(); err != nil {
					return p, err
				}
				continue
			}
			text, err := d.chardata()
			if err != nil {
				return p, err
			}
			switch {
			case dst != nil:
				*dst = string(text)
			case name == "ETag":
				p.ETag = unquoteETag(string(text))
			case len(text) == 0: // an empty PartNumber is 0, as encoding/xml has it
				p.Number = 0
			default:
				n, err := strconv.ParseInt(string(bytes.TrimSpace(text)), 10, strconv.IntSize)
				if err != nil {
					return p, fmt.Errorf("PartNumber: %w", err)
				}
				p.Number = int(n)
			}
		case xml.EndElement:
			p.Checksums = sums.checksumMap()
			return p, nil
		}
	}
}

// chardata returns the character data directly inside the element just
// started, through its end; nested elements are skipped. The slice is valid
// until the next call.
func (d *completeDecoder) chardata() ([]byte, error) {
	d.text = d.text[:0]
	for {
		tok, err := d.src.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.CharData:
			d.text = append(d.text, t...)
		case xml.StartElement:
			if err := d.src.Skip(); err != nil {
				return nil, err
			}
		case xml.EndElement:
			return d.text, nil
		}
	}
}

// location is the object's URL as the client addressed the gateway.
func (a *api) location(rq *request) string {
	scheme := "http"
	if rq.r.TLS != nil {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: rq.r.Host}
	if vhostBucket(rq.r.Host, a.cfg.Domain) != "" {
		u.Path = "/" + rq.key
	} else {
		u.Path = "/" + rq.bucket + "/" + rq.key
	}
	return u.String()
}

func (a *api) abortMultipartUpload(rq *request) error {
	if err := a.st.AbortMultipartUpload(rq.ctx, rq.bucket, rq.key, rq.q.Get("uploadId")); err != nil {
		return fmt.Errorf("abort upload of %q/%q: %w", rq.bucket, rq.key, err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

type partElem struct {
	PartNumber   int    `xml:"PartNumber"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag"`
	Size         int64  `xml:"Size"`
	checksumFields
}

type listPartsResult struct {
	XMLName              xml.Name   `xml:"ListPartsResult"`
	NS                   string     `xml:"xmlns,attr"`
	Bucket               string     `xml:"Bucket"`
	Key                  string     `xml:"Key"`
	UploadID             string     `xml:"UploadId"`
	Initiator            *owner     `xml:"Initiator"`
	Owner                *owner     `xml:"Owner"`
	StorageClass         string     `xml:"StorageClass"`
	PartNumberMarker     int        `xml:"PartNumberMarker"`
	NextPartNumberMarker int        `xml:"NextPartNumberMarker"`
	MaxParts             int        `xml:"MaxParts"`
	IsTruncated          bool       `xml:"IsTruncated"`
	ChecksumAlgorithm    string     `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType         string     `xml:"ChecksumType,omitempty"`
	Parts                []partElem `xml:"Part"`
}

func (a *api) listParts(rq *request) error {
	marker, err := parseIntParam(rq, "part-number-marker", 0, errInvalidArgument.withMessage("Invalid part-number-marker"))
	if err != nil {
		return err
	}
	maxParts, err := parseIntParam(rq, "max-parts", maxListKeys, errInvalidArgument.withMessage("Invalid max-parts"))
	if err != nil {
		return err
	}
	maxParts = min(maxParts, maxListKeys)
	uploadID := rq.q.Get("uploadId")
	// max-parts=0 is an empty page, as max-keys=0 is; the store reads 0 as
	// its default, so one part is read (the upload must still exist) and
	// dropped.
	res, err := a.st.ListParts(rq.ctx, rq.bucket, rq.key, uploadID, marker, max(maxParts, 1))
	if err != nil {
		return fmt.Errorf("list parts of %q/%q: %w", rq.bucket, rq.key, err)
	}
	if maxParts == 0 {
		res.Parts, res.Truncated, res.NextPartNumberMarker = nil, false, 0
	}
	own := ownerOf(rq)
	out := listPartsResult{
		NS: s3NS, Bucket: rq.bucket, Key: rq.key, UploadID: uploadID, Initiator: own, Owner: own,
		StorageClass: storageClassName(res.Upload.Meta), PartNumberMarker: marker, NextPartNumberMarker: res.NextPartNumberMarker,
		MaxParts: maxParts, IsTruncated: res.Truncated,
		ChecksumAlgorithm: res.Upload.ChecksumAlgorithm, ChecksumType: res.Upload.ChecksumType,
		Parts: make([]partElem, 0, len(res.Parts)),
	}
	for _, p := range res.Parts {
		out.Parts = append(out.Parts, partElem{
			PartNumber: p.Number, LastModified: xmlTime(orNow(p.LastModified)), ETag: quoteETag(p.ETag),
			Size: p.Size, checksumFields: checksumXML(p.Checksum),
		})
	}
	return writeXML(rq, out)
}

type uploadElem struct {
	Key               string `xml:"Key"`
	UploadID          string `xml:"UploadId"`
	Initiator         *owner `xml:"Initiator"`
	Owner             *owner `xml:"Owner"`
	StorageClass      string `xml:"StorageClass"`
	Initiated         string `xml:"Initiated"`
	ChecksumAlgorithm string `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType      string `xml:"ChecksumType,omitempty"`
}

type listMultipartUploadsResult struct {
	XMLName            xml.Name     `xml:"ListMultipartUploadsResult"`
	NS                 string       `xml:"xmlns,attr"`
	Bucket             string       `xml:"Bucket"`
	KeyMarker          string       `xml:"KeyMarker"`
	UploadIDMarker     string       `xml:"UploadIdMarker"`
	NextKeyMarker      string       `xml:"NextKeyMarker"`
	NextUploadIDMarker string       `xml:"NextUploadIdMarker"`
	Prefix             string       `xml:"Prefix"`
	Delimiter          string       `xml:"Delimiter,omitempty"`
	MaxUploads         int          `xml:"MaxUploads"`
	EncodingType       string       `xml:"EncodingType,omitempty"`
	IsTruncated        bool         `xml:"IsTruncated"`
	Uploads            []uploadElem `xml:"Upload"`
	CommonPrefixes     []prefixElem `xml:"CommonPrefixes"`
}

func (a *api) listMultipartUploads(rq *request) error {
	enc, encType, err := parseEncodingType(rq.q)
	if err != nil {
		return err
	}
	maxUploads, err := parseIntParam(rq, "max-uploads", maxListKeys, errInvalidArgument.withMessage("Invalid max-uploads"))
	if err != nil {
		return err
	}
	maxUploads = min(maxUploads, maxListKeys)
	// AWS ignores upload-id-marker without key-marker, and refuses one that
	// cannot name an upload.
	if rq.q.Get("key-marker") != "" && rq.q.Get("upload-id-marker") != "" && !store.ValidUploadID(rq.q.Get("upload-id-marker")) {
		return errInvalidArgument.withMessage("Invalid uploadId marker")
	}
	p := store.ListUploadsParams{
		Prefix: rq.q.Get("prefix"), Delimiter: rq.q.Get("delimiter"),
		KeyMarker: rq.q.Get("key-marker"), UploadIDMarker: rq.q.Get("upload-id-marker"),
		MaxUploads: maxUploads,
	}
	// max-uploads=0 is an empty page, as max-keys=0 is (the store reads 0 as
	// its default): only the bucket is checked.
	var res store.ListUploadsResult
	if maxUploads == 0 {
		_, err = a.st.HeadBucket(rq.ctx, rq.bucket)
	} else {
		res, err = a.st.ListMultipartUploads(rq.ctx, rq.bucket, p)
	}
	if err != nil {
		return fmt.Errorf("list uploads of %q: %w", rq.bucket, err)
	}
	own := ownerOf(rq)
	out := listMultipartUploadsResult{
		NS: s3NS, Bucket: rq.bucket, KeyMarker: enc.enc(p.KeyMarker), UploadIDMarker: p.UploadIDMarker,
		NextKeyMarker: enc.enc(res.NextKeyMarker), NextUploadIDMarker: res.NextUploadIDMarker,
		Prefix: enc.enc(p.Prefix), Delimiter: enc.enc(p.Delimiter), MaxUploads: maxUploads,
		EncodingType: encType, IsTruncated: res.Truncated,
		Uploads: make([]uploadElem, 0, len(res.Uploads)),
	}
	for _, u := range res.Uploads {
		out.Uploads = append(out.Uploads, uploadElem{
			Key: enc.enc(u.Key), UploadID: u.UploadID, Initiator: own, Owner: own,
			StorageClass: storageClassName(u.Meta), Initiated: xmlTime(orNow(u.Initiated)),
			ChecksumAlgorithm: u.ChecksumAlgorithm, ChecksumType: u.ChecksumType,
		})
	}
	for _, cp := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixElem{Prefix: enc.enc(cp)})
	}
	return writeXML(rq, &out)
}
