package protocol

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

func TestSelectRange(t *testing.T) {
	parts := map[int]Part{1: {1, 0, 5}, 2: {2, 5, 0}, 3: {3, 5, 10}}
	lookup := func(n int) (Part, bool) { p, ok := parts[n]; return p, ok }
	tests := []struct {
		name      string
		multipart bool
		opts      store.GetOptions
		want      *store.ByteRange
		err       error
	}{
		{"whole", true, store.GetOptions{}, nil, nil},
		{"part 3", true, store.GetOptions{PartNumber: 3}, &store.ByteRange{Start: 5, End: 14}, nil},
		{"empty part", true, store.GetOptions{PartNumber: 2}, nil, nil},
		{"missing part", true, store.GetOptions{PartNumber: 4}, nil, store.ErrInvalidRange},
		{"single part 1", false, store.GetOptions{PartNumber: 1}, &store.ByteRange{Start: 0, End: 14}, nil}, // S3: 206 over the whole object
		{"single part 2", false, store.GetOptions{PartNumber: 2}, nil, store.ErrInvalidRange},
		{"part and range", true, store.GetOptions{PartNumber: 1, RangeSpec: "bytes=0-1"}, nil, store.ErrInvalidRequest},
		{"range spec", false, store.GetOptions{RangeSpec: "bytes=2-"}, &store.ByteRange{Start: 2, End: 14}, nil},
		{"range clipped", false, store.GetOptions{Range: &store.ByteRange{Start: 10, End: 100}}, &store.ByteRange{Start: 10, End: 14}, nil},
		{"range beyond", false, store.GetOptions{Range: &store.ByteRange{Start: 15, End: 20}}, nil, store.ErrInvalidRange},
		{"range reversed", false, store.GetOptions{Range: &store.ByteRange{Start: 3, End: 2}}, nil, store.ErrInvalidRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SelectRange(15, tc.multipart, lookup, tc.opts)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("range = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOverlap(t *testing.T) {
	tests := []struct {
		start, n, pStart, pSize int64
		off, cnt                int64
		ok                      bool
	}{
		{0, 10, 0, 5, 0, 5, true},
		{3, 10, 0, 5, 3, 2, true},
		{0, 3, 0, 5, 0, 3, true},
		{6, 2, 5, 5, 1, 2, true},
		{5, 5, 0, 5, 0, 0, false},
		{0, 5, 5, 5, 0, 0, false},
		{0, 10, 3, 0, 0, 0, false},
	}
	for _, tc := range tests {
		off, cnt, ok := Overlap(tc.start, tc.n, tc.pStart, tc.pSize)
		if off != tc.off || cnt != tc.cnt || ok != tc.ok {
			t.Errorf("Overlap(%d, %d, %d, %d) = %d, %d, %v; want %d, %d, %v", tc.start, tc.n, tc.pStart, tc.pSize, off, cnt, ok, tc.off, tc.cnt, tc.ok)
		}
	}
}

func TestCheckWriteConditions(t *testing.T) {
	tests := []struct {
		name    string
		opts    store.PutOptions
		exists  bool
		etag    string
		wantErr error
	}{
		{"none", store.PutOptions{}, true, `"a"`, nil},
		{"if-none-match new", store.PutOptions{IfNoneMatch: "*"}, false, "", nil},
		{"if-none-match exists", store.PutOptions{IfNoneMatch: "*"}, true, `"a"`, store.ErrPreconditionFailed},
		{"if-none-match etag", store.PutOptions{IfNoneMatch: `"a"`}, true, `"a"`, store.ErrInvalidArgument},
		{"if-match ok", store.PutOptions{IfMatch: `"a"`}, true, `"a"`, nil},
		{"if-match other", store.PutOptions{IfMatch: `"b"`}, true, `"a"`, store.ErrPreconditionFailed},
		{"if-match missing", store.PutOptions{IfMatch: `"a"`}, false, "", store.ErrNoSuchKey},
	}
	for _, tc := range tests {
		err := CheckWriteConditions(tc.opts, tc.exists, tc.etag)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.wantErr)
		}
	}
}

func TestCopySourceConditions(t *testing.T) {
	lm := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	info := store.ObjectInfo{ETag: `"a"`, LastModified: lm}
	tests := []struct {
		name    string
		c       store.Conditions
		wantErr error
	}{
		{"none", store.Conditions{}, nil},
		{"if-match ok", store.Conditions{IfMatch: `"a"`}, nil},
		{"if-match fails", store.Conditions{IfMatch: `"b"`}, store.ErrPreconditionFailed},
		// A 304 for GET is a 412 for a copy source.
		{"if-none-match", store.Conditions{IfNoneMatch: `"a"`}, store.ErrPreconditionFailed},
	}
	for _, tc := range tests {
		err := CopySourceConditions(tc.c, info)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || errors.Is(err, store.ErrNotModified) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.wantErr)
		}
	}
}

func TestVerifyCompleteChecksum(t *testing.T) {
	composite := store.Checksum{Algorithm: "CRC32", Value: "abc=-3", Type: store.ChecksumComposite}
	full := store.Checksum{Algorithm: "CRC32", Value: "abc=", Type: store.ChecksumFullObject}
	tests := []struct {
		name string
		sent map[string]string
		ck   store.Checksum
		want error // nil: accepted
	}{
		{"nothing sent", nil, composite, nil},
		{"with suffix", map[string]string{"crc32": "abc=-3"}, composite, nil},
		{"without suffix", map[string]string{"CRC32": "abc="}, composite, nil},
		{"wrong", map[string]string{"CRC32": "abd="}, composite, store.ErrBadDigest},
		{"wrong count", map[string]string{"CRC32": "abc=-2"}, composite, store.ErrBadDigest},
		{"suffix on a full-object checksum", map[string]string{"CRC32": "abc=-3"}, full, store.ErrBadDigest},
		{"full object", map[string]string{"CRC32": "abc="}, full, nil},
		{"other algorithm", map[string]string{"SHA256": "zzz"}, composite, store.ErrInvalidRequest},
	}
	for _, tc := range tests {
		err := VerifyCompleteChecksum(store.PutOptions{Checksums: tc.sent}, tc.ck)
		if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestPartPutOptions(t *testing.T) {
	crcUp := store.Upload{ChecksumAlgorithm: store.AlgCRC32, ChecksumType: store.ChecksumComposite}
	trailer := func(alg string) func() (string, string, error) {
		return func() (string, string, error) { return alg, "AAAAAA==", nil }
	}
	tests := []struct {
		name    string
		u       store.Upload
		opts    store.PutOptions
		wantAlg string // opts.ChecksumAlgorithm after
		err     bool   // option check fails
		trErr   bool   // the wrapped trailer fails
	}{
		{"no upload algorithm", store.Upload{}, store.PutOptions{}, "", false, false},
		{"filled in", crcUp, store.PutOptions{}, store.AlgCRC32, false, false},
		{"same declared", crcUp, store.PutOptions{Checksums: map[string]string{"CRC32": "x"}}, "", false, false},
		{"other declared", crcUp, store.PutOptions{Checksums: map[string]string{"SHA256": "x"}}, "", true, false},
		{"other announced", crcUp, store.PutOptions{ChecksumAlgorithm: "CRC32C"}, "", true, false},
		{"same trailer", crcUp, store.PutOptions{TrailerChecksum: trailer("CRC32")}, store.AlgCRC32, false, false},
		{"other trailer", crcUp, store.PutOptions{TrailerChecksum: trailer("XXHASH3")}, store.AlgCRC32, false, true},
	}
	for _, tc := range tests {
		got, err := PartPutOptions(tc.u, tc.opts)
		if tc.err {
			if !errors.Is(err, store.ErrInvalidRequest) || !strings.HasPrefix(store.ClientMessage(err), "Checksum Type mismatch occurred, expected checksum Type: crc32") {
				t.Errorf("%s: err = %v (%q)", tc.name, err, store.ClientMessage(err))
			}
			continue
		}
		if err != nil || got.ChecksumAlgorithm != tc.wantAlg {
			t.Errorf("%s: alg %q err %v, want %q", tc.name, got.ChecksumAlgorithm, err, tc.wantAlg)
			continue
		}
		if got.TrailerChecksum != nil {
			_, _, terr := got.TrailerChecksum()
			if (terr != nil) != tc.trErr {
				t.Errorf("%s: trailer err = %v, want failure %v", tc.name, terr, tc.trErr)
			}
		}
	}
}

func TestCompleteChecksum(t *testing.T) {
	v := func(alg string, data []byte) string { return store.ChecksumOf(alg, data) }
	a, b := []byte("part one"), []byte("part two")
	parts := func(alg string) []store.PartInfo {
		return []store.PartInfo{
			{Number: 1, Size: int64(len(a)), Checksum: store.Checksum{Algorithm: alg, Value: v(alg, a)}},
			{Number: 2, Size: int64(len(b)), Checksum: store.Checksum{Algorithm: alg, Value: v(alg, b)}},
		}
	}
	req := func(alg string, with bool) []store.CompletePart {
		out := []store.CompletePart{{Number: 1}, {Number: 2}}
		if with {
			out[0].Checksums = map[string]string{alg: v(alg, a)}
			out[1].Checksums = map[string]string{alg: v(alg, b)}
		}
		return out
	}
	size := func(n int64) *int64 { return &n }
	sha := store.Upload{ChecksumAlgorithm: store.AlgSHA256, ChecksumType: store.ChecksumComposite}
	crcFull := store.Upload{ChecksumAlgorithm: store.AlgCRC32, ChecksumType: store.ChecksumFullObject}
	whole := append(append([]byte{}, a...), b...)
	tests := []struct {
		name             string
		u                store.Upload
		req              []store.CompletePart
		chosen           []store.PartInfo
		opts             store.PutOptions
		wantAlg, wantVal string
		wantType         string
		msg              string // S3 message of the expected InvalidRequest
	}{
		{"composite", sha, req("SHA256", true), parts("SHA256"), store.PutOptions{}, "SHA256", "", store.ChecksumComposite, ""},
		{"composite, part checksums missing", sha, req("SHA256", false), parts("SHA256"), store.PutOptions{}, "", "", "",
			"The upload was created using a sha256 checksum. The complete request must include the checksum for each part. It was missing for part 1 in the request."},
		{"full object may omit part checksums", crcFull, req("CRC32", false), parts("CRC32"), store.PutOptions{}, "CRC32", v("CRC32", whole), store.ChecksumFullObject, ""},
		{"type mismatch", crcFull, req("CRC32", true), parts("CRC32"), store.PutOptions{ChecksumType: "COMPOSITE"}, "", "", "",
			"The upload was created using the FULL_OBJECT checksum mode. The complete request must use the same checksum mode."},
		{"size matches", crcFull, req("CRC32", true), parts("CRC32"), store.PutOptions{MPObjectSize: size(16)}, "CRC32", v("CRC32", whole), store.ChecksumFullObject, ""},
		{"size mismatch", crcFull, req("CRC32", true), parts("CRC32"), store.PutOptions{MPObjectSize: size(17)}, "", "", "",
			"The provided 'x-amz-mp-object-size' header value 17 does not match what was computed: 16"},
		{"default crc64nvme", store.Upload{}, req("", false), parts("CRC64NVME"), store.PutOptions{}, "CRC64NVME", v("CRC64NVME", whole), store.ChecksumFullObject, ""},
		{"no default over other parts", store.Upload{}, req("", false), parts("CRC32"), store.PutOptions{}, "", "", "", ""},
	}
	for _, tc := range tests {
		ck, err := CompleteChecksum(tc.u, tc.req, tc.chosen, tc.opts)
		if tc.msg != "" {
			if !errors.Is(err, store.ErrInvalidRequest) || store.ClientMessage(err) != tc.msg {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.msg)
			}
			continue
		}
		if err != nil || ck.Algorithm != tc.wantAlg || ck.Type != tc.wantType || (tc.wantVal != "" && ck.Value != tc.wantVal) {
			t.Errorf("%s: %+v %v, want %s %s %s", tc.name, ck, err, tc.wantAlg, tc.wantType, tc.wantVal)
		}
	}
}
