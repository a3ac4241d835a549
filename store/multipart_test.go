package store

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/minio/crc64nvme"
)

func part(n int, size int64, etag string) PartInfo {
	return PartInfo{Number: n, Size: size, ETag: etag}
}

func TestCheckCompleteParts(t *testing.T) {
	e := func(s string) string { return strings.Repeat(s, 32) }
	have := map[int]PartInfo{
		1: part(1, MinPartSize, e("a")),
		2: part(2, MinPartSize, e("b")),
		3: part(3, 10, e("c")),
		5: {Number: 5, Size: MinPartSize + 1, ETag: e("d"), Checksum: Checksum{Algorithm: AlgCRC32, Value: "AAAAAA=="}},
		7: part(7, MinPartSize-1, e("f")),
		9: part(9, 1, e("9")),
	}
	tests := []struct {
		name string
		req  []CompletePart
		want []int
		err  error
	}{
		{"all in order", []CompletePart{{Number: 1, ETag: e("a")}, {Number: 2, ETag: `"` + e("b") + `"`}, {Number: 3, ETag: e("c")}}, []int{1, 2, 3}, nil},
		{"gaps allowed", []CompletePart{{Number: 1, ETag: e("a")}, {Number: 5, ETag: e("d")}}, []int{1, 5}, nil},
		{"subset, small last", []CompletePart{{Number: 2, ETag: e("b")}, {Number: 7, ETag: e("f")}}, []int{2, 7}, nil},
		{"single small part", []CompletePart{{Number: 3, ETag: e("c")}}, []int{3}, nil},
		{"etag case-insensitive", []CompletePart{{Number: 1, ETag: strings.ToUpper(e("a"))}}, []int{1}, nil},
		{"checksum matches", []CompletePart{{Number: 5, ETag: e("d"), Checksums: map[string]string{"CRC32": "AAAAAA=="}}}, []int{5}, nil},
		{"checksum of other algorithm ignored", []CompletePart{{Number: 5, ETag: e("d"), Checksums: map[string]string{"SHA1": "x"}}}, []int{5}, nil},
		{"empty", nil, nil, ErrInvalidRequest},
		{"descending", []CompletePart{{Number: 2, ETag: e("b")}, {Number: 1, ETag: e("a")}}, nil, ErrInvalidPartOrder},
		{"duplicate", []CompletePart{{Number: 1, ETag: e("a")}, {Number: 1, ETag: e("a")}}, nil, ErrInvalidPartOrder},
		{"missing part", []CompletePart{{Number: 1, ETag: e("a")}, {Number: 4, ETag: e("a")}}, nil, ErrInvalidPart},
		{"wrong etag", []CompletePart{{Number: 1, ETag: e("b")}}, nil, ErrInvalidPart},
		{"checksum mismatch", []CompletePart{{Number: 5, ETag: e("d"), Checksums: map[string]string{"crc32": "AQAAAA=="}}}, nil, ErrInvalidPart},
		{"small part not last", []CompletePart{{Number: 3, ETag: e("c")}, {Number: 5, ETag: e("d")}}, nil, ErrEntityTooSmall},
		{"just under the minimum not last", []CompletePart{{Number: 7, ETag: e("f")}, {Number: 9, ETag: e("9")}}, nil, ErrEntityTooSmall},
		{"unknown part after a small one", []CompletePart{{Number: 7, ETag: e("f")}, {Number: 8, ETag: e("f")}}, nil, ErrInvalidPart},
		{"part number zero", []CompletePart{{Number: 0, ETag: e("a")}}, nil, ErrInvalidArgument},
		{"part number too big", []CompletePart{{Number: MaxPartNumber + 1, ETag: e("a")}}, nil, ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckCompleteParts(tt.req, have)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d parts, want %d", len(got), len(tt.want))
			}
			for i, p := range got {
				if p.Number != tt.want[i] || p.ETag != have[p.Number].ETag {
					t.Fatalf("part %d = %+v, want number %d", i, p, tt.want[i])
				}
			}
		})
	}
	// Order is checked before sizes: a small first part followed by a lower
	// number is an order error.
	_, err := CheckCompleteParts([]CompletePart{{Number: 7, ETag: e("f")}, {Number: 1, ETag: "x"}}, have)
	if !errors.Is(err, ErrInvalidPartOrder) {
		t.Fatalf("order is checked first: %v", err)
	}
}

func TestMultipartETag(t *testing.T) {
	// The well-known shape: hex(md5(md5(p1) || md5(p2))) + "-2".
	p1, p2 := md5.Sum([]byte("part one")), md5.Sum([]byte("part two"))
	cat := append(append([]byte{}, p1[:]...), p2[:]...)
	sum := md5.Sum(cat)
	want := hex.EncodeToString(sum[:]) + "-2"
	got := MultipartETag([]PartInfo{
		{Number: 1, ETag: hex.EncodeToString(p1[:])},
		{Number: 2, ETag: `"` + hex.EncodeToString(p2[:]) + `"`},
	})
	if got != want {
		t.Fatalf("MultipartETag = %s, want %s", got, want)
	}
	// One part still gets the suffix and differs from the part's own ETag.
	one := MultipartETag([]PartInfo{{Number: 1, ETag: hex.EncodeToString(p1[:])}})
	if !strings.HasSuffix(one, "-1") || strings.HasPrefix(one, hex.EncodeToString(p1[:])) {
		t.Fatalf("single-part ETag %s", one)
	}
}

func TestCRCCombine(t *testing.T) {
	data := randBytes(1<<20+12345, 5)
	c32 := crc32.MakeTable(crc32.Castagnoli)
	checks := []struct {
		alg string
		sum func([]byte) uint64
	}{
		{AlgCRC32, func(b []byte) uint64 { return uint64(crc32.ChecksumIEEE(b)) }},
		{AlgCRC32C, func(b []byte) uint64 { return uint64(crc32.Checksum(b, c32)) }},
		{AlgCRC64NVME, crc64nvme.Checksum},
	}
	for _, c := range checks {
		poly, width := crcParams(c.alg)
		for _, cut := range []int{0, 1, 7, 8, 1000, len(data) / 2, len(data) - 1, len(data)} {
			a, b := data[:cut], data[cut:]
			got := crcCombine(poly, width, c.sum(a), c.sum(b), int64(len(b)))
			if want := c.sum(data); got != want {
				t.Errorf("%s cut %d: combine = %#x, want %#x", c.alg, cut, got, want)
			}
		}
	}
}

func TestMultipartChecksum(t *testing.T) {
	data := randBytes(3*MinPartSize/2+999, 6)
	// Part sizes of different lengths, including a 1-byte last part.
	cuts := []int{0, MinPartSize / 2, MinPartSize + 3, len(data) - 1, len(data)}
	var chunks [][]byte
	for i := 1; i < len(cuts); i++ {
		chunks = append(chunks, data[cuts[i-1]:cuts[i]])
	}
	partsFor := func(alg string) []PartInfo {
		ps := make([]PartInfo, len(chunks))
		for i, c := range chunks {
			ps[i] = PartInfo{Number: i + 1, Size: int64(len(c)), Checksum: Checksum{Algorithm: alg, Value: oracle(alg, c)}}
		}
		return ps
	}
	composite := func(alg string) string {
		var cat []byte
		for _, c := range chunks {
			raw, err := decodeChecksum(alg, oracle(alg, c))
			if err != nil {
				t.Fatal(err)
			}
			cat = append(cat, raw...)
		}
		return oracle(alg, cat) + "-4"
	}
	tests := []struct {
		alg, ctype string
		wantType   string
		wantValue  string
		err        error
	}{
		{AlgCRC32, ChecksumFullObject, ChecksumFullObject, oracle(AlgCRC32, data), nil},
		{AlgCRC32C, "full_object", ChecksumFullObject, oracle(AlgCRC32C, data), nil},
		{AlgCRC64NVME, ChecksumFullObject, ChecksumFullObject, oracle(AlgCRC64NVME, data), nil},
		{AlgCRC64NVME, "", ChecksumFullObject, oracle(AlgCRC64NVME, data), nil},
		{AlgCRC32, "", ChecksumComposite, composite(AlgCRC32), nil},
		{AlgCRC32C, ChecksumComposite, ChecksumComposite, composite(AlgCRC32C), nil},
		{AlgSHA1, ChecksumComposite, ChecksumComposite, composite(AlgSHA1), nil},
		{"sha256", "", ChecksumComposite, composite(AlgSHA256), nil},
		{AlgSHA256, ChecksumFullObject, "", "", ErrInvalidRequest},
		{AlgSHA1, ChecksumFullObject, "", "", ErrInvalidRequest},
		{AlgCRC64NVME, ChecksumComposite, "", "", ErrInvalidRequest},
		{AlgCRC32, "PARTIAL", "", "", ErrInvalidRequest},
		{AlgMD5, "", ChecksumComposite, composite(AlgMD5), nil},
		{AlgXXHASH128, ChecksumComposite, ChecksumComposite, composite(AlgXXHASH128), nil},
		{AlgXXHASH3, ChecksumFullObject, "", "", ErrInvalidRequest},
		{"MD4", "", "", "", ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.alg+"/"+tt.ctype, func(t *testing.T) {
			up, _ := NormalizeChecksumAlgorithm(tt.alg)
			parts := []PartInfo{}
			if up != "" {
				parts = partsFor(up)
			}
			got, err := MultipartChecksum(tt.alg, tt.ctype, parts)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("err = %v, want %v", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Algorithm != up || got.Type != tt.wantType || got.Value != tt.wantValue {
				t.Fatalf("got %+v, want %s %s %s", got, up, tt.wantType, tt.wantValue)
			}
		})
	}

	t.Run("no algorithm", func(t *testing.T) {
		got, err := MultipartChecksum("", "", partsFor(AlgCRC32))
		if err != nil || got != (Checksum{}) {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
	t.Run("part without checksum", func(t *testing.T) {
		ps := partsFor(AlgCRC32)
		ps[2].Checksum = Checksum{}
		if _, err := MultipartChecksum(AlgCRC32, ChecksumFullObject, ps); !errors.Is(err, ErrInvalidPart) {
			t.Fatalf("err = %v, want ErrInvalidPart", err)
		}
	})
	t.Run("part with a corrupt value", func(t *testing.T) {
		ps := partsFor(AlgCRC32)
		ps[1].Checksum.Value = "AAA"
		if _, err := MultipartChecksum(AlgCRC32, ChecksumComposite, ps); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("err = %v, want ErrInvalidRequest", err)
		}
	})
}

func TestNormalizeChecksumType(t *testing.T) {
	tests := []struct {
		alg, ctype, want string
		ok               bool
	}{
		{"", "", "", true},
		{"", ChecksumComposite, "", false},
		{"crc32", "", ChecksumComposite, true},
		{"CRC64NVME", "", ChecksumFullObject, true},
		{"SHA256", "composite", ChecksumComposite, true},
		{"SHA256", ChecksumFullObject, "", false},
		{"BLAKE3", "", "", false},
	}
	for _, tt := range tests {
		got, err := NormalizeChecksumType(tt.alg, tt.ctype)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("NormalizeChecksumType(%q, %q) = %q, %v; want %q ok=%v", tt.alg, tt.ctype, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("error %v does not wrap ErrInvalidRequest", err)
		}
	}
}

func TestNewUploadID(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		id := NewUploadID()
		if len(id) != 43 {
			t.Fatalf("id %q has %d characters, want 43", id, len(id))
		}
		if strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Fatalf("id %q is not URL-safe", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestRepeatedComplete(t *testing.T) {
	const id = "upload-1"
	obj := ObjectInfo{
		Key: "k", ETag: "abc-2", Meta: ObjectMeta{CompletedUpload: id},
		Checksum: Checksum{Algorithm: AlgCRC32, Value: "AAAAAA==-2", Type: ChecksumComposite},
		Parts: []PartInfo{
			{Number: 1, Size: MinPartSize, ETag: "e1", Checksum: Checksum{Algorithm: AlgCRC32, Value: "c1"}},
			{Number: 3, Size: 1, ETag: "e3", Checksum: Checksum{Algorithm: AlgCRC32, Value: "c3"}},
		},
	}
	same := []CompletePart{{Number: 1, ETag: `"e1"`}, {Number: 3, ETag: "E3", Checksums: map[string]string{AlgCRC32: "c3"}}}
	tests := []struct {
		name   string
		id     string
		req    []CompletePart
		obj    ObjectInfo
		repeat bool
	}{
		{"same parts", id, same, obj, true},
		{"other upload", "upload-2", same, obj, false},
		{"empty id", "", same, ObjectInfo{Parts: obj.Parts}, false},
		{"object not from a Complete", id, same, ObjectInfo{Parts: obj.Parts}, false},
		{"fewer parts", id, same[:1], obj, false},
		{"other part number", id, []CompletePart{{Number: 1, ETag: "e1"}, {Number: 2, ETag: "e3"}}, obj, false},
		{"other etag", id, []CompletePart{{Number: 1, ETag: "e1"}, {Number: 3, ETag: "zz"}}, obj, false},
		{"other checksum", id, []CompletePart{{Number: 1, ETag: "e1"}, {Number: 3, ETag: "e3", Checksums: map[string]string{AlgCRC32: "xx"}}}, obj, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RepeatedComplete(tt.id, tt.req, tt.obj)
			if tt.repeat {
				if err != nil || got.ETag != obj.ETag || got.Checksum != obj.Checksum {
					t.Fatalf("RepeatedComplete = %+v, %v; want the object's result", got, err)
				}
				return
			}
			if !errors.Is(err, ErrNoSuchUpload) {
				t.Fatalf("RepeatedComplete err = %v, want ErrNoSuchUpload", err)
			}
		})
	}
}

func TestValidUploadID(t *testing.T) {
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{NewUploadID(), true},
		{"", false},
		{"abc", false},
		{strings.Repeat("A", 42) + "!", false},
		{NewUploadID() + "A", false},
	} {
		if got := ValidUploadID(tt.id); got != tt.ok {
			t.Errorf("ValidUploadID(%q) = %v, want %v", tt.id, got, tt.ok)
		}
	}
}
