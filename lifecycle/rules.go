// Package lifecycle holds a bucket's lifecycle rules as S3 has them — the
// LifecycleConfiguration document, its validation with S3's answers, which
// object a rule matches and when it expires — and the runner that applies
// them in the background over the store's interfaces (run.go). It sees no
// SQL and no HTTP.
package lifecycle

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/s3gate/s3gate/store"
)

// ConfigName is the bucket configuration document (store.BucketConfigStore)
// that keeps a bucket's lifecycle rules, as JSON of Configuration.
const ConfigName = store.BucketConfigLifecycle

// Limits of a configuration (S3's).
const (
	MaxRules  = 1000
	MaxIDLen  = 255
	maxSize   = 1099511627776000 // S3's bound of the size filters
	dateShape = "2006-01-02T15:04:05.000Z"
)

// Codes of Error: S3's error codes; s3api maps them to answers.
const (
	CodeMalformedXML    = "MalformedXML"
	CodeInvalidArgument = "InvalidArgument"
	CodeInvalidRequest  = "InvalidRequest"
	CodeNotImplemented  = "NotImplemented"
)

// Error is a configuration S3 refuses: its code and S3's message.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return "lifecycle: " + e.Code + ": " + e.Message }

func malformed(msg string) *Error  { return &Error{CodeMalformedXML, msg} }
func invalidArg(msg string) *Error { return &Error{CodeInvalidArgument, msg} }
func invalidReq(msg string) *Error { return &Error{CodeInvalidRequest, msg} }

// Configuration is S3's LifecycleConfiguration document; it is also the
// stored form (as JSON) once Validate accepted it.
type Configuration struct {
	XMLName xml.Name `xml:"LifecycleConfiguration" json:"-"`
	NS      string   `xml:"xmlns,attr,omitempty" json:"-"`
	Rules   []Rule   `xml:"Rule" json:"rules"`
}

// Rule is one lifecycle rule.
type Rule struct {
	ID string `xml:"ID,omitempty" json:"id"`
	// Prefix is the rule-level prefix of the first lifecycle API (V1); a
	// configuration uses it or Filter, never both.
	Prefix *string `xml:"Prefix" json:"prefix,omitempty"`
	Filter *Filter `xml:"Filter" json:"filter,omitempty"`
	Status string  `xml:"Status" json:"status"`

	Expiration                     *Expiration           `xml:"Expiration" json:"expiration,omitempty"`
	NoncurrentVersionExpiration    *NoncurrentExpiration `xml:"NoncurrentVersionExpiration" json:"noncurrent,omitempty"`
	AbortIncompleteMultipartUpload *AbortUpload          `xml:"AbortIncompleteMultipartUpload" json:"abort,omitempty"`

	// Transitions are parsed only to be refused: one storage class is kept.
	Transitions           []struct{} `xml:"Transition" json:"-"`
	NoncurrentTransitions []struct{} `xml:"NoncurrentVersionTransition" json:"-"`
}

// Filter selects the objects of a rule: exactly one of its fields (none:
// every object).
type Filter struct {
	Prefix                *string `xml:"Prefix" json:"prefix,omitempty"`
	Tag                   *Tag    `xml:"Tag" json:"tag,omitempty"`
	ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan" json:"gt,omitempty"`
	ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan" json:"lt,omitempty"`
	And                   *And    `xml:"And" json:"and,omitempty"`
}

// maxNewerNoncurrent is S3's bound on NewerNoncurrentVersions ("You can
// specify up to 100 noncurrent versions to retain").
const maxNewerNoncurrent = 100

// And combines predicates of a Filter.
type And struct {
	Prefix                *string `xml:"Prefix" json:"prefix,omitempty"`
	Tags                  []Tag   `xml:"Tag" json:"tags,omitempty"`
	ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan" json:"gt,omitempty"`
	ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan" json:"lt,omitempty"`
}

// Tag is a key/value pair a rule requires.
type Tag struct {
	Key   string `xml:"Key" json:"k"`
	Value string `xml:"Value" json:"v"`
}

// Expiration expires current versions (Days or Date) or removes expired
// object delete markers.
type Expiration struct {
	Date                      *string `xml:"Date" json:"date,omitempty"`
	Days                      *int    `xml:"Days" json:"days,omitempty"`
	ExpiredObjectDeleteMarker *bool   `xml:"ExpiredObjectDeleteMarker" json:"eodm,omitempty"`
}

// NoncurrentExpiration removes noncurrent versions NoncurrentDays after they
// became noncurrent, keeping the NewerNoncurrentVersions newest.
type NoncurrentExpiration struct {
	NoncurrentDays          *int `xml:"NoncurrentDays" json:"days,omitempty"`
	NewerNoncurrentVersions *int `xml:"NewerNoncurrentVersions" json:"newer,omitempty"`
}

// AbortUpload aborts multipart uploads DaysAfterInitiation after they began.
type AbortUpload struct {
	DaysAfterInitiation *int `xml:"DaysAfterInitiation" json:"days,omitempty"`
}

// Enabled reports whether the rule is in force.
func (r *Rule) Enabled() bool { return r.Status == "Enabled" }

// Validate checks c as S3 does (the first fault is the answer, an *Error),
// normalizes dates and gives every rule without an ID a random one.
func (c *Configuration) Validate() error {
	if len(c.Rules) == 0 {
		return invalidReq("At least one lifecycle rule must be specified.")
	}
	if len(c.Rules) > MaxRules {
		return invalidReq("The number of lifecycle rules must not exceed the allowed limit of 1000 rules.")
	}
	ids := map[string]bool{}
	for _, r := range c.Rules {
		if r.ID == "" {
			continue
		}
		if len([]rune(r.ID)) > MaxIDLen {
			return invalidArg("ID length should not exceed allowed limit of 255")
		}
		if ids[r.ID] {
			return invalidArg("Rule ID must be unique. Found same ID for more than one rule")
		}
		ids[r.ID] = true
	}
	v2 := c.Rules[0].Filter != nil
	for i := range c.Rules {
		if err := c.Rules[i].validate(v2); err != nil {
			return err
		}
	}
	if !v2 {
		if err := overlapping(c.Rules); err != nil {
			return err
		}
	}
	for _, r := range c.Rules {
		if len(r.Transitions) > 0 || len(r.NoncurrentTransitions) > 0 {
			return &Error{CodeNotImplemented, "Lifecycle transitions are not supported: this gateway keeps every object in one storage class (STANDARD)."}
		}
	}
	for i := range c.Rules {
		if c.Rules[i].ID == "" {
			c.Rules[i].ID = newID()
		}
	}
	return nil
}

func newID() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b[:])
}

func (r *Rule) validate(v2 bool) error {
	switch {
	case r.Prefix == nil && r.Filter == nil:
		return malformed("a rule names its objects by neither a Filter nor a Prefix")
	case r.Prefix != nil && v2:
		return invalidReq("Base level prefix cannot be used in Lifecycle V2, prefixes are only supported in the Filter.")
	case r.Filter != nil && !v2:
		return invalidReq("Filter element can only be used in Lifecycle V2.")
	}
	if r.Status != "Enabled" && r.Status != "Disabled" {
		return malformed("Status must be Enabled or Disabled")
	}
	if err := r.Filter.validate(); err != nil {
		return err
	}
	if r.Expiration == nil && r.NoncurrentVersionExpiration == nil && r.AbortIncompleteMultipartUpload == nil &&
		len(r.Transitions) == 0 && len(r.NoncurrentTransitions) == 0 {
		return invalidReq("At least one action needs to be specified in a rule")
	}
	marker := false
	if e := r.Expiration; e != nil {
		n := 0
		for _, set := range []bool{e.Date != nil, e.Days != nil, e.ExpiredObjectDeleteMarker != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return malformed("an Expiration names none, or more than one, of Date, Days and ExpiredObjectDeleteMarker")
		}
		switch {
		case e.Days != nil && *e.Days <= 0:
			return invalidArg("'Days' for Expiration action must be a positive integer")
		case e.Date != nil:
			d, err := parseDate(*e.Date)
			if err != nil {
				return err
			}
			s := d.Format(dateShape)
			e.Date = &s
		case e.ExpiredObjectDeleteMarker != nil:
			marker = *e.ExpiredObjectDeleteMarker
		}
	}
	if n := r.NoncurrentVersionExpiration; n != nil {
		switch {
		case n.NoncurrentDays == nil:
			return malformed("a NoncurrentVersionExpiration without NoncurrentDays")
		case *n.NoncurrentDays <= 0:
			return invalidArg("'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer")
		case n.NewerNoncurrentVersions != nil && !v2:
			return invalidReq("NewerNoncurrentVersions element can only be used in Lifecycle V2.")
		case n.NewerNoncurrentVersions != nil && *n.NewerNoncurrentVersions <= 0:
			return invalidArg("'NewerNoncurrentVersions' must be a positive integer")
		case n.NewerNoncurrentVersions != nil && *n.NewerNoncurrentVersions > maxNewerNoncurrent:
			return invalidArg("'NewerNoncurrentVersions' must not exceed 100")
		}
	}
	abort := r.AbortIncompleteMultipartUpload
	if abort != nil {
		switch {
		case abort.DaysAfterInitiation == nil:
			return malformed("an AbortIncompleteMultipartUpload without DaysAfterInitiation")
		case *abort.DaysAfterInitiation <= 0:
			return invalidArg("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer")
		}
	}
	tags, sizes := r.Filter.usesTags(), r.Filter.usesSizes()
	switch {
	case marker && tags:
		return invalidReq("ExpiredObjectDeleteMarker cannot be specified with Tags.")
	case marker && sizes:
		return invalidReq("ExpiredObjectDeleteMarker cannot be specified with Object Size.")
	case abort != nil && tags:
		return invalidReq("AbortIncompleteMultipartUpload cannot be specified with Tags.")
	case abort != nil && sizes:
		return invalidReq("AbortIncompleteMultipartUpload cannot be specified with Object Size.")
	}
	return nil
}

// parseDate reads an ISO 8601 date that must be midnight UTC.
func parseDate(s string) (time.Time, error) {
	d, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if d, err = time.Parse("2006-01-02", s); err != nil {
			return time.Time{}, invalidArg("'Date' must be at midnight GMT")
		}
	}
	d = d.UTC()
	if !d.Equal(d.Truncate(24 * time.Hour)) {
		return time.Time{}, invalidArg("'Date' must be at midnight GMT")
	}
	return d, nil
}

func (f *Filter) validate() error {
	if f == nil {
		return nil
	}
	n := 0
	for _, set := range []bool{f.Prefix != nil, f.Tag != nil, f.ObjectSizeGreaterThan != nil, f.ObjectSizeLessThan != nil, f.And != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		return malformed("a Filter names more than one of Prefix, Tag, ObjectSizeGreaterThan, ObjectSizeLessThan and And")
	}
	if f.Tag != nil {
		return validTags([]Tag{*f.Tag})
	}
	gt, lt := f.ObjectSizeGreaterThan, f.ObjectSizeLessThan
	if a := f.And; a != nil {
		n := len(a.Tags)
		for _, set := range []bool{a.Prefix != nil, a.ObjectSizeGreaterThan != nil, a.ObjectSizeLessThan != nil} {
			if set {
				n++
			}
		}
		if n < 2 {
			// S3's And joins two or more predicates; one alone is MalformedXML there.
			return malformed("an And names fewer than two predicates")
		}
		if err := validTags(a.Tags); err != nil {
			return err
		}
		gt, lt = a.ObjectSizeGreaterThan, a.ObjectSizeLessThan
	}
	switch {
	case gt != nil && (*gt < 0 || *gt > maxSize):
		return invalidReq("'ObjectSizeGreaterThan' should be between 0 and 1099511627776000.")
	case lt != nil && (*lt < 1 || *lt > maxSize):
		return invalidReq("'ObjectSizeLessThan' should be between 1 and 1099511627776000.")
	case gt != nil && lt != nil && *lt <= *gt:
		return invalidReq("'ObjectSizeLessThan' has to be a value greater than 'ObjectSizeGreaterThan'.")
	}
	return nil
}

func validTags(tags []Tag) error {
	seen := map[string]bool{}
	for _, t := range tags {
		if t.Key == "" {
			return malformed("a tag in a filter has an empty key")
		}
		if seen[t.Key] {
			return invalidReq("Duplicate Tag Keys are not allowed.")
		}
		seen[t.Key] = true
	}
	return nil
}

// overlapping refuses, in a V1 configuration, two rules whose prefixes
// overlap (one begins the other) and that take the same kind of action.
func overlapping(rules []Rule) error {
	kinds := []struct {
		name  string
		takes func(*Rule) bool
	}{
		{"Expiration", func(r *Rule) bool { return r.Expiration != nil }},
		{"NoncurrentVersionExpiration", func(r *Rule) bool { return r.NoncurrentVersionExpiration != nil }},
		{"AbortIncompleteMultipartUpload", func(r *Rule) bool { return r.AbortIncompleteMultipartUpload != nil }},
	}
	for _, k := range kinds {
		var prefixes []string
		for i := range rules {
			if k.takes(&rules[i]) && rules[i].Prefix != nil {
				prefixes = append(prefixes, *rules[i].Prefix)
			}
		}
		sort.Strings(prefixes)
		for i := 1; i < len(prefixes); i++ {
			if strings.HasPrefix(prefixes[i], prefixes[i-1]) {
				return invalidReq(fmt.Sprintf("Found overlapping prefixes '%s' and '%s' for same action type '%s'", prefixes[i-1], prefixes[i], k.name))
			}
		}
	}
	return nil
}

func (f *Filter) usesTags() bool {
	return f != nil && (f.Tag != nil || (f.And != nil && len(f.And.Tags) > 0))
}

func (f *Filter) usesSizes() bool {
	return f != nil && (f.ObjectSizeGreaterThan != nil || f.ObjectSizeLessThan != nil ||
		(f.And != nil && (f.And.ObjectSizeGreaterThan != nil || f.And.ObjectSizeLessThan != nil)))
}

// KeyPrefix is the prefix every key the rule matches begins with ("" for
// none).
func (r *Rule) KeyPrefix() string {
	switch {
	case r.Prefix != nil:
		return *r.Prefix
	case r.Filter == nil:
		return ""
	case r.Filter.Prefix != nil:
		return *r.Filter.Prefix
	case r.Filter.And != nil && r.Filter.And.Prefix != nil:
		return *r.Filter.And.Prefix
	}
	return ""
}

// UsesTags reports whether matching needs the object's tags.
func (r *Rule) UsesTags() bool { return r.Filter.usesTags() }

// Matches reports whether the rule's filter selects an object with this key,
// size and tags.
func (r *Rule) Matches(key string, size int64, tags []store.Tag) bool {
	if !r.matchesKeySize(key, size) {
		return false
	}
	for _, t := range r.filterTags() {
		if !slices.Contains(tags, store.Tag{Key: t.Key, Value: t.Value}) {
			return false
		}
	}
	return true
}

// matchesKeySize is Matches without the tags (which cost a read).
func (r *Rule) matchesKeySize(key string, size int64) bool {
	if !strings.HasPrefix(key, r.KeyPrefix()) {
		return false
	}
	f := r.Filter
	if f == nil {
		return true
	}
	gt, lt := f.ObjectSizeGreaterThan, f.ObjectSizeLessThan
	if f.And != nil {
		gt, lt = f.And.ObjectSizeGreaterThan, f.And.ObjectSizeLessThan
	}
	return (gt == nil || size > *gt) && (lt == nil || size < *lt)
}

func (r *Rule) filterTags() []Tag {
	switch f := r.Filter; {
	case f == nil:
		return nil
	case f.Tag != nil:
		return []Tag{*f.Tag}
	case f.And != nil:
		return f.And.Tags
	}
	return nil
}

// Due is when something that started at start expires after days lifecycle
// days of length day: start + days·day, rounded up to the next multiple of
// day. With day = 24h that is S3's rule (the next midnight UTC, since
// multiples of 24h from Go's zero time are midnights UTC); a shorter day
// scales both the count and the rounding.
func Due(start time.Time, days int, day time.Duration) time.Time {
	if day <= 0 || days <= 0 {
		return start
	}
	if int64(days) > math.MaxInt64/int64(day) {
		return time.Unix(1<<40, 0) // beyond any clock this runs on
	}
	return start.Add(time.Duration(days) * day).Truncate(day).Add(day)
}

// CurrentExpiry is when the rule's Expiration (Days or Date) expires a
// current version last modified at lm; ok is false if it has none.
func (r *Rule) CurrentExpiry(lm time.Time, day time.Duration) (time.Time, bool) {
	e := r.Expiration
	switch {
	case e == nil:
		return time.Time{}, false
	case e.Days != nil:
		return Due(lm, *e.Days, day), true
	case e.Date != nil:
		d, err := parseDate(*e.Date)
		return d, err == nil
	}
	return time.Time{}, false
}

// ExpiresMarkers reports whether the rule removes expired object delete
// markers.
func (r *Rule) ExpiresMarkers() bool {
	return r.Expiration != nil && r.Expiration.ExpiredObjectDeleteMarker != nil && *r.Expiration.ExpiredObjectDeleteMarker
}

// Expiry is the x-amz-expiration of an object: the earliest expiry of the
// enabled rules with an Expiration that match it, and the rule's ID.
func (c *Configuration) Expiry(key string, size int64, tags []store.Tag, lm time.Time, day time.Duration) (at time.Time, ruleID string, ok bool) {
	for i := range c.Rules {
		r := &c.Rules[i]
		if !r.Enabled() || !r.Matches(key, size, tags) {
			continue
		}
		if t, has := r.CurrentExpiry(lm, day); has && (!ok || t.Before(at)) {
			at, ruleID, ok = t, r.ID, true
		}
	}
	return at, ruleID, ok
}

// Encode is the stored form of a validated configuration.
func (c *Configuration) Encode() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("lifecycle: encode: %w", err)
	}
	return string(b), nil
}

// Decode reads a stored configuration.
func Decode(doc string) (*Configuration, error) {
	var c Configuration
	if err := json.Unmarshal([]byte(doc), &c); err != nil {
		return nil, fmt.Errorf("lifecycle: stored configuration: %w", err)
	}
	return &c, nil
}
