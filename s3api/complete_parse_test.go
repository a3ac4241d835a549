package s3api

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// decodeCompleteReflect is the reference parseCompleteRequest must agree
// with: encoding/xml's decoder on the body's struct shape.
func decodeCompleteReflect(body []byte) ([]store.CompletePart, error) {
	var req struct {
		XMLName xml.Name `xml:"CompleteMultipartUpload"`
		Parts   []struct {
			PartNumber int    `xml:"PartNumber"`
			ETag       string `xml:"ETag"`
			checksumFields
		} `xml:"Part"`
	}
	if err := decodeXML(body, &req); err != nil {
		return nil, err
	}
	if len(req.Parts) == 0 || len(req.Parts) > store.MaxPartNumber {
		return nil, errMalformedXML
	}
	parts := make([]store.CompletePart, 0, len(req.Parts))
	for _, p := range req.Parts {
		if p.PartNumber < 1 || p.PartNumber > store.MaxPartNumber {
			return nil, errInvalidPartNumber
		}
		parts = append(parts, store.CompletePart{Number: p.PartNumber, ETag: unquoteETag(p.ETag), Checksums: p.checksumMap()})
	}
	return parts, nil
}

// completeBody is a CompleteMultipartUpload document of n parts.
func completeBody(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&sb, `<Part><ETag>"%032x"</ETag><PartNumber>%d</PartNumber></Part>`, i, i)
	}
	sb.WriteString(`</CompleteMultipartUpload>`)
	return []byte(sb.String())
}

// TestParseCompleteRequest: the token walk answers as encoding/xml's decoder
// does, parts and errors, on well-formed, odd and broken bodies.
func TestParseCompleteRequest(t *testing.T) {
	p := func(s string) string { return "<CompleteMultipartUpload>" + s + "</CompleteMultipartUpload>" }
	tests := []struct{ name, body string }{
		{"one part", p(`<Part><PartNumber>1</PartNumber><ETag>"abc"</ETag></Part>`)},
		{"namespace and order", `<?xml version="1.0"?><!-- c --><s3:CompleteMultipartUpload xmlns:s3="http://s3.amazonaws.com/doc/2006-03-01/"><s3:Part><s3:ETag>e</s3:ETag><s3:PartNumber> 2 </s3:PartNumber></s3:Part></s3:CompleteMultipartUpload>`},
		{"checksums", p(`<Part><ChecksumCRC32> AAAAAA== </ChecksumCRC32><ChecksumSHA256>x</ChecksumSHA256><ChecksumSHA256>y</ChecksumSHA256><ETag>e</ETag><PartNumber>3</PartNumber></Part>`)},
		{"unknown checksum and elements", p(`<Other><Part><PartNumber>7</PartNumber></Part></Other><Part><ChecksumFOO>z</ChecksumFOO><Checksum>w</Checksum><Size>5</Size><PartNumber>1</PartNumber><ETag>e</ETag></Part>`)},
		{"nested and comments in text", p(`<Part><PartNumber>1<x>9</x>0</PartNumber><ETag>a<!-- c -->b<![CDATA[<c>]]>&amp;</ETag></Part>`)},
		{"repeated fields", p(`<Part><PartNumber>1</PartNumber><PartNumber>4</PartNumber><ETag>a</ETag><ETag>b</ETag></Part>`)},
		{"attributes", `<CompleteMultipartUpload a="1"><Part b="2"><PartNumber c="3">5</PartNumber><ETag>e</ETag></Part></CompleteMultipartUpload>`},
		{"trailing content", p(`<Part><PartNumber>1</PartNumber><ETag>e</ETag></Part>`) + `<junk>`},
		{"empty part number", p(`<Part><PartNumber></PartNumber><ETag>e</ETag></Part>`)},
		{"blank part number", p(`<Part><PartNumber> </PartNumber><ETag>e</ETag></Part>`)},
		{"part number 0", p(`<Part><PartNumber>0</PartNumber></Part>`)},
		{"part number 10001", p(`<Part><PartNumber>10001</PartNumber></Part>`)},
		{"part number text", p(`<Part><PartNumber>one</PartNumber></Part>`)},
		{"part number overflow", p(`<Part><PartNumber>99999999999999999999</PartNumber></Part>`)},
		{"no parts", p(``)},
		{"self-closed root", `<CompleteMultipartUpload/>`},
		{"wrong root", `<Complete><Part><PartNumber>1</PartNumber></Part></Complete>`},
		{"unclosed", `<CompleteMultipartUpload><Part>`},
		{"mismatched end", p(`<Part><PartNumber>1</ETag></Part>`)},
		{"empty", ``},
		{"blank", "  \n"},
		{"too deep", p(strings.Repeat("<a>", maxXMLDepth) + strings.Repeat("</a>", maxXMLDepth))},
		{"10,000 parts", string(completeBody(store.MaxPartNumber))},
		{"10,001 parts", string(completeBody(store.MaxPartNumber + 1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantErr := decodeCompleteReflect([]byte(tt.body))
			got, err := parseCompleteRequest([]byte(tt.body))
			if (err == nil) != (wantErr == nil) || (err != nil && toAPIErrorCode(err) != toAPIErrorCode(wantErr)) {
				t.Fatalf("error %v, want %v", err, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("parts %+v, want %+v", got, want)
			}
		})
	}
}

// brokenBody hands out r, then fails.
type brokenBody struct{ r io.Reader }

var errBodyGone = errors.New("body gone")

func (f brokenBody) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errBodyGone
	}
	return n, err
}

// TestReadCompleteRequest: the one-pass read keeps readBody's limits and
// the order of its answers.
func TestReadCompleteRequest(t *testing.T) {
	valid := completeBody(3)
	tests := []struct {
		name    string
		body    io.Reader
		limit   int64
		want    error // nil: parts
		parts   int
		maxRead int64 // most bytes the body reader may hand out (0: no check)
	}{
		{"valid", bytes.NewReader(valid), 8 << 20, nil, 3, 0},
		{"10,000 parts", bytes.NewReader(completeBody(store.MaxPartNumber)), 8 << 20, nil, store.MaxPartNumber, 0},
		{"17 nested elements, then many more", strings.NewReader("<CompleteMultipartUpload>" + strings.Repeat("<a>", maxXMLDepth) + strings.Repeat("</a>", maxXMLDepth) + strings.Repeat("<b/>", 1<<20)), 8 << 20, errMalformedXML, 0, 64 << 10},
		{"1,000,000 nested elements", bytes.NewReader(nested(1_000_000)), 8 << 20, errMalformedXML, 0, 64 << 10},
		{"too many elements", bytes.NewReader(append([]byte("<CompleteMultipartUpload>"), bytes.Repeat([]byte("<a/>"), 2_000_000)...)), 8 << 20, errMalformedXML, 0, 1 << 20},
		{"one huge token", strings.NewReader("<CompleteMultipartUpload>" + strings.Repeat("x", 4<<20)), 8 << 20, errMalformedXML, 0, 512 << 10},
		{"limits after the document", bytes.NewReader(append(valid, nested(1_000)...)), 8 << 20, errMalformedXML, 0, 0},
		{"junk after the document", bytes.NewReader(append(valid, "<a></b>"...)), 8 << 20, nil, 3, 0},
		{"over the size limit", bytes.NewReader(valid), int64(len(valid)) - 1, errMaxMessageLength, 0, 0},
		{"over the size limit, not XML", strings.NewReader("<a></b>" + strings.Repeat(" ", 2<<10)), 1 << 10, errMaxMessageLength, 0, 0},
		{"reader fails", brokenBody{bytes.NewReader(valid)}, 8 << 20, errBodyGone, 0, 0},
		{"reader fails after a syntax error", brokenBody{strings.NewReader("<a></b>" + strings.Repeat(" ", 100<<10))}, 8 << 20, errBodyGone, 0, 0},
		{"not XML", strings.NewReader("<a></b>"), 8 << 20, errMalformedXML, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := &countReader{r: tt.body}
			parts, err := readCompleteRequest(&request{body: &countingReader{r: cr}}, tt.limit)
			if tt.want == nil {
				if err != nil || len(parts) != tt.parts || parts[len(parts)-1].Number != tt.parts {
					t.Fatalf("%d parts, error %v; want %d parts", len(parts), err, tt.parts)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
			if tt.maxRead > 0 && cr.n > tt.maxRead {
				t.Errorf("read %d bytes of the body before refusing it, want at most %d", cr.n, tt.maxRead)
			}
		})
	}
}

func toAPIErrorCode(err error) string {
	e, _ := toAPIError(err)
	return e.Code
}

// BenchmarkReadComplete compares the one-pass read and token walk with
// what it replaced (readBody's scan, then encoding/xml's reflective decoder)
// on bodies of 1,000 and 10,000 parts.
func BenchmarkReadComplete(b *testing.B) {
	for _, n := range []int{1000, store.MaxPartNumber} {
		body := completeBody(n)
		for _, f := range []struct {
			name string
			read func(*request) ([]store.CompletePart, error)
		}{
			{"one-pass", func(rq *request) ([]store.CompletePart, error) { return readCompleteRequest(rq, bigXMLBody) }},
			{"scan-then-reflect", func(rq *request) ([]store.CompletePart, error) {
				data, err := readBody(rq, bigXMLBody)
				if err != nil {
					return nil, err
				}
				return decodeCompleteReflect(data)
			}},
		} {
			b.Run(fmt.Sprintf("%s-%d", f.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := f.read(&request{body: &countingReader{r: bytes.NewReader(body)}}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
