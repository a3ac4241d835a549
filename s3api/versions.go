package s3api

import (
	"encoding/xml"

	"github.com/s3gate/s3gate/store"
)

// nullVersion is the version id of every object: versioning is never on, so
// each key has exactly one version, the current one, with id "null".
const nullVersion = "null"

type versionElem struct {
	Key               string `xml:"Key"`
	VersionID         string `xml:"VersionId"`
	IsLatest          bool   `xml:"IsLatest"`
	LastModified      string `xml:"LastModified"`
	ETag              string `xml:"ETag"`
	Size              int64  `xml:"Size"`
	StorageClass      string `xml:"StorageClass"`
	Owner             *owner `xml:"Owner"`
	ChecksumAlgorithm string `xml:"ChecksumAlgorithm,omitempty"`
	ChecksumType      string `xml:"ChecksumType,omitempty"`
}

type listVersionsResult struct {
	XMLName             xml.Name      `xml:"ListVersionsResult"`
	NS                  string        `xml:"xmlns,attr"`
	Name                string        `xml:"Name"`
	Prefix              string        `xml:"Prefix"`
	KeyMarker           string        `xml:"KeyMarker"`
	VersionIDMarker     string        `xml:"VersionIdMarker"`
	NextKeyMarker       string        `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string        `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int           `xml:"MaxKeys"`
	Delimiter           *string       `xml:"Delimiter"`
	EncodingType        string        `xml:"EncodingType,omitempty"`
	IsTruncated         bool          `xml:"IsTruncated"`
	Versions            []versionElem `xml:"Version"`
	CommonPrefixes      []prefixElem  `xml:"CommonPrefixes"`
}

// listObjectVersions answers ListObjectVersions on top of the ordinary
// listing: every object once, as version "null", latest, and no delete
// markers (nothing here ever creates one). Paging follows S3's markers: the
// listing resumes after key-marker (its only version, "null", was returned
// with it), and a truncated page names the last key (with version "null") or
// common prefix.
func (a *api) listObjectVersions(rq *request) error {
	enc, encType, err := parseEncodingType(rq.q)
	if err != nil {
		return err
	}
	maxKeys, err := parseMaxKeys(rq, "max-keys")
	if err != nil {
		return err
	}
	keyMarker, vidMarker := rq.q.Get("key-marker"), rq.q.Get("version-id-marker")
	switch {
	case vidMarker != "" && keyMarker == "":
		return errInvalidArgument.withMessage("A version-id marker cannot be specified without a key marker.")
	case vidMarker != "" && vidMarker != nullVersion:
		return errInvalidArgument.withMessage("Invalid version id specified")
	}
	p := store.ListParams{Prefix: rq.q.Get("prefix"), Delimiter: rq.q.Get("delimiter"), After: keyMarker, MaxKeys: maxKeys}
	res, err := a.list(rq, p)
	if err != nil {
		return err
	}
	own := ownerOf(rq)
	out := listVersionsResult{
		NS: s3NS, Name: rq.bucket, Prefix: enc.enc(p.Prefix), KeyMarker: enc.enc(keyMarker),
		VersionIDMarker: vidMarker, MaxKeys: maxKeys, Delimiter: givenDelimiter(rq, enc),
		EncodingType: encType, IsTruncated: res.Truncated,
		Versions: make([]versionElem, 0, len(res.Objects)),
	}
	for _, o := range res.Objects {
		out.Versions = append(out.Versions, versionElem{
			Key: enc.enc(o.Key), VersionID: nullVersion, IsLatest: true,
			LastModified: xmlTime(orNow(o.LastModified)), ETag: quoteETag(o.ETag), Size: o.Size,
			StorageClass: storageClassName(o.Meta), Owner: own,
			ChecksumAlgorithm: o.Checksum.Algorithm, ChecksumType: checksumType(o.Checksum),
		})
	}
	for _, cp := range res.CommonPrefixes {
		out.CommonPrefixes = append(out.CommonPrefixes, prefixElem{Prefix: enc.enc(cp)})
	}
	if res.Truncated {
		out.NextKeyMarker = enc.enc(res.NextAfter)
		if n := len(res.CommonPrefixes); n == 0 || res.CommonPrefixes[n-1] != res.NextAfter {
			out.NextVersionIDMarker = nullVersion // the page ended on a key, not a prefix
		}
	}
	return writeXML(rq, out)
}
