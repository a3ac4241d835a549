package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// fakeEngine records what reached the engine. Methods the tests do not need
// panic through the nil embedded interface.
type fakeEngine struct {
	ObjectStore
	calls     []string
	lastList  ListParams
	lastParts int
	lastMaxUp int
	lastAlg   string
	lastType  string
	deleted   []string
}

func (f *fakeEngine) rec(name string) { f.calls = append(f.calls, name) }

func (f *fakeEngine) CreateBucket(_ context.Context, _, _ string) error {
	f.rec("CreateBucket")
	return nil
}
func (f *fakeEngine) HeadBucket(_ context.Context, name string) (Bucket, error) {
	f.rec("HeadBucket")
	if name == "missing" {
		return Bucket{}, ErrNoSuchBucket
	}
	return Bucket{Name: name}, nil
}
func (f *fakeEngine) DeleteBucket(context.Context, string) error { f.rec("DeleteBucket"); return nil }
func (f *fakeEngine) PutObject(context.Context, string, string, io.Reader, PutOptions) (ObjectInfo, error) {
	f.rec("PutObject")
	return ObjectInfo{}, nil
}
func (f *fakeEngine) GetObject(_ context.Context, _, _ string, _ GetOptions, head bool) (ObjectInfo, *ByteRange, Reader, error) {
	f.rec("GetObject")
	if head {
		return ObjectInfo{}, nil, nil, nil
	}
	return ObjectInfo{}, nil, io.NopCloser(bytes.NewReader(nil)), nil
}
func (f *fakeEngine) DeleteObject(context.Context, string, string) error {
	f.rec("DeleteObject")
	return nil
}
func (f *fakeEngine) DeleteObjects(_ context.Context, _ string, keys []string) ([]DeleteResult, error) {
	f.rec("DeleteObjects")
	f.deleted = append(f.deleted, keys...)
	out := make([]DeleteResult, len(keys))
	for i, k := range keys {
		out[i] = DeleteResult{Key: k}
	}
	return out, nil
}
func (f *fakeEngine) ListObjects(_ context.Context, _ string, p ListParams) (ListResult, error) {
	f.rec("ListObjects")
	f.lastList = p
	return ListResult{Objects: []ObjectInfo{{Key: "k"}}}, nil
}
func (f *fakeEngine) CopyObject(_ context.Context, _ CopySource, _, _ string, o CopyOptions) (ObjectInfo, error) {
	f.rec("CopyObject")
	f.lastAlg = o.ChecksumAlgorithm
	return ObjectInfo{}, nil
}
func (f *fakeEngine) CreateMultipartUpload(_ context.Context, _, _ string, _ ObjectMeta, alg, ctype string) (Upload, error) {
	f.rec("CreateMultipartUpload")
	f.lastAlg, f.lastType = alg, ctype
	return Upload{}, nil
}
func (f *fakeEngine) UploadPart(context.Context, string, string, string, int, io.Reader, PutOptions) (PartInfo, error) {
	f.rec("UploadPart")
	return PartInfo{}, nil
}
func (f *fakeEngine) UploadPartCopy(context.Context, CopySource, string, string, string, int) (PartInfo, error) {
	f.rec("UploadPartCopy")
	return PartInfo{}, nil
}
func (f *fakeEngine) CompleteMultipartUpload(context.Context, string, string, string, []CompletePart, PutOptions) (ObjectInfo, error) {
	f.rec("CompleteMultipartUpload")
	return ObjectInfo{}, nil
}
func (f *fakeEngine) AbortMultipartUpload(context.Context, string, string, string) error {
	f.rec("AbortMultipartUpload")
	return nil
}
func (f *fakeEngine) ListParts(_ context.Context, _, _, _ string, _, maxParts int) (ListPartsResult, error) {
	f.rec("ListParts")
	f.lastParts = maxParts
	return ListPartsResult{}, nil
}
func (f *fakeEngine) ListMultipartUploads(_ context.Context, _ string, p ListUploadsParams) (ListUploadsResult, error) {
	f.rec("ListMultipartUploads")
	f.lastMaxUp = p.MaxUploads
	return ListUploadsResult{}, nil
}

// TestStoreValidation checks that bad input is refused before the engine
// sees it (and that good input reaches it).
func TestStoreValidation(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("k", MaxKeyLength+1)
	body := func() io.Reader { return bytes.NewReader([]byte("x")) }
	up := "upload-id"
	tests := []struct {
		name   string
		call   func(s *Store) error
		err    error  // nil: success expected
		engine string // engine call expected ("" = none)
	}{
		{"create bucket ok", func(s *Store) error { return s.CreateBucket(ctx, "good-bucket", "") }, nil, "CreateBucket"},
		{"create bucket bad name", func(s *Store) error { return s.CreateBucket(ctx, "Bad_Bucket", "") }, ErrInvalidBucketName, ""},
		{"head bucket empty name", func(s *Store) error { _, err := s.HeadBucket(ctx, ""); return err }, ErrNoSuchBucket, ""},
		{"delete bucket empty name", func(s *Store) error { return s.DeleteBucket(ctx, "") }, ErrNoSuchBucket, ""},
		{"put ok", func(s *Store) error { _, err := s.PutObject(ctx, "b", "a/b", body(), PutOptions{Size: 1}); return err }, nil, "PutObject"},
		{"put key too long", func(s *Store) error { _, err := s.PutObject(ctx, "b", long, body(), PutOptions{Size: 1}); return err }, ErrKeyTooLong, ""},
		{"put control char", func(s *Store) error {
			_, err := s.PutObject(ctx, "b", "a\x01", body(), PutOptions{Size: 1})
			return err
		}, ErrInvalidKey, ""},
		{"put too large", func(s *Store) error {
			_, err := s.PutObject(ctx, "b", "k", body(), PutOptions{Size: MaxObjectSize + 1})
			return err
		}, ErrEntityTooLarge, ""},
		{"put bad checksum option", func(s *Store) error {
			_, err := s.PutObject(ctx, "b", "k", body(), PutOptions{Size: 1, ChecksumAlgorithm: "MD4"})
			return err
		}, ErrInvalidRequest, ""},
		{"get ok", func(s *Store) error {
			_, _, _, err := s.GetObject(ctx, "b", "k", GetOptions{PartNumber: 3}, false)
			return err
		}, nil, "GetObject"},
		{"get impossible key", func(s *Store) error { _, _, _, err := s.GetObject(ctx, "b", long, GetOptions{}, true); return err }, ErrNoSuchKey, "HeadBucket"},
		{"get impossible key in a missing bucket", func(s *Store) error {
			_, _, _, err := s.GetObject(ctx, "missing", long, GetOptions{}, true)
			return err
		}, ErrNoSuchBucket, "HeadBucket"},
		{"get bad part number", func(s *Store) error {
			_, _, _, err := s.GetObject(ctx, "b", "k", GetOptions{PartNumber: MaxPartNumber + 1}, false)
			return err
		}, ErrInvalidArgument, ""},
		{"get inverted range", func(s *Store) error {
			_, _, _, err := s.GetObject(ctx, "b", "k", GetOptions{Range: &ByteRange{5, 4}}, false)
			return err
		}, ErrInvalidRange, ""},
		{"delete ok", func(s *Store) error { return s.DeleteObject(ctx, "b", "k") }, nil, "DeleteObject"},
		{"delete invalid key", func(s *Store) error { return s.DeleteObject(ctx, "b", "a\x00") }, ErrInvalidKey, ""},
		{"delete objects too many", func(s *Store) error {
			_, err := s.DeleteObjects(ctx, "b", make([]string, MaxDeleteObjects+1))
			return err
		}, ErrInvalidRequest, ""},
		{"list negative max-keys", func(s *Store) error { _, err := s.ListObjects(ctx, "b", ListParams{MaxKeys: -1}); return err }, ErrInvalidArgument, ""},
		{"list zero max-keys checks bucket", func(s *Store) error { _, err := s.ListObjects(ctx, "missing", ListParams{}); return err }, ErrNoSuchBucket, "HeadBucket"},
		{"copy ok", func(s *Store) error {
			_, err := s.CopyObject(ctx, CopySource{Bucket: "b", Key: "s"}, "b", "d", CopyOptions{})
			return err
			// The fake's source carries no checksum: the store heads it, reads
			// it for the CRC64NVME S3 gives a copy, then copies.
		}, nil, "GetObject,GetObject,CopyObject"},
		{"copy bad destination", func(s *Store) error {
			_, err := s.CopyObject(ctx, CopySource{Bucket: "b", Key: "s"}, "b", long, CopyOptions{})
			return err
		}, ErrKeyTooLong, ""},
		{"copy impossible source", func(s *Store) error {
			_, err := s.CopyObject(ctx, CopySource{Bucket: "b", Key: ""}, "b", "d", CopyOptions{})
			return err
		}, ErrNoSuchKey, ""},
		{"copy bad algorithm", func(s *Store) error {
			_, err := s.CopyObject(ctx, CopySource{Bucket: "b", Key: "s"}, "b", "d", CopyOptions{ChecksumAlgorithm: "nope"})
			return err
		}, ErrInvalidRequest, ""},
		{"create upload ok", func(s *Store) error {
			_, err := s.CreateMultipartUpload(ctx, "b", "k", ObjectMeta{}, "crc32", "")
			return err
		}, nil, "CreateMultipartUpload"},
		{"create upload bad key", func(s *Store) error {
			_, err := s.CreateMultipartUpload(ctx, "b", "", ObjectMeta{}, "", "")
			return err
		}, ErrInvalidKey, ""},
		{"create upload bad type", func(s *Store) error {
			_, err := s.CreateMultipartUpload(ctx, "b", "k", ObjectMeta{}, AlgSHA256, ChecksumFullObject)
			return err
		}, ErrInvalidRequest, ""},
		{"upload part ok", func(s *Store) error {
			_, err := s.UploadPart(ctx, "b", "k", up, 1, body(), PutOptions{Size: 1})
			return err
		}, nil, "UploadPart"},
		{"upload part max number ok", func(s *Store) error {
			_, err := s.UploadPart(ctx, "b", "k", up, MaxPartNumber, body(), PutOptions{Size: 1})
			return err
		}, nil, "UploadPart"},
		{"upload part zero", func(s *Store) error {
			_, err := s.UploadPart(ctx, "b", "k", up, 0, body(), PutOptions{Size: 1})
			return err
		}, ErrInvalidArgument, ""},
		{"upload part 10001", func(s *Store) error {
			_, err := s.UploadPart(ctx, "b", "k", up, MaxPartNumber+1, body(), PutOptions{Size: 1})
			return err
		}, ErrInvalidArgument, ""},
		{"upload part too large", func(s *Store) error {
			_, err := s.UploadPart(ctx, "b", "k", up, 1, body(), PutOptions{Size: MaxObjectSize + 1})
			return err
		}, ErrEntityTooLarge, ""},
		{"upload part no upload id", func(s *Store) error {
			_, err := s.UploadPart(ctx, "b", "k", "", 1, body(), PutOptions{Size: 1})
			return err
		}, ErrNoSuchUpload, "HeadBucket"}, // NoSuchBucket would come first
		{"upload part in a missing bucket", func(s *Store) error {
			_, err := s.UploadPart(ctx, "missing", "k", "", 1, body(), PutOptions{Size: 1})
			return err
		}, ErrNoSuchBucket, "HeadBucket"},
		{"list parts in a missing bucket", func(s *Store) error { _, err := s.ListParts(ctx, "missing", "k", "", 0, 10); return err }, ErrNoSuchBucket, "HeadBucket"},
		{"upload part copy ok", func(s *Store) error {
			_, err := s.UploadPartCopy(ctx, CopySource{Bucket: "b", Key: "s", Range: &ByteRange{0, 9}}, "b", "k", up, 2)
			return err
		}, nil, "UploadPartCopy"},
		{"upload part copy bad range", func(s *Store) error {
			_, err := s.UploadPartCopy(ctx, CopySource{Bucket: "b", Key: "s", Range: &ByteRange{9, 0}}, "b", "k", up, 2)
			return err
		}, ErrInvalidArgument, ""},
		{"upload part copy bad number", func(s *Store) error {
			_, err := s.UploadPartCopy(ctx, CopySource{Bucket: "b", Key: "s"}, "b", "k", up, -1)
			return err
		}, ErrInvalidArgument, ""},
		{"complete ok", func(s *Store) error {
			_, err := s.CompleteMultipartUpload(ctx, "b", "k", up, []CompletePart{{Number: 1, ETag: "e"}}, PutOptions{})
			return err
		}, nil, "CompleteMultipartUpload"},
		{"complete without parts", func(s *Store) error {
			_, err := s.CompleteMultipartUpload(ctx, "b", "k", up, nil, PutOptions{})
			return err
		}, ErrInvalidRequest, ""},
		{"abort ok", func(s *Store) error { return s.AbortMultipartUpload(ctx, "b", "k", up) }, nil, "AbortMultipartUpload"},
		{"abort impossible key", func(s *Store) error { return s.AbortMultipartUpload(ctx, "b", long, up) }, ErrNoSuchUpload, "HeadBucket"},
		{"list parts negative", func(s *Store) error { _, err := s.ListParts(ctx, "b", "k", up, -1, 10); return err }, ErrInvalidArgument, ""},
		{"list uploads negative", func(s *Store) error {
			_, err := s.ListMultipartUploads(ctx, "b", ListUploadsParams{MaxUploads: -5})
			return err
		}, ErrInvalidArgument, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEngine{}
			err := tt.call(New(f))
			if tt.err == nil && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			want := []string{}
			if tt.engine != "" {
				want = []string{tt.engine}
			}
			if strings.Join(f.calls, ",") != strings.Join(want, ",") {
				t.Fatalf("engine calls %v, want %v", f.calls, want)
			}
		})
	}
}

func TestStoreNormalizes(t *testing.T) {
	ctx := context.Background()
	f := &fakeEngine{}
	s := New(f)

	if _, err := s.ListObjects(ctx, "b", ListParams{MaxKeys: 5000}); err != nil || f.lastList.MaxKeys != MaxListKeys {
		t.Fatalf("max-keys not clamped: %d, %v", f.lastList.MaxKeys, err)
	}
	res, err := s.ListObjects(ctx, "b", ListParams{MaxKeys: 0})
	if err != nil || len(res.Objects) != 0 || res.Truncated {
		t.Fatalf("max-keys=0 gave %+v, %v", res, err)
	}
	if _, err := s.ListParts(ctx, "b", "k", "u", 0, 99999); err != nil || f.lastParts != MaxListKeys {
		t.Fatalf("max-parts not clamped: %d, %v", f.lastParts, err)
	}
	if _, err := s.ListMultipartUploads(ctx, "b", ListUploadsParams{MaxUploads: 2000}); err != nil || f.lastMaxUp != MaxListKeys {
		t.Fatalf("max-uploads not clamped: %d, %v", f.lastMaxUp, err)
	}
	if _, err := s.CreateMultipartUpload(ctx, "b", "k", ObjectMeta{}, "crc64nvme", ""); err != nil || f.lastAlg != AlgCRC64NVME || f.lastType != ChecksumFullObject {
		t.Fatalf("upload checksum not normalized: %q %q %v", f.lastAlg, f.lastType, err)
	}
	if _, err := s.CreateMultipartUpload(ctx, "b", "k", ObjectMeta{}, "sha1", ""); err != nil || f.lastAlg != AlgSHA1 || f.lastType != ChecksumComposite {
		t.Fatalf("upload checksum not normalized: %q %q %v", f.lastAlg, f.lastType, err)
	}
	if _, err := s.CopyObject(ctx, CopySource{Bucket: "b", Key: "s"}, "b", "d", CopyOptions{ChecksumAlgorithm: "crc32c"}); err != nil || f.lastAlg != AlgCRC32C {
		t.Fatalf("copy checksum not normalized: %q %v", f.lastAlg, err)
	}
}

func TestStoreDeleteObjectsMixed(t *testing.T) {
	f := &fakeEngine{}
	keys := []string{"a", "bad\x00", "b", strings.Repeat("x", MaxKeyLength+1), "c"}
	res, err := New(f).DeleteObjects(context.Background(), "b", keys)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.deleted, ",") != "a,b,c" {
		t.Fatalf("engine got %q, want only the valid keys", f.deleted)
	}
	if len(res) != len(keys) {
		t.Fatalf("%d results for %d keys", len(res), len(keys))
	}
	for i, r := range res {
		if r.Key != keys[i] {
			t.Fatalf("result %d is for %q, want %q", i, r.Key, keys[i])
		}
	}
	if res[0].Err != nil || res[2].Err != nil || res[4].Err != nil {
		t.Fatalf("valid keys failed: %+v", res)
	}
	if !errors.Is(res[1].Err, ErrInvalidKey) || !errors.Is(res[3].Err, ErrKeyTooLong) {
		t.Fatalf("invalid keys: %v, %v", res[1].Err, res[3].Err)
	}
}

func (f *fakeEngine) SetBucketVersioning(context.Context, string, string) error {
	f.rec("SetBucketVersioning")
	return nil
}
func (f *fakeEngine) BucketVersioning(context.Context, string) (string, error) {
	f.rec("BucketVersioning")
	return "", nil
}
func (f *fakeEngine) DeleteObjectVersion(_ context.Context, _, key string, _ DeleteOptions) (DeleteVersionResult, error) {
	f.rec("DeleteObjectVersion")
	return DeleteVersionResult{Key: key}, nil
}
func (f *fakeEngine) DeleteObjectVersions(_ context.Context, _ string, ids []ObjectID) ([]DeleteVersionResult, error) {
	f.rec("DeleteObjectVersions")
	out := make([]DeleteVersionResult, len(ids))
	for i, id := range ids {
		out[i] = DeleteVersionResult{Key: id.Key}
	}
	return out, nil
}
func (f *fakeEngine) ListObjectVersions(context.Context, string, ListVersionsParams) (ListVersionsResult, error) {
	f.rec("ListObjectVersions")
	return ListVersionsResult{}, nil
}
func (f *fakeEngine) ReplaceObjectMeta(_ context.Context, bucket, key, versionID, _ string, meta ObjectMeta) (ObjectInfo, error) {
	f.rec("ReplaceObjectMeta")
	return ObjectInfo{Bucket: bucket, Key: key, VersionID: versionID, Meta: meta}, nil
}

func TestVersionIDs(t *testing.T) {
	seen := map[string]bool{}
	// 1 in 64 random base64url ids starts with '-': 2,000 draws find one
	// unless the generator avoids it.
	for range 2000 {
		id := NewVersionID()
		if len(id) != 32 || !ValidVersionID(id) || id == NullVersion || seen[id] || id[0] == '-' {
			t.Fatalf("NewVersionID gave %q", id)
		}
		seen[id] = true
	}
	for _, c := range []struct {
		id    string
		valid bool
	}{
		{NullVersion, true}, {"", false}, {"Null", false}, {"abc", false},
		{strings.Repeat("A", 32), true}, {strings.Repeat("A", 31), false}, {strings.Repeat("A", 31) + "+", false},
	} {
		if got := ValidVersionID(c.id); got != c.valid {
			t.Errorf("ValidVersionID(%q) = %v, want %v", c.id, got, c.valid)
		}
	}
}

func TestListObjectVersionsParams(t *testing.T) {
	for _, c := range []struct {
		name string
		p    ListVersionsParams
		ok   bool
	}{
		{"defaults", ListVersionsParams{}, true},
		{"markers", ListVersionsParams{KeyMarker: "k", VersionIDMarker: NullVersion}, true},
		{"negative max-keys", ListVersionsParams{MaxKeys: -1}, false},
		{"version marker alone", ListVersionsParams{VersionIDMarker: NullVersion}, false},
		{"malformed version marker", ListVersionsParams{KeyMarker: "k", VersionIDMarker: "x"}, false},
	} {
		f := &fakeEngine{}
		_, err := New(f).ListObjectVersions(context.Background(), "b", c.p)
		if c.ok != (err == nil) || !c.ok && (!errors.Is(err, ErrInvalidArgument) || len(f.calls) != 0) {
			t.Errorf("%s: %v (engine calls %v)", c.name, err, f.calls)
		}
	}
}
