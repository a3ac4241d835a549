package s3api

import (
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"

	"github.com/s3gate/s3gate/store"
)

// Object attributes that x-amz-object-attributes may name.
const (
	attrETag         = "ETag"
	attrChecksum     = "Checksum"
	attrObjectParts  = "ObjectParts"
	attrStorageClass = "StorageClass"
	attrObjectSize   = "ObjectSize"
)

// parseObjectAttributes reads x-amz-object-attributes: a comma-separated list
// (possibly over several header lines) of attribute names, at least one.
// Names compare exactly, as AWS does; anything else is InvalidArgument.
func parseObjectAttributes(values []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, v := range values {
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			switch name {
			case "":
				continue
			case attrETag, attrChecksum, attrObjectParts, attrStorageClass, attrObjectSize:
				out[name] = true
			default:
				return nil, errInvalidAttributeName
			}
		}
	}
	if len(out) == 0 {
		return nil, errInvalidAttributeName.withMessage("The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty")
	}
	return out, nil
}

type attrChecksumElem struct {
	checksumFields
	ChecksumType string `xml:"ChecksumType,omitempty"`
}

type attrPartElem struct {
	PartNumber int   `xml:"PartNumber"`
	Size       int64 `xml:"Size"`
	checksumFields
}

type attrPartsElem struct {
	PartsCount           int            `xml:"PartsCount"`
	PartNumberMarker     int            `xml:"PartNumberMarker"`
	NextPartNumberMarker int            `xml:"NextPartNumberMarker"`
	MaxParts             int            `xml:"MaxParts"`
	IsTruncated          bool           `xml:"IsTruncated"`
	Parts                []attrPartElem `xml:"Part"`
}

type getObjectAttributesResponse struct {
	XMLName      xml.Name          `xml:"GetObjectAttributesResponse"`
	NS           string            `xml:"xmlns,attr"`
	ETag         string            `xml:"ETag,omitempty"`
	Checksum     *attrChecksumElem `xml:"Checksum"`
	ObjectParts  *attrPartsElem    `xml:"ObjectParts"`
	StorageClass string            `xml:"StorageClass,omitempty"`
	ObjectSize   *int64            `xml:"ObjectSize"`
}

// parseHeaderInt reads an optional non-negative integer header.
func parseHeaderInt(v string, def int, bad *apiError) (int, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, bad
	}
	return n, nil
}

// getObjectAttributes answers GetObjectAttributes from the object's metadata
// alone (no content is opened). As AWS does: the ETag is unquoted; a
// COMPOSITE checksum is given without its "-N" part-count suffix (the count is
// ObjectParts.PartsCount); ObjectParts appears only for multipart objects,
// paged by x-amz-max-parts / x-amz-part-number-marker.
func (a *api) getObjectAttributes(rq *request) error {
	if _, err := versionParam(rq); err != nil {
		return err
	}
	want, err := parseObjectAttributes(rq.r.Header.Values("X-Amz-Object-Attributes"))
	if err != nil {
		return err
	}
	maxParts, err := parseHeaderInt(rq.r.Header.Get("X-Amz-Max-Parts"), maxListKeys, errInvalidArgument.withMessage("Invalid x-amz-max-parts"))
	if err != nil {
		return err
	}
	maxParts = min(maxParts, maxListKeys)
	marker, err := parseHeaderInt(rq.r.Header.Get("X-Amz-Part-Number-Marker"), 0, errInvalidArgument.withMessage("Invalid x-amz-part-number-marker"))
	if err != nil {
		return err
	}
	info, err := a.headVersion(rq)
	if err != nil {
		return err
	}
	if err := a.setVersionHeader(rq, info.VersionID); err != nil {
		return err
	}
	out := getObjectAttributesResponse{NS: s3NS}
	if want[attrETag] {
		out.ETag = unquoteETag(info.ETag)
	}
	if want[attrChecksum] && info.Checksum.Algorithm != "" {
		c := info.Checksum
		if c.Type == store.ChecksumComposite {
			c.Value, _, _ = strings.Cut(c.Value, "-")
		}
		out.Checksum = &attrChecksumElem{checksumFields: checksumXML(c), ChecksumType: checksumType(info.Checksum)}
	}
	if want[attrObjectParts] && len(info.Parts) > 0 {
		out.ObjectParts = pageAttrParts(info.Parts, marker, maxParts)
	}
	if want[attrStorageClass] {
		out.StorageClass = storageClassName(info.Meta)
	}
	if want[attrObjectSize] {
		size := info.Size
		out.ObjectSize = &size
	}
	h := rq.w.Header()
	setValidators(h, info)
	h.Del("ETag") // the ETag is an attribute here, not a validator header
	if err := writeXML(rq, out); err != nil {
		return fmt.Errorf("object attributes %q/%q: %w", rq.bucket, rq.key, err)
	}
	return nil
}

// pageAttrParts returns the page of parts after marker, at most maxParts.
func pageAttrParts(parts []store.PartInfo, marker, maxParts int) *attrPartsElem {
	el := &attrPartsElem{PartsCount: len(parts), PartNumberMarker: marker, MaxParts: maxParts, Parts: []attrPartElem{}}
	for _, p := range parts {
		if p.Number <= marker {
			continue
		}
		if len(el.Parts) == maxParts {
			el.IsTruncated = true
			break
		}
		el.Parts = append(el.Parts, attrPartElem{PartNumber: p.Number, Size: p.Size, checksumFields: checksumXML(p.Checksum)})
		el.NextPartNumberMarker = p.Number
	}
	return el
}
