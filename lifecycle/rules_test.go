package lifecycle

import (
	"encoding/xml"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

func parse(t *testing.T, rules string) (*Configuration, error) {
	t.Helper()
	var c Configuration
	if err := xml.Unmarshal([]byte("<LifecycleConfiguration>"+rules+"</LifecycleConfiguration>"), &c); err != nil {
		return nil, &Error{CodeMalformedXML, err.Error()}
	}
	return &c, c.Validate()
}

// TestValidate: every refusal with S3's code and message, and what passes.
func TestValidate(t *testing.T) {
	exp := `<Expiration><Days>1</Days></Expiration>`
	rule := func(inner string) string { return "<Rule>" + inner + "</Rule>" }
	many := strings.Repeat(rule(`<Filter/><Status>Enabled</Status>`+exp), MaxRules+1)
	tests := []struct {
		name, rules string
		code, msg   string // "" passes
	}{
		{"days", rule(`<ID>a</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status>` + exp), "", ""},
		{"empty filter", rule(`<Filter></Filter><Status>Disabled</Status>` + exp), "", ""},
		{"legacy prefix", rule(`<Prefix>x/</Prefix><Status>Enabled</Status>` + exp), "", ""},
		{"date", rule(`<Filter/><Status>Enabled</Status><Expiration><Date>2026-12-01T00:00:00Z</Date></Expiration>`), "", ""},
		{"marker", rule(`<Filter><Prefix>p</Prefix></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>`), "", ""},
		{"noncurrent", rule(`<Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays><NewerNoncurrentVersions>3</NewerNoncurrentVersions></NoncurrentVersionExpiration>`), "", ""},
		{"abort", rule(`<Filter><Prefix>up/</Prefix></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>`), "", ""},
		{"and", rule(`<Filter><And><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag><Tag><Key>j</Key><Value></Value></Tag><ObjectSizeGreaterThan>1</ObjectSizeGreaterThan><ObjectSizeLessThan>9</ObjectSizeLessThan></And></Filter><Status>Enabled</Status>` + exp), "", ""},
		{"id of 255", rule(`<ID>` + strings.Repeat("é", 255) + `</ID><Filter/><Status>Enabled</Status>` + exp), "", ""},

		{"no rules", "", CodeInvalidRequest, "At least one lifecycle rule must be specified."},
		{"1001 rules", many, CodeInvalidRequest, "The number of lifecycle rules must not exceed the allowed limit of 1000 rules."},
		{"id of 256", rule(`<ID>` + strings.Repeat("a", 256) + `</ID><Filter/><Status>Enabled</Status>` + exp), CodeInvalidArgument, "ID length should not exceed allowed limit of 255"},
		{"same id", rule(`<ID>x</ID><Filter/><Status>Enabled</Status>`+exp) + rule(`<ID>x</ID><Filter/><Status>Enabled</Status>`+exp), CodeInvalidArgument, "Rule ID must be unique. Found same ID for more than one rule"},
		{"bad status", rule(`<Filter/><Status>enabled</Status>` + exp), CodeMalformedXML, ""},
		{"no filter", rule(`<Status>Enabled</Status>` + exp), CodeMalformedXML, ""},
		{"prefix in v2", rule(`<Filter/><Status>Enabled</Status>`+exp) + rule(`<Prefix>a</Prefix><Status>Enabled</Status>`+exp), CodeInvalidRequest, "Base level prefix cannot be used in Lifecycle V2, prefixes are only supported in the Filter."},
		{"filter in v1", rule(`<Prefix>a</Prefix><Status>Enabled</Status>`+exp) + rule(`<Filter/><Status>Enabled</Status>`+exp), CodeInvalidRequest, "Filter element can only be used in Lifecycle V2."},
		{"overlap in v1", rule(`<Prefix>a</Prefix><Status>Enabled</Status>`+exp) + rule(`<Prefix>ab</Prefix><Status>Enabled</Status>`+exp), CodeInvalidRequest, "Found overlapping prefixes 'a' and 'ab' for same action type 'Expiration'"},
		{"no action", rule(`<Filter/><Status>Enabled</Status>`), CodeInvalidRequest, "At least one action needs to be specified in a rule"},
		{"two predicates", rule(`<Filter><Prefix>a</Prefix><ObjectSizeLessThan>5</ObjectSizeLessThan></Filter><Status>Enabled</Status>` + exp), CodeMalformedXML, ""},
		{"empty and", rule(`<Filter><And></And></Filter><Status>Enabled</Status>` + exp), CodeMalformedXML, ""},
		// S3's And joins two or more predicates.
		{"and of one prefix", rule(`<Filter><And><Prefix>x/</Prefix></And></Filter><Status>Enabled</Status>` + exp), CodeMalformedXML, ""},
		{"and of one tag", rule(`<Filter><And><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter><Status>Enabled</Status>` + exp), CodeMalformedXML, ""},
		{"and of prefix and size", rule(`<Filter><And><Prefix>x/</Prefix><ObjectSizeGreaterThan>1</ObjectSizeGreaterThan></And></Filter><Status>Enabled</Status>` + exp), "", ""},
		{"newer noncurrent 100", rule(`<Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays><NewerNoncurrentVersions>100</NewerNoncurrentVersions></NoncurrentVersionExpiration>`), "", ""},
		{"newer noncurrent 101", rule(`<Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays><NewerNoncurrentVersions>101</NewerNoncurrentVersions></NoncurrentVersionExpiration>`), CodeInvalidArgument, "'NewerNoncurrentVersions' must not exceed 100"},
		{"duplicate tag key", rule(`<Filter><And><Tag><Key>k</Key><Value>1</Value></Tag><Tag><Key>k</Key><Value>2</Value></Tag></And></Filter><Status>Enabled</Status>` + exp), CodeInvalidRequest, "Duplicate Tag Keys are not allowed."},
		{"empty tag key", rule(`<Filter><Tag><Key></Key><Value>1</Value></Tag></Filter><Status>Enabled</Status>` + exp), CodeMalformedXML, ""},
		{"negative greater", rule(`<Filter><ObjectSizeGreaterThan>-1</ObjectSizeGreaterThan></Filter><Status>Enabled</Status>` + exp), CodeInvalidRequest, "'ObjectSizeGreaterThan' should be between 0 and 1099511627776000."},
		{"zero less", rule(`<Filter><ObjectSizeLessThan>0</ObjectSizeLessThan></Filter><Status>Enabled</Status>` + exp), CodeInvalidRequest, "'ObjectSizeLessThan' should be between 1 and 1099511627776000."},
		{"size order", rule(`<Filter><And><ObjectSizeGreaterThan>9</ObjectSizeGreaterThan><ObjectSizeLessThan>9</ObjectSizeLessThan></And></Filter><Status>Enabled</Status>` + exp), CodeInvalidRequest, "'ObjectSizeLessThan' has to be a value greater than 'ObjectSizeGreaterThan'."},
		{"days zero", rule(`<Filter/><Status>Enabled</Status><Expiration><Days>0</Days></Expiration>`), CodeInvalidArgument, "'Days' for Expiration action must be a positive integer"},
		{"days text", rule(`<Filter/><Status>Enabled</Status><Expiration><Days>one</Days></Expiration>`), CodeMalformedXML, ""},
		{"days and date", rule(`<Filter/><Status>Enabled</Status><Expiration><Days>1</Days><Date>2026-12-01T00:00:00Z</Date></Expiration>`), CodeMalformedXML, ""},
		{"days and marker", rule(`<Filter/><Status>Enabled</Status><Expiration><Days>1</Days><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>`), CodeMalformedXML, ""},
		{"empty expiration", rule(`<Filter/><Status>Enabled</Status><Expiration></Expiration>`), CodeMalformedXML, ""},
		{"date not midnight", rule(`<Filter/><Status>Enabled</Status><Expiration><Date>2026-12-01T10:00:00Z</Date></Expiration>`), CodeInvalidArgument, "'Date' must be at midnight GMT"},
		{"date garbage", rule(`<Filter/><Status>Enabled</Status><Expiration><Date>tomorrow</Date></Expiration>`), CodeInvalidArgument, "'Date' must be at midnight GMT"},
		{"noncurrent without days", rule(`<Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration>`), CodeMalformedXML, ""},
		{"noncurrent zero", rule(`<Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>0</NoncurrentDays></NoncurrentVersionExpiration>`), CodeInvalidArgument, "'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer"},
		{"newer zero", rule(`<Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>0</NewerNoncurrentVersions></NoncurrentVersionExpiration>`), CodeInvalidArgument, "'NewerNoncurrentVersions' must be a positive integer"},
		{"newer in v1", rule(`<Prefix></Prefix><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration>`), CodeInvalidRequest, "NewerNoncurrentVersions element can only be used in Lifecycle V2."},
		{"abort without days", rule(`<Filter/><Status>Enabled</Status><AbortIncompleteMultipartUpload></AbortIncompleteMultipartUpload>`), CodeMalformedXML, ""},
		{"abort zero", rule(`<Filter/><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>0</DaysAfterInitiation></AbortIncompleteMultipartUpload>`), CodeInvalidArgument, "'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer"},
		{"abort with tag", rule(`<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>`), CodeInvalidRequest, "AbortIncompleteMultipartUpload cannot be specified with Tags."},
		{"abort with size", rule(`<Filter><ObjectSizeLessThan>5</ObjectSizeLessThan></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>`), CodeInvalidRequest, "AbortIncompleteMultipartUpload cannot be specified with Object Size."},
		{"marker with tag", rule(`<Filter><And><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>`), CodeInvalidRequest, "ExpiredObjectDeleteMarker cannot be specified with Tags."},
		{"marker with size", rule(`<Filter><ObjectSizeGreaterThan>5</ObjectSizeGreaterThan></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>`), CodeInvalidRequest, "ExpiredObjectDeleteMarker cannot be specified with Object Size."},
		{"transition", rule(`<Filter/><Status>Enabled</Status><Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition>`), CodeNotImplemented, "Lifecycle transitions are not supported: this gateway keeps every object in one storage class (STANDARD)."},
		{"noncurrent transition", rule(`<Filter/><Status>Enabled</Status>` + exp + `<NoncurrentVersionTransition><NoncurrentDays>30</NoncurrentDays><StorageClass>GLACIER</StorageClass></NoncurrentVersionTransition>`), CodeNotImplemented, "Lifecycle transitions are not supported: this gateway keeps every object in one storage class (STANDARD)."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse(t, tt.rules)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				for _, r := range c.Rules {
					if r.ID == "" {
						t.Errorf("a rule has no ID after Validate")
					}
				}
				return
			}
			var le *Error
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want %s", err, tt.code)
			}
			if le.Code != tt.code || (tt.msg != "" && le.Message != tt.msg) {
				t.Errorf("got %s %q, want %s %q", le.Code, le.Message, tt.code, tt.msg)
			}
		})
	}
}

// TestStoredForm: a validated configuration survives its stored form, and
// a Date is normalized as S3 answers it.
func TestStoredForm(t *testing.T) {
	c, err := parse(t, `<Rule><ID>r</ID><Filter><And><Prefix>a/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter><Status>Enabled</Status><Expiration><Date>2026-12-01</Date></Expiration><NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration></Rule>`)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	out, err := xml.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	want := `<LifecycleConfiguration><Rule><ID>r</ID><Filter><And><Prefix>a/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter><Status>Enabled</Status><Expiration><Date>2026-12-01T00:00:00.000Z</Date></Expiration><NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration></Rule></LifecycleConfiguration>`
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
}

// TestMatches: prefix, tags and sizes, alone and combined.
func TestMatches(t *testing.T) {
	p := func(s string) *string { return &s }
	n := func(v int64) *int64 { return &v }
	tags := []store.Tag{{Key: "k", Value: "v"}, {Key: "j", Value: ""}}
	tests := []struct {
		name string
		rule Rule
		key  string
		size int64
		want bool
	}{
		{"legacy prefix", Rule{Prefix: p("a/")}, "a/b", 1, true},
		{"legacy prefix miss", Rule{Prefix: p("a/")}, "b/a", 1, false},
		{"empty filter", Rule{Filter: &Filter{}}, "x", 0, true},
		{"filter prefix", Rule{Filter: &Filter{Prefix: p("lo")}}, "logs", 0, true},
		{"tag", Rule{Filter: &Filter{Tag: &Tag{"k", "v"}}}, "x", 0, true},
		{"tag value differs", Rule{Filter: &Filter{Tag: &Tag{"k", "w"}}}, "x", 0, false},
		{"greater than", Rule{Filter: &Filter{ObjectSizeGreaterThan: n(5)}}, "x", 6, true},
		{"greater than, equal", Rule{Filter: &Filter{ObjectSizeGreaterThan: n(5)}}, "x", 5, false},
		{"less than", Rule{Filter: &Filter{ObjectSizeLessThan: n(5)}}, "x", 4, true},
		{"less than, equal", Rule{Filter: &Filter{ObjectSizeLessThan: n(5)}}, "x", 5, false},
		{"and all", Rule{Filter: &Filter{And: &And{Prefix: p("x"), Tags: []Tag{{"k", "v"}, {"j", ""}}, ObjectSizeGreaterThan: n(1), ObjectSizeLessThan: n(10)}}}, "xy", 5, true},
		{"and missing tag", Rule{Filter: &Filter{And: &And{Prefix: p("x"), Tags: []Tag{{"k", "v"}, {"m", "1"}}}}}, "xy", 5, false},
		{"and size out", Rule{Filter: &Filter{And: &And{Prefix: p("x"), ObjectSizeLessThan: n(5)}}}, "xy", 5, false},
		{"and prefix out", Rule{Filter: &Filter{And: &And{Prefix: p("y"), ObjectSizeLessThan: n(50)}}}, "xy", 5, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.rule.Matches(tt.key, tt.size, tags); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDue: S3's rounding to the next midnight UTC, and a fast day scaled.
func TestDue(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		start string
		days  int
		day   time.Duration
		want  string
	}{
		// S3's documented example: created 10:30 on Jan 15 with Days 3
		// expires at midnight starting Jan 19.
		{"2014-01-15T10:30:00Z", 3, 24 * time.Hour, "2014-01-19T00:00:00Z"},
		{"2014-01-15T23:59:59.999Z", 1, 24 * time.Hour, "2014-01-17T00:00:00Z"},
		{"2014-01-15T10:30:00+02:00", 1, 24 * time.Hour, "2014-01-17T00:00:00Z"},
		{"2026-12-01T20:00:00.300Z", 1, time.Second, "2026-12-01T20:00:02Z"},
		{"2026-12-01T20:00:00.300Z", 3, 2 * time.Second, "2026-12-01T20:00:08Z"},
	}
	for _, tt := range tests {
		if got := Due(at(tt.start), tt.days, tt.day); !got.Equal(at(tt.want)) {
			t.Errorf("Due(%s, %d, %s) = %s, want %s", tt.start, tt.days, tt.day, got.UTC(), tt.want)
		}
	}
}

// TestExpiry: x-amz-expiration names the earliest enabled rule that matches.
func TestExpiry(t *testing.T) {
	c, err := parse(t, `<Rule><ID>late</ID><Filter/><Status>Enabled</Status><Expiration><Days>30</Days></Expiration></Rule>`+
		`<Rule><ID>off</ID><Filter/><Status>Disabled</Status><Expiration><Days>1</Days></Expiration></Rule>`+
		`<Rule><ID>soon</ID><Filter><Prefix>tmp/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>2</Days></Expiration></Rule>`+
		`<Rule><ID>gone</ID><Filter><Prefix>nc/</Prefix></Filter><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>`)
	if err != nil {
		t.Fatal(err)
	}
	lm := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		key, id string
		days    int
	}{{"tmp/x", "soon", 3}, {"other", "late", 31}, {"nc/x", "late", 31}} {
		at, id, ok := c.Expiry(tt.key, 1, nil, lm, 24*time.Hour)
		if !ok || id != tt.id || !at.Equal(time.Date(2026, 12, 1+tt.days, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: %s %s %v, want %s in %d days", tt.key, at, id, ok, tt.id, tt.days)
		}
	}
}
