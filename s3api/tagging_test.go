package s3api

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestParseTagging(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	doc := func(tags ...string) string {
		var b strings.Builder
		b.WriteString("<Tagging><TagSet>")
		for i := 0; i+1 < len(tags); i += 2 {
			b.WriteString("<Tag><Key>" + tags[i] + "</Key><Value>" + tags[i+1] + "</Value></Tag>")
		}
		b.WriteString("</TagSet></Tagging>")
		return b.String()
	}
	many := func(n int) []string {
		var kv []string
		for i := range n {
			kv = append(kv, "k"+strings.Repeat("x", i), "v")
		}
		return kv
	}
	tests := []struct {
		name, header, xml string
		want              int    // tags read
		code, msg         string // error expected
	}{
		{name: "header two", header: "a=1&b%20c=d%2Fe", want: 2},
		{name: "header empty value", header: "a=", want: 1},
		{name: "header key alone", header: "key", want: 1},
		{name: "header empty pairs", header: "&&a=1&", want: 1},
		{name: "header only separators", header: "&", want: 0},
		{name: "header empty key", header: "=", code: "InvalidArgument"},
		{name: "header duplicate", header: "a=1&a=2", code: "InvalidArgument"},
		{name: "header bad escape", header: "a=%zz", code: "InvalidArgument"},
		{name: "header eleven", header: "k0=1&k1=1&k2=1&k3=1&k4=1&k5=1&k6=1&k7=1&k8=1&k9=1&k10=1", code: "BadRequest", msg: "Object tags cannot be greater than 10"},
		{name: "header aws prefix", header: "aws:x=1", code: "InvalidTag", msg: "Your TagKey cannot be prefixed with aws:"},
		{name: "xml ok", xml: doc("k", "v", "é ü+-=._:/@", ""), want: 2},
		{name: "xml empty set", xml: doc(), want: 0},
		{name: "xml ten", xml: doc(many(10)...), want: 10},
		{name: "xml eleven", xml: doc(many(11)...), code: "BadRequest", msg: "Object tags cannot be greater than 10"},
		{name: "xml key 128", xml: doc(long(128), "v"), want: 1},
		{name: "xml key 129", xml: doc(long(129), "v"), code: "InvalidTag", msg: "The TagKey you have provided is too long, max 128"},
		{name: "xml value 257", xml: doc("k", long(257)), code: "InvalidTag", msg: "The TagValue you have provided is too long, max 256"},
		{name: "xml bad key char", xml: doc("k*", "v"), code: "InvalidTag", msg: "The TagKey you have provided is invalid"},
		{name: "xml tab in key", xml: doc("k\t", "v"), code: "InvalidTag", msg: "The TagKey you have provided is invalid"},
		{name: "xml empty key", xml: doc("", "v"), code: "InvalidTag", msg: "The TagKey you have provided is invalid"},
		{name: "xml bad value char", xml: doc("k", "v#"), code: "InvalidTag", msg: "The TagValue you have provided is invalid"},
		{name: "xml duplicate", xml: doc("k", "1", "k", "2"), code: "InvalidTag", msg: "Cannot provide multiple Tags with the same key"},
		{name: "xml no value", xml: "<Tagging><TagSet><Tag><Key>k</Key></Tag></TagSet></Tagging>", code: "MalformedXML"},
		{name: "xml broken", xml: "<Tagging><TagSet>", code: "MalformedXML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n int
			var err error
			if tt.xml != "" {
				tags, e := parseTaggingXML([]byte(tt.xml), maxObjectTags)
				n, err = len(tags), e
			} else {
				tags, e := parseTaggingHeader(http.Header{"X-Amz-Tagging": {tt.header}})
				n, err = len(tags), e
			}
			if tt.code == "" {
				if err != nil || n != tt.want {
					t.Fatalf("got %d tags, %v; want %d", n, err, tt.want)
				}
				return
			}
			var ae *apiError
			if !errors.As(err, &ae) || ae.Code != tt.code || (tt.msg != "" && ae.Message != tt.msg) {
				t.Fatalf("err = %v, want %s %q", err, tt.code, tt.msg)
			}
		})
	}
}

func TestBucketTagLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("<Tagging><TagSet>")
	for i := range 51 {
		b.WriteString("<Tag><Key>k" + strings.Repeat("x", i) + "</Key><Value>v</Value></Tag>")
	}
	b.WriteString("</TagSet></Tagging>")
	if _, err := parseTaggingXML([]byte(b.String()), maxBucketTags); err == nil || !strings.Contains(err.Error(), "InvalidTag") {
		t.Fatalf("51 bucket tags: err = %v, want InvalidTag", err)
	}
}
