package protocol

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/s3gate/s3gate/store"
)

// Part is where one part of a multipart object lies in the object.
type Part struct {
	Number      int
	Start, Size int64
}

// SelectRange resolves partNumber and Range of opts against an object of size
// bytes. part looks a part up by number; multipart is false for a
// single-part object (whose only part is 1).
func SelectRange(size int64, multipart bool, part func(n int) (Part, bool), opts store.GetOptions) (*store.ByteRange, error) {
	if opts.PartNumber > 0 {
		if opts.RangeSpec != "" || opts.Range != nil {
			return nil, fmt.Errorf("%w: Range and partNumber cannot both be specified", store.ErrInvalidRequest)
		}
		if !multipart {
			if opts.PartNumber != 1 {
				return nil, fmt.Errorf("%w: part %d of a single-part object", store.ErrInvalidRange, opts.PartNumber)
			}
			if size == 0 {
				return nil, nil
			}
			// S3 answers part 1 of a plain object as a range over all of it
			// (206 with Content-Range).
			return &store.ByteRange{Start: 0, End: size - 1}, nil
		}
		if p, ok := part(opts.PartNumber); ok {
			if p.Size == 0 {
				return nil, nil
			}
			return &store.ByteRange{Start: p.Start, End: p.Start + p.Size - 1}, nil
		}
		return nil, fmt.Errorf("%w: the object has no part %d", store.ErrInvalidRange, opts.PartNumber)
	}
	if opts.RangeSpec != "" {
		return store.ParseRange(opts.RangeSpec, size)
	}
	if br := opts.Range; br != nil {
		if br.Start >= size || br.Start < 0 || br.End < br.Start {
			return nil, fmt.Errorf("%w: bytes=%d-%d of a %d-byte object", store.ErrInvalidRange, br.Start, br.End, size)
		}
		return &store.ByteRange{Start: br.Start, End: min(br.End, size-1)}, nil
	}
	return nil, nil
}

// Overlap returns the span of a part (at pStart, pSize bytes) that the read
// [start, start+n) covers, as an offset into the part and a length; ok is
// false if they do not overlap or the part is empty.
func Overlap(start, n, pStart, pSize int64) (off, cnt int64, ok bool) {
	end, pEnd := start+n, pStart+pSize
	if pEnd <= start || pStart >= end || pSize == 0 {
		return 0, 0, false
	}
	off = max(start, pStart) - pStart
	return off, min(end, pEnd) - pStart - off, true
}

// CopySourceConditions evaluates x-amz-copy-source-if-*: every failure is a
// 412 for copies, including the ones that are a 304 for GET.
func CopySourceConditions(c store.Conditions, info store.ObjectInfo) error {
	err := store.EvalConditions(c, info.ETag, info.LastModified)
	if errors.Is(err, store.ErrNotModified) {
		return fmt.Errorf("%w: copy source: %v", store.ErrPreconditionFailed, err)
	}
	return err
}

// CheckWriteConditions evaluates If-Match / If-None-Match of a write against
// the current object; the engine calls it under the object's lock.
func CheckWriteConditions(opts store.PutOptions, exists bool, curETag string) error {
	if opts.IfNoneMatch != "" {
		if opts.IfNoneMatch != "*" {
			return fmt.Errorf("%w: If-None-Match on writes supports only *", store.ErrInvalidArgument)
		}
		if exists {
			return fmt.Errorf("%w: the object exists (If-None-Match: *)", store.ErrPreconditionFailed)
		}
	}
	if opts.IfMatch != "" {
		if !exists {
			return fmt.Errorf("%w: If-Match on a missing object", store.ErrNoSuchKey)
		}
		if store.EvalConditions(store.Conditions{IfMatch: opts.IfMatch}, curETag, time.Time{}) != nil {
			return fmt.Errorf("%w: If-Match %s does not match", store.ErrPreconditionFailed, opts.IfMatch)
		}
	}
	return nil
}

// VerifyCompleteChecksum compares the object checksum the client sent with
// Complete (x-amz-checksum-*) against the combined one: composite values
// carry a "-N" part-count suffix that clients may leave out, and a value of
// another algorithm than the object's is refused, not ignored.
func VerifyCompleteChecksum(opts store.PutOptions, ck store.Checksum) error {
	for alg, value := range opts.Checksums {
		if !strings.EqualFold(alg, ck.Algorithm) {
			return typeMismatch(ck.Algorithm, alg)
		}
		want := ck.Value
		if _, _, suffixed := store.SplitComposite(value); ck.Type == store.ChecksumComposite && !suffixed {
			want, _, _ = store.SplitComposite(want)
		}
		if value != want {
			return store.ClientError(store.ErrBadDigest, "The "+ck.Algorithm+" you specified did not match the calculated checksum.")
		}
	}
	return nil
}

// typeMismatch is S3's answer to a checksum of another algorithm than the
// multipart upload's (on UploadPart or Complete).
func typeMismatch(expected, actual string) error {
	if expected == "" {
		expected = "null"
	}
	return store.ClientError(store.ErrInvalidRequest, "Checksum Type mismatch occurred, expected checksum Type: "+
		strings.ToLower(expected)+", actual checksum Type: "+strings.ToLower(actual))
}

// PartPutOptions checks the checksum of an UploadPart against the upload's
// algorithm and fills it in where the part names none, so that Complete can
// combine the parts' checksums. A declared, announced or trailing checksum
// of another algorithm is S3's "Checksum Type mismatch" InvalidRequest.
func PartPutOptions(u store.Upload, opts store.PutOptions) (store.PutOptions, error) {
	want := u.ChecksumAlgorithm
	if want == "" {
		return opts, nil
	}
	for alg := range opts.Checksums {
		if !strings.EqualFold(alg, want) {
			return opts, typeMismatch(want, alg)
		}
	}
	if opts.ChecksumAlgorithm != "" && !strings.EqualFold(opts.ChecksumAlgorithm, want) {
		return opts, typeMismatch(want, opts.ChecksumAlgorithm)
	}
	if trailer := opts.TrailerChecksum; trailer != nil {
		opts.TrailerChecksum = func() (string, string, error) {
			alg, value, err := trailer()
			if err == nil && alg != "" && !strings.EqualFold(alg, want) {
				return "", "", typeMismatch(want, alg)
			}
			return alg, value, err
		}
	}
	if opts.ChecksumAlgorithm == "" && len(opts.Checksums) == 0 {
		// No value declared (or one only in a trailer): compute the
		// upload's algorithm, which the trailer, if any, must then match.
		opts.ChecksumAlgorithm = want
	}
	return opts, nil
}

// CompleteChecksum runs the checksum and size checks of
// CompleteMultipartUpload for the chosen parts (already matched against the
// request by store.CheckCompleteParts) and returns the object's checksum:
//   - x-amz-mp-object-size must equal the parts' total;
//   - x-amz-checksum-type, if sent, must be the upload's;
//   - a COMPOSITE upload needs the part checksum listed for every part;
//   - an upload without an algorithm gets S3's default, a FULL_OBJECT
//     CRC64NVME combined from the parts' CRC64NVMEs (when every part has one);
//   - a whole-object checksum the client sent must match (VerifyCompleteChecksum).
func CompleteChecksum(u store.Upload, req []store.CompletePart, chosen []store.PartInfo, opts store.PutOptions) (store.Checksum, error) {
	if opts.MPObjectSize != nil {
		var size int64
		for _, p := range chosen {
			size += p.Size
		}
		if *opts.MPObjectSize != size {
			return store.Checksum{}, store.ClientError(store.ErrInvalidRequest, fmt.Sprintf(
				"The provided 'x-amz-mp-object-size' header value %d does not match what was computed: %d", *opts.MPObjectSize, size))
		}
	}
	alg, ctype := u.ChecksumAlgorithm, u.ChecksumType
	if alg != "" {
		if t := strings.ToUpper(opts.ChecksumType); t != "" && t != ctype {
			return store.Checksum{}, store.ClientError(store.ErrInvalidRequest, "The upload was created using the "+ctype+
				" checksum mode. The complete request must use the same checksum mode.")
		}
		if ctype == store.ChecksumComposite {
			for _, cp := range req {
				if !hasChecksum(cp.Checksums, alg) {
					return store.Checksum{}, store.ClientError(store.ErrInvalidRequest, fmt.Sprintf(
						"The upload was created using a %s checksum. The complete request must include the checksum for each part. It was missing for part %d in the request.",
						strings.ToLower(alg), cp.Number))
				}
			}
		}
	} else {
		alg, ctype = store.AlgCRC64NVME, store.ChecksumFullObject
		for _, p := range chosen {
			if p.Checksum.Algorithm != store.AlgCRC64NVME {
				alg = "" // a part from before the default, or of another algorithm
				break
			}
		}
	}
	ck, err := store.MultipartChecksum(alg, ctype, chosen)
	if err != nil {
		return store.Checksum{}, err
	}
	if err := VerifyCompleteChecksum(opts, ck); err != nil {
		return store.Checksum{}, err
	}
	return ck, nil
}

// hasChecksum reports whether a Complete part entry lists a checksum of alg.
func hasChecksum(m map[string]string, alg string) bool {
	for a, v := range m {
		if strings.EqualFold(a, alg) && v != "" {
			return true
		}
	}
	return false
}

// ErrCopyToItself is S3's answer to a copy onto itself that changes nothing;
// the message is AWS's, word for word (final period included).
//
//lint:ignore ST1005 the text is S3's error message as clients see it
var ErrCopyToItself = fmt.Errorf("%w: This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.", store.ErrInvalidRequest)
