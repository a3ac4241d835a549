package s3api

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// BenchmarkListKeyedPage1000 serves one ListObjectVersions page of 1,000
// versions (every fourth a delete marker) and one ListMultipartUploads page
// of 1,000 uploads from the in-memory store: the gateway's CPU per page of
// those listings (encoding included; the fake store's sort of its uploads
// too, the same whatever the encoder).
func BenchmarkListKeyedPage1000(b *testing.B) {
	versions := store.ListVersionsResult{Truncated: true, NextKeyMarker: "p49/000999", NextVersionIDMarker: "v999"}
	for i := range 1000 {
		v := objInfo(fmt.Sprintf("p%02d/%06d", i%50, i))
		v.VersionID, v.IsLatest, v.DeleteMarker = fmt.Sprintf("v%03d", i), i%2 == 0, i%4 == 3
		v.ETag = "0123456789abcdef0123456789abcdef"
		if i%3 == 0 {
			v.Checksum = store.Checksum{Algorithm: store.AlgCRC32C, Value: "AAAAAA=="}
		}
		versions.Versions = append(versions.Versions, v)
	}
	for _, tc := range []struct {
		name, q string
		fill    func(e *env)
	}{
		{"versions", "versions", func(e *env) { e.st.listVersions = &versions }},
		{"versions-url", "versions&encoding-type=url", func(e *env) { e.st.listVersions = &versions }},
		{"uploads", "uploads", func(e *env) {
			for i := range 1000 {
				id := fmt.Sprintf("upload-%06d", i)
				e.st.uploads[id] = &memUpload{up: store.Upload{Bucket: "b", Key: fmt.Sprintf("p%02d/%06d", i%50, i),
					UploadID: id, Initiated: fixedTime}}
			}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newEnv(&testing.T{}, Config{})
			e.mustBucket("b")
			tc.fill(e)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				e.h.ServeHTTP(w, httptest.NewRequest("GET", "/b?"+tc.q, nil))
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}
