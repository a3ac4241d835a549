package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/store"
)

func testMultipart(t *testing.T, v *Env) {
	ctx := context.Background()
	s := v.Store
	// A composite checksum (the default type) over CRC32C parts.
	data, info := v.multipartObject(t, "b", "obj", 30, store.MinPartSize+3, 77)
	parts := []store.PartInfo{{ETag: MD5Hex(data[:store.MinPartSize+3])}, {ETag: MD5Hex(data[store.MinPartSize+3:])}}
	if want := store.MultipartETag(parts); info.ETag != want || info.Size != int64(len(data)) {
		t.Errorf("complete = %s %d, want %s %d", info.ETag, info.Size, want, len(data))
	}
	if info.Checksum.Algorithm != store.AlgCRC32C || info.Checksum.Type != store.ChecksumComposite {
		t.Errorf("checksum = %+v", info.Checksum)
	}
	got, _, b := v.get(t, "b", "obj", store.GetOptions{})
	SameBytes(t, "obj", b, data)
	if got.ETag != info.ETag || got.Meta.ContentType != "app/x" || len(got.Parts) != 2 || got.Checksum != info.Checksum {
		t.Errorf("get: %+v", got)
	}
	if r := v.Rows(t); r.Uploads != 0 || r.UploadParts != 0 {
		t.Errorf("upload rows left after complete: %+v", r)
	}

	// A full-object checksum over CRC32 parts, and the life of an upload: a
	// part uploaded again replaces it, parts list in pages, a repeated
	// Complete answers the same.
	id, pis, datas := v.upload(t, "b", "mp", store.ObjectMeta{ContentType: "a/b"}, store.AlgCRC32, store.ChecksumFullObject,
		40, store.MinPartSize, store.MinPartSize+1, 100)
	datas[2] = Bytes(49, 200)
	pi3, err := s.UploadPart(ctx, "b", "mp", id, 3, bytes.NewReader(datas[2]), store.PutOptions{Size: 200})
	if err != nil {
		t.Fatal(err)
	}
	pis[2] = pi3
	whole := slices.Concat(datas...)
	lp, err := s.ListParts(ctx, "b", "mp", id, 0, 2)
	if err != nil || len(lp.Parts) != 2 || !lp.Truncated || lp.NextPartNumberMarker != 2 {
		t.Fatalf("ListParts: %+v, %v", lp, err)
	}
	lp, err = s.ListParts(ctx, "b", "mp", id, 2, 2)
	if err != nil || len(lp.Parts) != 1 || lp.Truncated || lp.Parts[0].Size != 200 || lp.Parts[0].ETag != pis[2].ETag {
		t.Fatalf("ListParts page 2: %+v, %v", lp, err)
	}
	// EntityTooSmall: a small part that is not the last.
	smallID, small, _ := v.upload(t, "b", "small", store.ObjectMeta{}, "", "", 60, 4, 4)
	if _, err := s.CompleteMultipartUpload(ctx, "b", "small", smallID, completeAll(small), store.PutOptions{}); !errors.Is(err, store.ErrEntityTooSmall) {
		t.Errorf("small parts: %v, want ErrEntityTooSmall", err)
	}
	lu, err := s.ListMultipartUploads(ctx, "b", store.ListUploadsParams{})
	if err != nil || len(lu.Uploads) != 2 || lu.Uploads[0].Key != "mp" || lu.Uploads[1].Key != "small" {
		t.Fatalf("ListMultipartUploads: %+v, %v", lu, err)
	}

	info, err = s.CompleteMultipartUpload(ctx, "b", "mp", id, completeAll(pis), store.PutOptions{})
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	if !strings.HasSuffix(info.ETag, "-3") || info.ETag != store.MultipartETag(pis) || info.Size != int64(len(whole)) ||
		info.Checksum.Type != store.ChecksumFullObject {
		t.Errorf("complete info %+v", info)
	}
	// A repeat (an SDK retry after a lost reply) answers the same result;
	// another part list finds no upload.
	again, err := s.CompleteMultipartUpload(ctx, "b", "mp", id, completeAll(pis), store.PutOptions{})
	if err != nil || again.ETag != info.ETag || again.Checksum != info.Checksum || again.Size != info.Size {
		t.Errorf("complete twice: %+v, %v; want %+v", again, err, info)
	}
	if _, err := s.CompleteMultipartUpload(ctx, "b", "mp", id, completeAll(pis[:2]), store.PutOptions{}); !errors.Is(err, store.ErrNoSuchUpload) {
		t.Errorf("complete again with other parts: %v", err)
	}
	got, _, b = v.get(t, "b", "mp", store.GetOptions{})
	SameBytes(t, "multipart object", b, whole)
	if got.ETag != info.ETag || len(got.Parts) != 3 || got.Meta.ContentType != "a/b" || got.Checksum != info.Checksum {
		t.Errorf("get info %+v", got)
	}
	p1 := int64(len(datas[0]))
	p2 := p1 + int64(len(datas[1]))
	size := int64(len(whole))
	ranges := []struct {
		spec       string
		start, end int64
	}{
		{fmt.Sprintf("bytes=%d-%d", p1-10, p1+10), p1 - 10, p1 + 10}, // across the 1|2 boundary
		{fmt.Sprintf("bytes=%d-%d", p1-1, p2), p1 - 1, p2},           // from the end of 1 to the start of 3
		{"bytes=0-", 0, size - 1},                                    // whole
		{fmt.Sprintf("bytes=%d-%d", p2+5, p2+5), p2 + 5, p2 + 5},     // inside the inline last part
		{fmt.Sprintf("bytes=-%d", size-p2+500), p2 - 500, size - 1},  // a suffix over parts 2 and 3
		{fmt.Sprintf("bytes=%d-", p2), p2, size - 1},                 // exactly part 3
		{fmt.Sprintf("bytes=%d-99999999", p1), p1, size - 1},         // parts 2 and 3, end clamped
	}
	for _, r := range ranges {
		_, rng, b := v.get(t, "b", "mp", store.GetOptions{RangeSpec: r.spec})
		if rng == nil || rng.Start != r.start || rng.End != r.end {
			t.Errorf("range %s: got %+v, want %d-%d", r.spec, rng, r.start, r.end)
		}
		SameBytes(t, r.spec, b, whole[r.start:r.end+1])
	}
	if info, _, rd, err := s.GetObject(ctx, "b", "mp", store.GetOptions{RangeSpec: "bytes=99999999-"}, false); !errors.Is(err, store.ErrInvalidRange) || rd != nil || info.Size != size {
		t.Errorf("range beyond the end: info.Size=%d rd=%v err=%v, want ErrInvalidRange with info", info.Size, rd, err)
	}
	// partNumber selects one part; a missing part is InvalidRange.
	for n, start := range []int64{0, p1, p2} {
		info, rng, b := v.get(t, "b", "mp", store.GetOptions{PartNumber: n + 1})
		SameBytes(t, fmt.Sprintf("part %d", n+1), b, datas[n])
		if len(info.Parts) != 3 || rng == nil || rng.Start != start || rng.End != start+int64(len(datas[n]))-1 {
			t.Errorf("partNumber %d: %d parts, range %+v", n+1, len(info.Parts), rng)
		}
	}
	if _, _, _, err := s.GetObject(ctx, "b", "mp", store.GetOptions{PartNumber: 4}, false); !errors.Is(err, store.ErrInvalidRange) {
		t.Errorf("partNumber 4: %v", err)
	}
	// A copy of a multipart object references the same part blobs.
	before := v.Content(t)
	if _, err := s.CopyObject(ctx, store.CopySource{Bucket: "b", Key: "mp"}, "b", "mp-copy", store.CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	_, _, b = v.get(t, "b", "mp-copy", store.GetOptions{})
	SameBytes(t, "copy of multipart", b, whole)
	v.sameContent(t, "after copy of multipart", before)
	// Overwriting a multipart object with a single put drops its manifest.
	plain := v.put(t, "b", "mp", []byte("plain"))
	if n := v.Object(t, "b", "mp").Parts; n != 0 {
		t.Errorf("%d manifest rows left after overwrite", n)
	}
	if info, _, b := v.get(t, "b", "mp", store.GetOptions{}); info.Parts != nil || info.ETag != plain.ETag || string(b) != "plain" {
		t.Errorf("overwritten multipart = %+v, %q", info, b)
	}
	if err := s.DeleteObject(ctx, "b", "mp"); err != nil {
		t.Errorf("delete a formerly multipart object: %v", err)
	}
	if _, _, _, err := s.GetObject(ctx, "b", "mp", store.GetOptions{}, false); !errors.Is(err, store.ErrNoSuchKey) {
		t.Errorf("get mp after delete = %v", err)
	}
	if err := s.AbortMultipartUpload(ctx, "b", "small", smallID); err != nil {
		t.Fatal(err)
	}
	if err := s.AbortMultipartUpload(ctx, "b", "small", smallID); !errors.Is(err, store.ErrNoSuchUpload) {
		t.Errorf("abort twice: %v", err)
	}
	v.Idle(t)
}

// testUploads: failed completes, listings of uploads, NoSuchUpload.
func testUploads(t *testing.T, v *Env) {
	t.Run("complete errors", func(t *testing.T) { testCompleteErrors(t, v) })
	t.Run("listing and NoSuchUpload", func(t *testing.T) { testNoSuchUpload(t, v) })
}

// testCompleteErrors: a Complete that names parts wrongly fails, writes no
// object and leaves the upload as it was, so that a valid list then
// completes it.
func testCompleteErrors(t *testing.T, v *Env) {
	ctx := context.Background()
	id, ps, datas := v.upload(t, "b", "k", store.ObjectMeta{}, "", "", 40, store.MinPartSize, 10, 10)
	p := func(n int) store.CompletePart { return store.CompletePart{Number: n, ETag: ps[n-1].ETag} }
	tests := []struct {
		name  string
		parts []store.CompletePart
		want  error
	}{
		{"wrong etag", []store.CompletePart{p(1), {Number: 2, ETag: "00000000000000000000000000000000"}}, store.ErrInvalidPart},
		{"wrong etag among parts", []store.CompletePart{p(1), {Number: 2, ETag: "00"}, p(3)}, store.ErrInvalidPart},
		{"missing part", []store.CompletePart{p(1), {Number: 4, ETag: ps[1].ETag}}, store.ErrInvalidPart},
		{"missing last part", []store.CompletePart{p(3), {Number: 4, ETag: "x"}}, store.ErrInvalidPart},
		{"order", []store.CompletePart{p(2), p(1)}, store.ErrInvalidPartOrder},
		{"order of three", []store.CompletePart{p(2), p(1), p(3)}, store.ErrInvalidPartOrder},
		{"too small", []store.CompletePart{p(1), p(2), p(3)}, store.ErrEntityTooSmall},
		{"only small parts", []store.CompletePart{p(2), p(3)}, store.ErrEntityTooSmall},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Store.CompleteMultipartUpload(ctx, "b", "k", id, tc.parts, store.PutOptions{}); !errors.Is(err, tc.want) {
				t.Fatalf("complete = %v, want %v", err, tc.want)
			}
			if _, _, _, err := v.Store.GetObject(ctx, "b", "k", store.GetOptions{}, true); !errors.Is(err, store.ErrNoSuchKey) {
				t.Errorf("failed complete left an object: %v", err)
			}
			if lp, err := v.Store.ListParts(ctx, "b", "k", id, 0, 0); err != nil || len(lp.Parts) != 3 {
				t.Fatalf("ListParts after failed complete = %d, %v", len(lp.Parts), err)
			}
		})
	}
	if _, err := v.Store.CompleteMultipartUpload(ctx, "b", "k", id, []store.CompletePart{p(1), p(3)}, store.PutOptions{}); err != nil {
		t.Fatalf("valid complete after failures: %v", err)
	}
	_, _, b := v.get(t, "b", "k", store.GetOptions{})
	SameBytes(t, "completed after failures", b, slices.Concat(datas[0], datas[2]))
}

// testNoSuchUpload lists uploads in pages and answers NoSuchUpload for an
// unknown id, the wrong key, an aborted upload and a second abort.
func testNoSuchUpload(t *testing.T, v *Env) {
	ctx := context.Background()
	s := v.Store
	u, err := s.CreateMultipartUpload(ctx, "b", "k", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	u2, err := s.CreateMultipartUpload(ctx, "b", "k", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	lu, err := s.ListMultipartUploads(ctx, "b", store.ListUploadsParams{})
	if err != nil || len(lu.Uploads) != 2 {
		t.Fatalf("ListMultipartUploads = %+v, %v", lu, err)
	}
	lu, err = s.ListMultipartUploads(ctx, "b", store.ListUploadsParams{MaxUploads: 1})
	if err != nil || len(lu.Uploads) != 1 || !lu.Truncated {
		t.Fatalf("ListMultipartUploads max 1 = %+v, %v", lu, err)
	}
	lu2, err := s.ListMultipartUploads(ctx, "b", store.ListUploadsParams{KeyMarker: lu.NextKeyMarker, UploadIDMarker: lu.NextUploadIDMarker})
	if err != nil || len(lu2.Uploads) != 1 || lu2.Uploads[0].UploadID == lu.Uploads[0].UploadID {
		t.Fatalf("second page = %+v, %v", lu2, err)
	}
	if err := s.AbortMultipartUpload(ctx, "b", "k", u.UploadID); err != nil {
		t.Fatal(err)
	}
	one := []store.CompletePart{{Number: 1, ETag: MD5Hex(nil)}}
	part := func(key, id string) func() error {
		return func() error {
			_, err := s.UploadPart(ctx, "b", key, id, 1, bytes.NewReader([]byte("x")), store.PutOptions{Size: 1})
			return err
		}
	}
	tests := []struct {
		name string
		fn   func() error
	}{
		{"part to unknown", part("k", "unknown")},
		{"part to wrong key", part("other", u2.UploadID)},
		{"part to aborted", part("k", u.UploadID)},
		{"complete aborted", func() error {
			_, err := s.CompleteMultipartUpload(ctx, "b", "k", u.UploadID, one, store.PutOptions{})
			return err
		}},
		{"abort twice", func() error { return s.AbortMultipartUpload(ctx, "b", "k", u.UploadID) }},
		{"list parts of aborted", func() error {
			_, err := s.ListParts(ctx, "b", "k", u.UploadID, 0, 0)
			return err
		}},
	}
	for _, tc := range tests {
		if err := tc.fn(); !errors.Is(err, store.ErrNoSuchUpload) {
			t.Errorf("%s = %v, want ErrNoSuchUpload", tc.name, err)
		}
	}
}

// testUploadPartCopy: a whole-object part copy references the source's blob;
// a range part copy holds the range's bytes; a range beyond the source is
// InvalidArgument.
func testUploadPartCopy(t *testing.T, v *Env) {
	ctx := context.Background()
	s := v.Store
	big := Bytes(61, store.MinPartSize+1000)
	small := Bytes(51, 1000)
	v.put(t, "b", "big", big)
	v.put(t, "b", "small", small)
	tests := []struct {
		src  string
		rng  store.ByteRange
		want []byte
	}{
		{"big", store.ByteRange{Start: 10, End: 2<<20 + 9}, big[10 : 2<<20+10]},
		{"small", store.ByteRange{Start: 100, End: 199}, small[100:200]},
	}
	for _, tc := range tests {
		// Part 1 copies big whole, part 2 a range of tc.src.
		key := "dst-" + tc.src
		u, err := s.CreateMultipartUpload(ctx, "b", key, store.ObjectMeta{}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		before := v.Content(t)
		p1, err := s.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: "big"}, "b", key, u.UploadID, 1)
		if err != nil {
			t.Fatal(err)
		}
		if p1.ETag != MD5Hex(big) || p1.Size != int64(len(big)) {
			t.Errorf("whole-object part copy %+v", p1)
		}
		v.sameContent(t, "after whole-object part copy", before)
		p2, err := s.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: tc.src, Range: &tc.rng}, "b", key, u.UploadID, 2)
		if err != nil {
			t.Fatal(err)
		}
		if p2.Size != int64(len(tc.want)) || p2.ETag != MD5Hex(tc.want) {
			t.Errorf("range part copy of %s: %+v", tc.src, p2)
		}
		beyond := store.ByteRange{Start: 0, End: int64(len(big))}
		if tc.src == "small" {
			beyond = store.ByteRange{Start: 100, End: int64(len(small))}
		}
		if _, err := s.UploadPartCopy(ctx, store.CopySource{Bucket: "b", Key: tc.src, Range: &beyond}, "b", key, u.UploadID, 3); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("range %+v beyond %s: %v", beyond, tc.src, err)
		}
		if _, err := s.CompleteMultipartUpload(ctx, "b", key, u.UploadID, completeAll([]store.PartInfo{p1, p2}), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		_, _, b := v.get(t, "b", key, store.GetOptions{})
		SameBytes(t, key, b, slices.Concat(big, tc.want))
	}
	v.Idle(t)
}
