package conformance

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strconv"
	"testing"

	"github.com/s3gate/s3gate/internal/testgw"
)

// TestAWSMatchChunked checks the answers to aws-chunked uploads that S3
// refuses from their headers or framing, through a running gateway: each
// refusal has S3's status, code and message, and leaves no object behind.
func TestAWSMatchChunked(t *testing.T) {
	gw := testgw.Start(t, testgw.Options{Engine: testgw.Embedded})
	cl := sdkClient(t, gw)
	bucket := mustBucket(t, cl, "awschunked")
	data := bytes.Repeat([]byte("z"), 9010) // 9000 B + 10 B chunks
	sizes := []int{9000, 10}
	crc := refSum("CRC32", data)
	const (
		unsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
		single          = "Expecting a single x-amz-checksum- header"
		notSupported    = "The value specified in the x-amz-trailer header is not supported"
	)
	streaming := func(payload string, h http.Header, body []byte) rawReq {
		h.Set("Content-Encoding", "aws-chunked")
		if _, ok := h["X-Amz-Decoded-Content-Length"]; !ok {
			h.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
		}
		return rawReq{Method: http.MethodPut, Header: h, Body: body, Payload: payload}
	}
	for i, tc := range []struct {
		name       string
		req        rawReq
		wantStatus int
		wantCode   string
		wantMsg    string // "": not checked
	}{
		// Item 1: a single trailer, and only a checksum one.
		{"two checksum trailers, second wrong", streaming(unsignedTrailer,
			http.Header{"X-Amz-Trailer": {"x-amz-checksum-crc32,x-amz-checksum-sha256"}},
			chunkedBody(data, sizes, "x-amz-checksum-crc32:"+crc, "x-amz-checksum-sha256:"+refSum("SHA256", data[1:]))),
			400, "InvalidRequest", single},
		{"metadata trailer", streaming(unsignedTrailer,
			http.Header{"X-Amz-Trailer": {"x-amz-meta-foo"}}, chunkedBody(data, sizes, "x-amz-meta-foo:bar")),
			400, "InvalidRequest", notSupported},
		{"content-md5 trailer", streaming(unsignedTrailer,
			http.Header{"X-Amz-Trailer": {"content-md5"}}, chunkedBody(data, sizes, "content-md5:AAAAAAAAAAAAAAAAAAAAAA==")),
			400, "InvalidRequest", notSupported},
		// Item 2: a checksum header beside a checksum trailer.
		{"checksum header and trailer", streaming(unsignedTrailer,
			http.Header{"X-Amz-Trailer": {"x-amz-checksum-crc32"}, "X-Amz-Checksum-Sha256": {refSum("SHA256", data)}},
			chunkedBody(data, sizes, "x-amz-checksum-crc32:"+crc)),
			400, "InvalidRequest", single},
		// Item 3: aws-chunked framing under UNSIGNED-PAYLOAD.
		{"aws-chunked with UNSIGNED-PAYLOAD", streaming("UNSIGNED-PAYLOAD", http.Header{}, chunkedBody(data, sizes)),
			400, "InvalidArgument", "aws-chunked encoding is not supported when x-amz-content-sha256 UNSIGNED-PAYLOAD is supplied"},
		// Item 4: a streaming upload must declare its decoded length.
		{"unsigned streaming without decoded length", streaming(unsignedTrailer,
			http.Header{"X-Amz-Decoded-Content-Length": nil}, chunkedBody(data, sizes)),
			411, "MissingContentLength", "You must provide the Content-Length HTTP header."},
		{"signed streaming without decoded length", streaming("STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
			http.Header{"X-Amz-Decoded-Content-Length": nil}, chunkedBody(data, sizes)),
			411, "MissingContentLength", "You must provide the Content-Length HTTP header."},
		// Item 5: framing that does not parse is a body that ended unexpectedly.
		{"invalid hex size", streaming(unsignedTrailer, http.Header{},
			bytes.Replace(chunkedBody(data, sizes), []byte("2328\r\n"), []byte("23g8\r\n"), 1)),
			400, "IncompleteBody", "The request body terminated unexpectedly"},
		{"LF only after chunk data", streaming(unsignedTrailer, http.Header{},
			bytes.Replace(chunkedBody(data, sizes), []byte("z\r\na\r\n"), []byte("z\na\r\n"), 1)),
			400, "IncompleteBody", "The request body terminated unexpectedly"},
		{"chunk data longer than its size", streaming(unsignedTrailer, http.Header{},
			bytes.Replace(chunkedBody(data, sizes), []byte("2328\r\n"), []byte("2327\r\n"), 1)),
			400, "IncompleteBody", "The request body terminated unexpectedly"},
		{"signed chunk without chunk-signature", streaming("STREAMING-AWS4-HMAC-SHA256-PAYLOAD", http.Header{},
			chunkedBody(data, sizes)),
			400, "IncompleteBody", "The request body terminated unexpectedly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "refused-" + strconv.Itoa(i)
			tc.req.Path = "/" + bucket + "/" + key
			status, _, body := doRaw(t, gw, tc.req)
			wantRawError(t, tc.name, status, body, tc.wantStatus, tc.wantCode)
			if tc.wantMsg != "" && errMessage(body) != tc.wantMsg {
				t.Errorf("message %q, want %q", errMessage(body), tc.wantMsg)
			}
			objectAbsent(t, cl, bucket, key)
		})
	}

	// A signed payload hash with Content-Encoding: aws-chunked is an
	// ordinary PUT: S3 accepts it (the framing rule is for UNSIGNED-PAYLOAD).
	t.Run("aws-chunked with signed payload hash", func(t *testing.T) {
		status, _, body := doRaw(t, gw, rawReq{Method: http.MethodPut, Path: "/" + bucket + "/hexhash",
			Header: http.Header{"Content-Encoding": {"aws-chunked"}}, Body: data})
		if status != http.StatusOK {
			t.Fatalf("PUT: %d %s", status, body)
		}
		readBackSDK(t, cl, bucket, "hexhash", data)
	})

	// Item 6: InvalidChunkSizeError names the chunk and its size.
	t.Run("InvalidChunkSizeError details", func(t *testing.T) {
		small := bytes.Repeat([]byte("s"), 8192+100)
		status, body := putChunked(t, gw, bucket, "small-chunk", small, []int{100, 8192}, "x-amz-checksum-crc32", refSum("CRC32", small))
		wantRawError(t, "100 B then 8 KiB chunks", status, body, http.StatusBadRequest, "InvalidChunkSizeError")
		var e struct {
			Chunk        string `xml:"Chunk"`
			BadChunkSize string `xml:"BadChunkSize"`
		}
		if err := xml.Unmarshal(body, &e); err != nil || e.Chunk != "1" || e.BadChunkSize != "100" {
			t.Fatalf("Chunk %q BadChunkSize %q (err %v), want 1 and 100; body %s", e.Chunk, e.BadChunkSize, err, body)
		}
		objectAbsent(t, cl, bucket, "small-chunk")
	})
}
