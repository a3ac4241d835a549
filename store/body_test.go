package store

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/cespare/xxhash/v2"
	"github.com/minio/crc64nvme"
	"github.com/zeebo/xxh3"
)

// b64 encodes raw bytes as S3 checksum headers carry them.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// oracle computes the expected checksum with the standard libraries directly.
func oracle(alg string, data []byte) string {
	switch alg {
	case AlgCRC32:
		return b64(be32(crc32.ChecksumIEEE(data)))
	case AlgCRC32C:
		return b64(be32(crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))))
	case AlgCRC64NVME:
		return b64(be64(crc64nvme.Checksum(data)))
	case AlgSHA1:
		s := sha1.Sum(data)
		return b64(s[:])
	case AlgSHA256:
		s := sha256.Sum256(data)
		return b64(s[:])
	case AlgMD5:
		s := md5.Sum(data)
		return b64(s[:])
	case AlgSHA512:
		s := sha512.Sum512(data)
		return b64(s[:])
	case AlgXXHASH64:
		return b64(be64(xxhash.Sum64(data)))
	case AlgXXHASH3:
		return b64(be64(xxh3.Hash(data)))
	case AlgXXHASH128:
		h := xxh3.Hash128(data)
		return b64(append(be64(h.Hi), be64(h.Lo)...))
	}
	panic(alg)
}

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// readAll drains a Body as an engine does and calls Finish.
func readAll(b *Body) ([]byte, Digests, error) {
	got, err := io.ReadAll(b)
	if err != nil {
		return got, Digests{}, err
	}
	d, err := b.Finish()
	return got, d, err
}

var allAlgs = []string{AlgCRC32, AlgCRC32C, AlgCRC64NVME, AlgSHA1, AlgSHA256, AlgMD5, AlgSHA512, AlgXXHASH64, AlgXXHASH3, AlgXXHASH128}

// TestChecksumKnownValues pins the algorithms to the published check values
// of "123456789", so that the oracle itself is not the only reference.
func TestChecksumKnownValues(t *testing.T) {
	data := []byte("123456789")
	tests := map[string][]byte{
		AlgCRC32:     be32(0xCBF43926),
		AlgCRC32C:    be32(0xE3069283),
		AlgCRC64NVME: be64(0xAE8B14860A799888),
	}
	for alg, want := range tests {
		b := NewBody(bytes.NewReader(data), PutOptions{Size: -1, ChecksumAlgorithm: alg})
		_, d, err := readAll(b)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if d.Checksum.Value != b64(want) {
			t.Errorf("%s = %s, want %s", alg, d.Checksum.Value, b64(want))
		}
		if raw := crcFromBytes(want); d.RawCRC != raw {
			t.Errorf("%s RawCRC = %#x, want %#x", alg, d.RawCRC, raw)
		}
	}
}

func TestBodyDigests(t *testing.T) {
	data := randBytes(300_001, 1)
	wantMD5 := md5.Sum(data)
	wantSHA := sha256.Sum256(data)
	for _, size := range []int64{-1, int64(len(data))} {
		for _, alg := range append([]string{""}, allAlgs...) {
			// OneByteReader-like small reads exercise the incremental hashing.
			src := io.Reader(bytes.NewReader(data))
			if alg == AlgCRC32C {
				src = iotest.HalfReader(src)
			}
			b := NewBody(src, PutOptions{Size: size, ChecksumAlgorithm: alg})
			got, d, err := readAll(b)
			if err != nil {
				t.Fatalf("size %d alg %q: %v", size, alg, err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("alg %q: content changed", alg)
			}
			if d.Size != int64(len(data)) || d.MD5 != wantMD5 || d.SHA256 != wantSHA {
				t.Fatalf("alg %q: digests %d %x %x", alg, d.Size, d.MD5, d.SHA256)
			}
			if alg == "" {
				// S3's default: CRC64NVME when the client names no checksum.
				want := Checksum{Algorithm: AlgCRC64NVME, Value: oracle(AlgCRC64NVME, data)}
				if d.Checksum != want || d.RawCRC != crc64nvme.Checksum(data) {
					t.Fatalf("no algorithm asked, got %+v %#x, want %+v", d.Checksum, d.RawCRC, want)
				}
				continue
			}
			if d.Checksum.Algorithm != alg || d.Checksum.Value != oracle(alg, data) || d.Checksum.Type != "" {
				t.Fatalf("alg %q: checksum %+v, want %s", alg, d.Checksum, oracle(alg, data))
			}
		}
	}
}

func TestBodyEmpty(t *testing.T) {
	b := NewBody(bytes.NewReader(nil), PutOptions{Size: 0, ChecksumAlgorithm: "crc32"})
	_, d, err := readAll(b)
	if err != nil {
		t.Fatal(err)
	}
	if d.Size != 0 || d.MD5 != md5.Sum(nil) || d.SHA256 != sha256.Sum256(nil) {
		t.Fatalf("empty digests wrong: %+v", d)
	}
	if d.Checksum.Algorithm != AlgCRC32 || d.Checksum.Value != "AAAAAA==" {
		t.Fatalf("empty CRC32 = %+v, want AAAAAA==", d.Checksum)
	}
}

func TestBodyVerification(t *testing.T) {
	data := randBytes(70_000, 2)
	good := md5.Sum(data)
	bad := md5.Sum([]byte("other"))
	trailer := func(alg, value string, err error) func() (string, string, error) {
		return func() (string, string, error) { return alg, value, err }
	}
	errTrailer := errors.New("trailer signature mismatch")
	goodSHA, badSHA := sha256.Sum256(data), sha256.Sum256(data[1:])

	type want struct {
		err      error // errors.Is target; nil means success
		alg, val string
	}
	tests := []struct {
		name string
		opts PutOptions
		want want
	}{
		{"content-md5 ok, default crc64nvme stored", PutOptions{ContentMD5: good[:]}, want{alg: AlgCRC64NVME, val: oracle(AlgCRC64NVME, data)}},
		{"content-md5 bad", PutOptions{ContentMD5: bad[:]}, want{err: ErrBadDigest}},
		{"content-md5 short", PutOptions{ContentMD5: good[:8]}, want{err: ErrBadDigest}},
		{"declared crc32 ok", PutOptions{Checksums: map[string]string{AlgCRC32: oracle(AlgCRC32, data)}}, want{alg: AlgCRC32, val: oracle(AlgCRC32, data)}},
		{"declared lower-case name", PutOptions{Checksums: map[string]string{"crc32c": oracle(AlgCRC32C, data)}}, want{alg: AlgCRC32C, val: oracle(AlgCRC32C, data)}},
		{"declared crc64nvme ok", PutOptions{Checksums: map[string]string{AlgCRC64NVME: oracle(AlgCRC64NVME, data)}}, want{alg: AlgCRC64NVME, val: oracle(AlgCRC64NVME, data)}},
		{"declared sha1 ok", PutOptions{Checksums: map[string]string{AlgSHA1: oracle(AlgSHA1, data)}}, want{alg: AlgSHA1, val: oracle(AlgSHA1, data)}},
		{"declared sha256 ok", PutOptions{Checksums: map[string]string{AlgSHA256: oracle(AlgSHA256, data)}}, want{alg: AlgSHA256, val: oracle(AlgSHA256, data)}},
		{"declared crc32 bad", PutOptions{Checksums: map[string]string{AlgCRC32: oracle(AlgCRC32, data[1:])}}, want{err: ErrBadDigest}},
		{"declared sha256 bad", PutOptions{Checksums: map[string]string{AlgSHA256: oracle(AlgSHA256, data[1:])}}, want{err: ErrBadDigest}},
		{"declared other than requested", PutOptions{ChecksumAlgorithm: AlgCRC32, Checksums: map[string]string{AlgSHA1: oracle(AlgSHA1, data)}}, want{err: ErrInvalidRequest}},
		{"declared same as requested", PutOptions{ChecksumAlgorithm: AlgSHA1, Checksums: map[string]string{AlgSHA1: oracle(AlgSHA1, data)}}, want{alg: AlgSHA1, val: oracle(AlgSHA1, data)}},
		{"declared md5 ok", PutOptions{Checksums: map[string]string{AlgMD5: oracle(AlgMD5, data)}}, want{alg: AlgMD5, val: oracle(AlgMD5, data)}},
		{"declared sha512 ok", PutOptions{Checksums: map[string]string{AlgSHA512: oracle(AlgSHA512, data)}}, want{alg: AlgSHA512, val: oracle(AlgSHA512, data)}},
		{"declared xxhash64 ok", PutOptions{Checksums: map[string]string{AlgXXHASH64: oracle(AlgXXHASH64, data)}}, want{alg: AlgXXHASH64, val: oracle(AlgXXHASH64, data)}},
		{"declared xxhash3 ok", PutOptions{Checksums: map[string]string{AlgXXHASH3: oracle(AlgXXHASH3, data)}}, want{alg: AlgXXHASH3, val: oracle(AlgXXHASH3, data)}},
		{"declared xxhash128 ok", PutOptions{Checksums: map[string]string{AlgXXHASH128: oracle(AlgXXHASH128, data)}}, want{alg: AlgXXHASH128, val: oracle(AlgXXHASH128, data)}},
		{"declared xxhash128 bad", PutOptions{Checksums: map[string]string{AlgXXHASH128: oracle(AlgXXHASH128, data[1:])}}, want{err: ErrBadDigest}},
		{"declared xxhash3 value for xxhash64", PutOptions{Checksums: map[string]string{AlgXXHASH64: oracle(AlgXXHASH3, data)}}, want{err: ErrBadDigest}},
		{"trailer xxhash3 unannounced", PutOptions{TrailerChecksum: trailer(AlgXXHASH3, oracle(AlgXXHASH3, data), nil)}, want{alg: AlgXXHASH3, val: oracle(AlgXXHASH3, data)}},
		{"trailer sha512 announced", PutOptions{ChecksumAlgorithm: AlgSHA512, TrailerChecksum: trailer(AlgSHA512, oracle(AlgSHA512, data), nil)}, want{alg: AlgSHA512, val: oracle(AlgSHA512, data)}},
		{"declared and md5 both checked", PutOptions{ContentMD5: bad[:], Checksums: map[string]string{AlgCRC32: oracle(AlgCRC32, data)}}, want{err: ErrBadDigest}},
		{"trailer ok, announced", PutOptions{ChecksumAlgorithm: AlgCRC32, TrailerChecksum: trailer("crc32", oracle(AlgCRC32, data), nil)}, want{alg: AlgCRC32, val: oracle(AlgCRC32, data)}},
		{"trailer ok, unannounced", PutOptions{TrailerChecksum: trailer(AlgCRC64NVME, oracle(AlgCRC64NVME, data), nil)}, want{alg: AlgCRC64NVME, val: oracle(AlgCRC64NVME, data)}},
		{"trailer sha1 unannounced", PutOptions{TrailerChecksum: trailer(AlgSHA1, oracle(AlgSHA1, data), nil)}, want{alg: AlgSHA1, val: oracle(AlgSHA1, data)}},
		{"trailer bad", PutOptions{ChecksumAlgorithm: AlgCRC32C, TrailerChecksum: trailer(AlgCRC32C, oracle(AlgCRC32C, data[:10]), nil)}, want{err: ErrBadDigest}},
		{"trailer other than announced", PutOptions{ChecksumAlgorithm: AlgCRC32C, TrailerChecksum: trailer(AlgCRC32, oracle(AlgCRC32, data), nil)}, want{err: ErrInvalidRequest}},
		{"trailer malformed value", PutOptions{TrailerChecksum: trailer(AlgCRC32, "!!", nil)}, want{err: ErrInvalidRequest}},
		{"trailer unknown alg", PutOptions{TrailerChecksum: trailer("MD4", "AAAA", nil)}, want{err: ErrInvalidRequest}},
		{"trailer error passed on", PutOptions{TrailerChecksum: trailer("", "", errTrailer)}, want{err: errTrailer}},
		{"trailer absent falls back to requested", PutOptions{ChecksumAlgorithm: AlgCRC32, TrailerChecksum: trailer("", "", nil)}, want{alg: AlgCRC32, val: oracle(AlgCRC32, data)}},
		{"signed payload sha256 ok", PutOptions{PayloadSHA256: &goodSHA}, want{alg: AlgCRC64NVME, val: oracle(AlgCRC64NVME, data)}},
		{"signed payload sha256 bad", PutOptions{PayloadSHA256: &badSHA}, want{err: ErrPayloadSHA256Mismatch}},
		// At EOF, before Finish's digests: what auth's own check answered.
		{"signed payload sha256 bad before content-md5", PutOptions{PayloadSHA256: &badSHA, ContentMD5: bad[:]}, want{err: ErrPayloadSHA256Mismatch}},
		{"signed payload sha256 ok, content-md5 bad", PutOptions{PayloadSHA256: &goodSHA, ContentMD5: bad[:]}, want{err: ErrBadDigest}},
		{"trailer overrides declared", PutOptions{Checksums: map[string]string{AlgCRC32: oracle(AlgCRC32, data)}, TrailerChecksum: trailer(AlgSHA256, oracle(AlgSHA256, data), nil)}, want{alg: AlgSHA256, val: oracle(AlgSHA256, data)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Size = int64(len(data))
			_, d, err := readAll(NewBody(bytes.NewReader(data), tt.opts))
			if tt.want.err != nil {
				if !errors.Is(err, tt.want.err) {
					t.Fatalf("err = %v, want %v", err, tt.want.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if d.Checksum.Algorithm != tt.want.alg || d.Checksum.Value != tt.want.val {
				t.Fatalf("checksum = %+v, want %s %s", d.Checksum, tt.want.alg, tt.want.val)
			}
		})
	}
}

// TestBodyPayloadSHA256 checks the signed payload hash at the body's end:
// the read that meets EOF fails instead (whatever the reader's read sizes),
// the failure is sticky, and Finish reports it too.
func TestBodyPayloadSHA256(t *testing.T) {
	data := randBytes(3<<20+17, 5) // several large reads and a short tail
	good, bad := sha256.Sum256(data), sha256.Sum256(append([]byte{0}, data...))
	for _, tc := range []struct {
		name string
		want *[32]byte
		r    func(io.Reader) io.Reader
		ok   bool
	}{
		{"match", &good, func(r io.Reader) io.Reader { return r }, true},
		{"match, one byte a read", &good, iotest.OneByteReader, true},
		{"match, data with EOF", &good, iotest.DataErrReader, true},
		{"mismatch", &bad, func(r io.Reader) io.Reader { return r }, false},
		{"mismatch, data with EOF", &bad, iotest.DataErrReader, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBody(tc.r(bytes.NewReader(data)), PutOptions{Size: int64(len(data)), PayloadSHA256: tc.want})
			got, err := io.ReadAll(b)
			if tc.ok {
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("ReadAll: %d bytes, %v", len(got), err)
				}
				d, err := b.Finish()
				if err != nil || d.SHA256 != good {
					t.Fatalf("Finish: %x, %v", d.SHA256, err)
				}
				return
			}
			if !errors.Is(err, ErrPayloadSHA256Mismatch) {
				t.Fatalf("ReadAll: %v, want ErrPayloadSHA256Mismatch", err)
			}
			if n, err := b.Read(make([]byte, 10)); n != 0 || !errors.Is(err, ErrPayloadSHA256Mismatch) {
				t.Fatalf("read after the mismatch: %d, %v", n, err)
			}
			if _, err := b.Finish(); !errors.Is(err, ErrPayloadSHA256Mismatch) {
				t.Fatalf("Finish: %v, want ErrPayloadSHA256Mismatch", err)
			}
		})
	}
}

// countingReader counts how many bytes were taken from the source.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestBodyBadOptionsFailBeforeReading(t *testing.T) {
	tests := []struct {
		name string
		opts PutOptions
	}{
		{"two declared checksums", PutOptions{Checksums: map[string]string{AlgCRC32: "AAAAAA==", AlgCRC32C: "AAAAAA=="}}},
		{"unknown declared algorithm", PutOptions{Checksums: map[string]string{"MD4": "AAAAAA=="}}},
		{"declared value not base64", PutOptions{Checksums: map[string]string{AlgCRC32: "not base64!"}}},
		{"declared value wrong length", PutOptions{Checksums: map[string]string{AlgCRC32: b64(make([]byte, 8))}}},
		{"unknown requested algorithm", PutOptions{ChecksumAlgorithm: "XXH3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &countingReader{r: bytes.NewReader([]byte("hello"))}
			tt.opts.Size = -1
			b := NewBody(src, tt.opts)
			n, err := b.Read(make([]byte, 10))
			if n != 0 || !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Read = %d, %v; want 0, ErrInvalidRequest", n, err)
			}
			if src.n != 0 {
				t.Fatalf("%d bytes consumed before the options were refused", src.n)
			}
			if _, err := b.Finish(); !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("Finish = %v, want ErrInvalidRequest", err)
			}
			if err := checkPutOptions(tt.opts); !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("checkPutOptions = %v, want ErrInvalidRequest", err)
			}
		})
	}
}

func TestBodySizes(t *testing.T) {
	data := randBytes(1000, 3)
	tests := []struct {
		name     string
		size     int64
		readErr  error // from io.ReadAll
		finalErr error // from Finish
		gotBytes int
	}{
		{"exact", 1000, nil, nil, 1000},
		{"unknown", -1, nil, nil, 1000},
		{"body shorter than declared", 1001, nil, ErrIncompleteBody, 1000},
		{"body longer than declared", 999, ErrInvalidRequest, ErrInvalidRequest, 999},
		{"declared zero", 0, ErrInvalidRequest, ErrInvalidRequest, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBody(bytes.NewReader(data), PutOptions{Size: tt.size})
			got, err := io.ReadAll(b)
			if tt.readErr == nil && err != nil || tt.readErr != nil && !errors.Is(err, tt.readErr) {
				t.Fatalf("read err = %v, want %v", err, tt.readErr)
			}
			if len(got) != tt.gotBytes || !bytes.Equal(got, data[:len(got)]) {
				t.Fatalf("read %d bytes, want %d", len(got), tt.gotBytes)
			}
			_, err = b.Finish()
			if tt.finalErr == nil && err != nil || tt.finalErr != nil && !errors.Is(err, tt.finalErr) {
				t.Fatalf("Finish err = %v, want %v", err, tt.finalErr)
			}
		})
	}
}

// TestBodyFinishWithoutEOF covers an engine that read exactly the declared
// size (io.CopyN) and never saw EOF: Finish probes for more.
func TestBodyFinishWithoutEOF(t *testing.T) {
	data := randBytes(5000, 4)
	tests := []struct {
		name    string
		src     []byte
		declare int64
		copyN   int64
		want    error
	}{
		{"exact then EOF", data, 5000, 5000, nil},
		{"one byte too many", data, 4999, 4999, ErrInvalidRequest},
		{"unknown size, stopped early", data, -1, 100, nil}, // engine bug: reported
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBody(bytes.NewReader(tt.src), PutOptions{Size: tt.declare, ChecksumAlgorithm: AlgCRC32})
			if _, err := io.CopyN(io.Discard, b, tt.copyN); err != nil {
				t.Fatal(err)
			}
			d, err := b.Finish()
			switch {
			case tt.copyN < int64(len(tt.src)) && tt.declare < 0:
				if err == nil {
					t.Fatal("Finish before the end of an unknown-size body succeeded")
				}
			case tt.want != nil:
				if !errors.Is(err, tt.want) {
					t.Fatalf("Finish = %v, want %v", err, tt.want)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if d.Size != tt.declare || d.Checksum.Value != oracle(AlgCRC32, tt.src) {
					t.Fatalf("digests %+v", d)
				}
			}
		})
	}
}

// authLikeError stands for an *auth.Error: Body must pass it on unchanged.
type authLikeError struct{ code string }

func (e *authLikeError) Error() string { return e.code }

func TestBodyPassesReaderErrorsUnchanged(t *testing.T) {
	sentinel := &authLikeError{code: "SignatureDoesNotMatch"}
	src := io.MultiReader(bytes.NewReader([]byte("partial")), iotest.ErrReader(sentinel))
	b := NewBody(src, PutOptions{Size: 100})
	got, err := io.ReadAll(b)
	if err != sentinel { //nolint:errorlint // identity is the point
		t.Fatalf("err = %#v, want the reader's own error value", err)
	}
	if string(got) != "partial" {
		t.Fatalf("got %q", got)
	}
	if _, err := b.Finish(); err != sentinel { //nolint:errorlint // identity is the point
		t.Fatalf("Finish err = %#v, want the reader's own error value", err)
	}
}

func TestReadKnee(t *testing.T) {
	const max = 100_000
	tests := []struct {
		name string
		size int
		fits bool
		slow bool
		// dataEOF: the reader returns its last bytes together with io.EOF
		// (allowed by io.Reader, and what some body readers do).
		dataEOF bool
	}{
		{"empty", 0, true, false, false},
		{"small", 10, true, false, false},
		{"just below", max - 1, true, true, false},
		{"at the knee", max, true, false, false},
		{"at the knee, data with EOF", max, true, false, true},
		{"one above", max + 1, false, false, false},
		{"one above, data with EOF", max + 1, false, false, true},
		{"far above", 3*max + 17, false, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := randBytes(tt.size, uint64(tt.size))
			var r io.Reader = bytes.NewReader(data)
			if tt.slow {
				r = iotest.HalfReader(r)
			}
			if tt.dataEOF {
				r = iotest.DataErrReader(r)
			}
			head, fits, err := ReadKnee(r, max)
			if err != nil {
				t.Fatal(err)
			}
			if fits != tt.fits {
				t.Fatalf("fits = %v, want %v", fits, tt.fits)
			}
			if fits && !bytes.Equal(head, data) {
				t.Fatalf("inline head differs from content (%d vs %d bytes)", len(head), len(data))
			}
			if !fits && len(head) != max+1 {
				t.Fatalf("head is %d bytes, want %d", len(head), max+1)
			}
			whole, err := io.ReadAll(io.MultiReader(bytes.NewReader(head), r))
			if err != nil || !bytes.Equal(whole, data) {
				t.Fatalf("reassembled content differs (err %v)", err)
			}
		})
	}
	t.Run("reader error", func(t *testing.T) {
		boom := errors.New("boom")
		head, fits, err := ReadKnee(io.MultiReader(bytes.NewReader([]byte("abc")), iotest.ErrReader(boom)), max)
		if !errors.Is(err, boom) || fits || string(head) != "abc" {
			t.Fatalf("ReadKnee = %q, %v, %v", head, fits, err)
		}
	})
	t.Run("zero knee", func(t *testing.T) {
		head, fits, err := ReadKnee(bytes.NewReader([]byte("x")), 0)
		if err != nil || fits || string(head) != "x" {
			t.Fatalf("ReadKnee = %q, %v, %v", head, fits, err)
		}
		head, fits, err = ReadKnee(bytes.NewReader(nil), 0)
		if err != nil || !fits || len(head) != 0 {
			t.Fatalf("ReadKnee(empty) = %q, %v, %v", head, fits, err)
		}
	})
}

// TestReadKneeDeclaredSize: a Body that declares its size is read into a
// buffer of that size and one byte, whatever the size against the knee.
func TestReadKneeDeclaredSize(t *testing.T) {
	const max = 100_000
	for _, tc := range []struct {
		name    string
		size    int
		fits    bool
		wantCap int
	}{
		{"empty", 0, true, 1},
		{"4 KiB", 4 << 10, true, 4<<10 + 1},
		{"at the knee", max, true, max + 1},
		{"above the knee", max + 5000, false, max + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randBytes(tc.size, uint64(tc.size)+7)
			b := NewBody(iotest.HalfReader(bytes.NewReader(data)), PutOptions{Size: int64(len(data))})
			head, fits, err := ReadKnee(b, max)
			if err != nil {
				t.Fatal(err)
			}
			if fits != tc.fits || cap(head) != tc.wantCap {
				t.Fatalf("fits %v, cap %d; want %v, %d", fits, cap(head), tc.fits, tc.wantCap)
			}
			whole, err := io.ReadAll(io.MultiReader(bytes.NewReader(head), b))
			if err != nil || !bytes.Equal(whole, data) {
				t.Fatalf("reassembled content differs (err %v)", err)
			}
			if _, err := b.Finish(); err != nil {
				t.Fatalf("finish: %v", err)
			}
		})
	}
}

// zeroReader is an endless source that costs nothing, so the benchmark
// measures the hashing.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// BenchmarkBody pushes 64 MiB through Body in 1 MiB reads; MB/s is the hot
// path cost of every PUT.
func BenchmarkBody(b *testing.B) {
	const size = 64 << 20
	for _, alg := range []string{"", AlgCRC32, AlgCRC32C, AlgCRC64NVME, AlgSHA256, AlgSHA1} {
		name := alg
		if name == "" {
			name = "MD5+SHA256"
		}
		b.Run(name, func(b *testing.B) {
			buf := make([]byte, 1<<20)
			b.SetBytes(size)
			b.ReportAllocs()
			for b.Loop() {
				body := NewBody(io.LimitReader(zeroReader{}, size), PutOptions{Size: size, ChecksumAlgorithm: alg})
				for {
					_, err := body.Read(buf)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if _, err := body.Finish(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBodyReadSizes covers both hashing paths: small reads (one goroutine)
// and reads of at least parallelHashMin (MD5 beside the others).
func TestBodyReadSizes(t *testing.T) {
	data := randBytes(3<<20+5, 12)
	wantMD5, wantSHA := md5.Sum(data), sha256.Sum256(data)
	for _, bufSize := range []int{1 << 10, parallelHashMin - 1, parallelHashMin, 1 << 20} {
		b := NewBody(bytes.NewReader(data), PutOptions{Size: int64(len(data)), ChecksumAlgorithm: AlgCRC32C})
		var sink bytes.Buffer
		if _, err := io.CopyBuffer(struct{ io.Writer }{&sink}, struct{ io.Reader }{b}, make([]byte, bufSize)); err != nil {
			t.Fatal(err)
		}
		d, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sink.Bytes(), data) || d.MD5 != wantMD5 || d.SHA256 != wantSHA || d.Checksum.Value != oracle(AlgCRC32C, data) {
			t.Fatalf("read size %d: wrong content or digests", bufSize)
		}
	}
}

// TestBodyFillsLargeReads: a read of at least parallelHashMin is filled
// from as many reads of a reader that returns little at a time as it takes
// (so that it is hashed in one piece); a smaller one returns what one read
// brought; the digests are the same either way.
func TestBodyFillsLargeReads(t *testing.T) {
	data := randBytes(3<<20+5, 13)
	wantMD5, wantSHA := md5.Sum(data), sha256.Sum256(data)
	tests := []struct {
		name    string
		bufSize int
		want    int // bytes returned by the first Read
	}{
		{name: "small read not filled", bufSize: parallelHashMin - 1, want: 4 << 10},
		{name: "large read filled", bufSize: 1 << 20, want: 1 << 20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &trickleReader{data: data, step: 4 << 10}
			b := NewBody(src, PutOptions{Size: int64(len(data)), ChecksumAlgorithm: AlgCRC32C})
			buf := make([]byte, tc.bufSize)
			n, err := b.Read(buf)
			if err != nil || n != tc.want {
				t.Fatalf("first read: %d bytes, %v; want %d", n, err, tc.want)
			}
			rest, err := io.ReadAll(b)
			if err != nil {
				t.Fatal(err)
			}
			d, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if got := append(buf[:n], rest...); !bytes.Equal(got, data) || d.MD5 != wantMD5 || d.SHA256 != wantSHA || d.Checksum.Value != oracle(AlgCRC32C, data) {
				t.Fatal("wrong content or digests")
			}
		})
	}
}

// trickleReader returns at most step bytes per Read, as a network body does.
type trickleReader struct {
	data []byte
	step int
}

func (r *trickleReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestBodyUnknownSizeCap checks the MaxObjectSize cap of bodies without a
// declared size, with the cap lowered so that the test stays small.
func TestBodyUnknownSizeCap(t *testing.T) {
	for _, n := range []int{10, 11} {
		b := NewBody(bytes.NewReader(make([]byte, n)), PutOptions{Size: -1})
		b.limit = 10
		got, err := io.ReadAll(b)
		if n <= 10 {
			if err != nil || len(got) != n {
				t.Fatalf("%d bytes under the cap: %d, %v", n, len(got), err)
			}
			if d, err := b.Finish(); err != nil || d.Size != int64(n) {
				t.Fatalf("Finish: %+v, %v", d, err)
			}
			continue
		}
		if !errors.Is(err, ErrEntityTooLarge) || len(got) != 10 {
			t.Fatalf("%d bytes over the cap: %d bytes, %v", n, len(got), err)
		}
		if _, err := b.Finish(); !errors.Is(err, ErrEntityTooLarge) {
			t.Fatalf("Finish after the cap: %v", err)
		}
	}
}
