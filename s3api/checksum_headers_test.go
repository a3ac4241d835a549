package s3api

import (
	"errors"
	"net/http"
	"testing"

	"github.com/s3gate/s3gate/store"
)

func TestParseChecksumValues(t *testing.T) {
	crc := store.ChecksumOf(store.AlgCRC32, []byte("x"))
	xx := store.ChecksumOf(store.AlgXXHASH128, []byte("x"))
	tests := []struct {
		name      string
		h         http.Header
		composite bool
		want      map[string]string
		err       string // expected message; "" = success
	}{
		{"none", http.Header{}, false, nil, ""},
		{"crc32", http.Header{"X-Amz-Checksum-Crc32": {crc}}, false, map[string]string{"CRC32": crc}, ""},
		{"xxhash128", http.Header{"X-Amz-Checksum-Xxhash128": {xx}}, false, map[string]string{"XXHASH128": xx}, ""},
		{"composite suffix on a put", http.Header{"X-Amz-Checksum-Crc32": {crc + "-3"}}, false, nil, "Value for x-amz-checksum-crc32 header is invalid."},
		{"composite suffix on complete", http.Header{"X-Amz-Checksum-Crc32": {crc + "-3"}}, true, map[string]string{"CRC32": crc + "-3"}, ""},
		{"bad suffix on complete", http.Header{"X-Amz-Checksum-Crc32": {crc + "-x"}}, true, nil, "Value for x-amz-checksum-crc32 header is invalid."},
		{"wrong size", http.Header{"X-Amz-Checksum-Xxhash64": {crc}}, false, nil, "Value for x-amz-checksum-xxhash64 header is invalid."},
		{"two algorithms", http.Header{"X-Amz-Checksum-Crc32": {crc}, "X-Amz-Checksum-Xxhash128": {xx}}, false, nil, errMultipleChecksums.Message},
		{"repeated header", http.Header{"X-Amz-Checksum-Crc32": {crc, crc}}, false, nil, "Value for x-amz-checksum-crc32 header is invalid."},
	}
	for _, tc := range tests {
		got, err := parseChecksumValues(tc.h, tc.composite)
		if tc.err != "" {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Code != "InvalidRequest" || ae.Message != tc.err {
				t.Errorf("%s: err = %v, want InvalidRequest %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) || got[firstKey(tc.want)] != tc.want[firstKey(tc.want)] {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
}

func firstKey(m map[string]string) string {
	for k := range m {
		return k
	}
	return ""
}

func TestParseChecksumAlgorithm(t *testing.T) {
	tests := []struct {
		sdk, plain, want string
		bad              bool
	}{
		{"", "", "", false},
		{"crc32", "", "CRC32", false},
		{"", "xxhash3", "XXHASH3", false},
		{"SHA512", "sha512", "SHA512", false},
		{"CRC32", "SHA1", "", true},
		{"MD4", "", "", true},
	}
	for _, tc := range tests {
		h := http.Header{}
		if tc.sdk != "" {
			h.Set("x-amz-sdk-checksum-algorithm", tc.sdk)
		}
		if tc.plain != "" {
			h.Set("x-amz-checksum-algorithm", tc.plain)
		}
		got, err := parseChecksumAlgorithm(h)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("%q/%q: %q %v, want %q bad=%v", tc.sdk, tc.plain, got, err, tc.want, tc.bad)
		}
	}
}

// TestClientMessage: a store error that carries S3's text answers with it,
// under the sentinel's code.
func TestClientMessage(t *testing.T) {
	err := store.ClientError(store.ErrInvalidRequest, "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.")
	e, internal := toAPIError(errors.Join(errors.New("context"), err))
	if internal || e.Code != "InvalidRequest" || e.Status != http.StatusBadRequest || e.Message != store.ClientMessage(err) {
		t.Fatalf("toAPIError = %+v internal=%v", e, internal)
	}
	if e, _ := toAPIError(store.ErrInvalidRequest); e.Message != errInvalidRequest.Message {
		t.Fatalf("plain sentinel lost its default message: %+v", e)
	}
}
