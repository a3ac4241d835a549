package s3api

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// nested returns n nested elements: <a><a>...</a></a>.
func nested(n int) []byte {
	return []byte(strings.Repeat("<a>", n) + strings.Repeat("</a>", n))
}

// countReader counts what the body reader handed out.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestReadBodyXMLLimits(t *testing.T) {
	completeBody := func(parts int) []byte {
		var b strings.Builder
		b.WriteString(`<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
		for i := 1; i <= parts; i++ {
			b.WriteString(`<Part><PartNumber>1</PartNumber><ETag>"0123456789abcdef0123456789abcdef"</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part>`)
		}
		b.WriteString(`</CompleteMultipartUpload>`)
		return []byte(b.String())
	}
	tests := []struct {
		name      string
		body      []byte
		limit     int64
		wantErr   error // nil: read whole
		maxRead   int64 // most bytes the body reader may hand out (0: no check)
		wantBytes bool
	}{
		{"1,000,000 nested elements", nested(1_000_000), 8 << 20, errMalformedXML, 64 << 10, false},
		{"17 nested elements", nested(17), 8 << 20, errMalformedXML, 0, false},
		{"16 nested elements", nested(16), 8 << 20, nil, 0, true},
		{"too many elements", bytes.Repeat([]byte("<a/>"), 2_000_000), 8 << 20, errMalformedXML, 1 << 20, false},
		{"one huge token", []byte("<a>" + strings.Repeat("x", 4<<20) + "</a>"), 8 << 20, errMalformedXML, 512 << 10, false},
		{"huge attribute", []byte(`<a b="` + strings.Repeat("x", 4<<20) + `"/>`), 8 << 20, errMalformedXML, 512 << 10, false},
		{"10,000 parts", completeBody(10_000), 8 << 20, nil, 0, true},
		{"not well-formed: read whole", []byte("<a><b></a>" + strings.Repeat(" ", 100<<10)), 8 << 20, nil, 0, true},
		{"empty", nil, 1 << 20, nil, 0, true},
		{"over the size limit", completeBody(100), 1 << 10, errMaxMessageLength, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cr := &countReader{r: bytes.NewReader(tc.body)}
			rq := &request{body: &countingReader{r: cr}}
			got, err := readBody(rq, tc.limit)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("readBody: error %v, want %v", err, tc.wantErr)
			}
			if tc.maxRead > 0 && cr.n > tc.maxRead {
				t.Errorf("read %d bytes of the body before refusing it, want at most %d", cr.n, tc.maxRead)
			}
			if tc.wantBytes && !bytes.Equal(got, tc.body) {
				t.Errorf("readBody returned %d bytes, want the %d of the body", len(got), len(tc.body))
			}
		})
	}
}

func TestDecodeXMLLimits(t *testing.T) {
	var v struct {
		A string `xml:"a"`
	}
	if err := decodeXML(nested(1_000_000), &v); !errors.Is(err, errMalformedXML) || !strings.Contains(err.Error(), errXMLLimit.Error()) {
		t.Errorf("decode of 1,000,000 nested elements: %v, want MalformedXML from the depth limit", err)
	}
	wide := append(append([]byte("<r>"), bytes.Repeat([]byte("<a/>"), maxXMLElements+1)...), "</r>"...)
	if err := decodeXML(wide, &v); !errors.Is(err, errMalformedXML) {
		t.Errorf("decode of too many elements: %v, want MalformedXML", err)
	}
	req, err := parseDeleteRequest([]byte(`<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet><Object><Key>k1</Key></Object><Object><Key>k2</Key><VersionId>null</VersionId></Object></Delete>`))
	if err != nil || len(req.Objects) != 2 || req.Objects[1].Key != "k2" || !req.Quiet {
		t.Errorf("parse of a valid Delete body through the depth limit: %+v, %v", req, err)
	}
}

func BenchmarkReadBodyNested(b *testing.B) {
	body := nested(1_000_000)
	b.ReportAllocs()
	for b.Loop() {
		rq := &request{body: &countingReader{r: bytes.NewReader(body)}}
		if _, err := readBody(rq, 8<<20); !errors.Is(err, errMalformedXML) {
			b.Fatal(err)
		}
	}
}
