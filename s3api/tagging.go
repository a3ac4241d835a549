package s3api

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/s3gate/s3gate/store"
)

// S3's tagging limits.
const (
	maxObjectTags = 10
	maxBucketTags = 50
	maxTagKey     = 128 // Unicode characters
	maxTagValue   = 256
)

var (
	errInvalidTag        = &apiError{"InvalidTag", http.StatusBadRequest, "The TagKey you have provided is invalid"}
	errTooManyObjectTags = &apiError{"BadRequest", http.StatusBadRequest, "Object tags cannot be greater than 10"}
	errBadTagging        = errInvalidArgument.withMessage("The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.")
)

// taggingXML is the Tagging document of Put/GetObjectTagging and
// Put/GetBucketTagging (and of the POST form field "tagging").
type taggingXML struct {
	XMLName xml.Name `xml:"Tagging"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	TagSet  struct {
		Tags []struct {
			Key   *string `xml:"Key"`
			Value *string `xml:"Value"`
		} `xml:"Tag"`
	} `xml:"TagSet"`
}

// checkTags applies S3's rules to a tag set of at most limit tags.
func checkTags(tags []store.Tag, limit int) error {
	if len(tags) > limit {
		if limit == maxBucketTags {
			return errInvalidTag.withMessage("Bucket tag count cannot be greater than 50")
		}
		return errTooManyObjectTags // BadRequest, not InvalidTag: what AWS answers
	}
	seen := make(map[string]bool, len(tags))
	for _, t := range tags {
		switch {
		case utf8.RuneCountInString(t.Key) > maxTagKey:
			return errInvalidTag.withMessage("The TagKey you have provided is too long, max 128")
		case utf8.RuneCountInString(t.Value) > maxTagValue:
			return errInvalidTag.withMessage("The TagValue you have provided is too long, max 256")
		case t.Key == "" || !tagChars(t.Key):
			return errInvalidTag
		case !tagChars(t.Value):
			return errInvalidTag.withMessage("The TagValue you have provided is invalid")
		case strings.HasPrefix(strings.ToLower(t.Key), "aws:"):
			return errInvalidTag.withMessage("Your TagKey cannot be prefixed with aws:")
		case seen[t.Key]:
			return errInvalidTag.withMessage("Cannot provide multiple Tags with the same key")
		}
		seen[t.Key] = true
	}
	return nil
}

// tagChars reports whether s holds only what S3 allows in tags (its
// pattern [\p{L}\p{Z}\p{N}_.:/=+\-@]): letters, digits, spaces and
// + - = . _ : / @.
func tagChars(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.In(r, unicode.L, unicode.Z, unicode.N) && !strings.ContainsRune("+-=._:/@", r) {
			return false
		}
	}
	return true
}

// parseTaggingXML reads and checks a Tagging document.
func parseTaggingXML(body []byte, limit int) ([]store.Tag, error) {
	var doc taggingXML
	if err := decodeXML(body, &doc); err != nil {
		return nil, errMalformedXML
	}
	tags := make([]store.Tag, 0, len(doc.TagSet.Tags))
	for _, t := range doc.TagSet.Tags {
		if t.Key == nil || t.Value == nil {
			return nil, errMalformedXML
		}
		tags = append(tags, store.Tag{Key: *t.Key, Value: *t.Value})
	}
	if err := checkTags(tags, limit); err != nil {
		return nil, err
	}
	return tags, nil
}

// parseTaggingHeader reads x-amz-tagging (URL query form, k1=v1&k2=v2);
// nil for none.
func parseTaggingHeader(h http.Header) ([]store.Tag, error) {
	v := h.Get("X-Amz-Tagging")
	if v == "" {
		return nil, nil
	}
	var tags []store.Tag
	for _, pair := range strings.Split(v, "&") {
		if pair == "" {
			continue // "a=1&&b=2" and "&" are accepted, as by AWS
		}
		k, val, _ := strings.Cut(pair, "=")
		dk, err1 := url.QueryUnescape(k)
		dv, err2 := url.QueryUnescape(val)
		if err1 != nil || err2 != nil || dk == "" {
			return nil, errBadTagging
		}
		for _, t := range tags {
			if t.Key == dk {
				return nil, errBadTagging
			}
		}
		tags = append(tags, store.Tag{Key: dk, Value: dv})
	}
	if err := checkTags(tags, maxObjectTags); err != nil {
		return nil, err
	}
	return tags, nil
}

func tagsXML(tags []store.Tag) taggingXML {
	out := taggingXML{NS: s3NS}
	for _, t := range tags {
		k, v := t.Key, t.Value
		out.TagSet.Tags = append(out.TagSet.Tags, struct {
			Key   *string `xml:"Key"`
			Value *string `xml:"Value"`
		}{&k, &v})
	}
	return out
}

func (a *api) getObjectTagging(rq *request) error {
	info, err := a.headVersion(rq)
	if err != nil {
		return err
	}
	if err := a.setVersionHeader(rq, info.VersionID); err != nil {
		return err
	}
	return writeXML(rq, tagsXML(info.Meta.Tags))
}

func (a *api) putObjectTagging(rq *request) error {
	if _, err := versionParam(rq); err != nil {
		return err
	}
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	tags, err := parseTaggingXML(body, maxObjectTags)
	if err != nil {
		return err
	}
	info, err := a.headVersion(rq)
	if err != nil {
		return err
	}
	meta := info.Meta
	meta.Tags = tags
	if err := a.rewriteMeta(rq, info, meta); err != nil {
		return err
	}
	if err := a.setVersionHeader(rq, info.VersionID); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusOK)
	return nil
}

func (a *api) deleteObjectTagging(rq *request) error {
	info, err := a.headVersion(rq)
	if err != nil {
		return err
	}
	if len(info.Meta.Tags) > 0 {
		meta := info.Meta
		meta.Tags = nil
		if err := a.rewriteMeta(rq, info, meta); err != nil {
			return err
		}
	}
	if err := a.setVersionHeader(rq, info.VersionID); err != nil {
		return err
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

var errNoSuchTagSet = &apiError{"NoSuchTagSet", http.StatusNotFound, "The TagSet does not exist"}

func (a *api) putBucketTagging(rq *request) error {
	if _, err := a.policyConfigs(); err != nil {
		return err
	}
	body, err := readBody(rq, a.cfg.MaxXMLBody)
	if err != nil {
		return err
	}
	tags, err := parseTaggingXML(body, maxBucketTags)
	if err != nil {
		return err
	}
	if _, err := a.bucketConfigs(rq); err != nil {
		return err
	}
	doc, err := json.Marshal(tags)
	if err != nil {
		return fmt.Errorf("put bucket tagging %q: %w", rq.bucket, err)
	}
	return a.putConfig(rq, store.BucketConfigTagging, string(doc), http.StatusNoContent)
}

func (a *api) getBucketTagging(rq *request) error {
	cfgs, err := a.bucketConfigs(rq)
	if err != nil {
		return err
	}
	doc, ok := cfgs[store.BucketConfigTagging]
	if !ok {
		return errNoSuchTagSet
	}
	var tags []store.Tag
	if err := json.Unmarshal([]byte(doc), &tags); err != nil {
		return fmt.Errorf("get bucket tagging %q: stored document: %w", rq.bucket, err)
	}
	return writeXML(rq, tagsXML(tags))
}

func (a *api) deleteBucketTagging(rq *request) error {
	c, err := a.policyConfigs()
	if err != nil {
		return err
	}
	if _, err := a.bucketConfigs(rq); err != nil {
		return err
	}
	if _, err := c.DeleteBucketConfig(rq.ctx, rq.bucket, store.BucketConfigTagging); err != nil {
		return fmt.Errorf("delete bucket tagging %q: %w", rq.bucket, err)
	}
	rq.w.WriteHeader(http.StatusNoContent)
	return nil
}

// postTagging turns a POST form's tagging field (a Tagging document) into
// the x-amz-tagging form, so that PutObject's checks apply unchanged. A
// document that does not parse gives a value x-amz-tagging refuses.
func postTagging(doc string) string {
	var t taggingXML
	if err := decodeXML([]byte(doc), &t); err != nil {
		return "%"
	}
	pairs := make([]string, 0, len(t.TagSet.Tags))
	for _, tag := range t.TagSet.Tags {
		if tag.Key == nil || tag.Value == nil {
			return "%"
		}
		pairs = append(pairs, url.QueryEscape(*tag.Key)+"="+url.QueryEscape(*tag.Value))
	}
	return strings.Join(pairs, "&")
}
