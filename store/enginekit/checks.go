package enginekit

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
			return nil, nil
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

// VerifyCompleteChecksum compares a full-object checksum the client sent with
// Complete against the combined one; composite values carry a part-count
// suffix that clients may leave out.
func VerifyCompleteChecksum(opts store.PutOptions, ck store.Checksum) error {
	for alg, value := range opts.Checksums {
		if !strings.EqualFold(alg, ck.Algorithm) {
			continue
		}
		want := ck.Value
		if ck.Type == store.ChecksumComposite && !strings.Contains(value, "-") {
			want, _, _ = strings.Cut(want, "-")
		}
		if value != want {
			return fmt.Errorf("%w: the %s you specified did not match the calculated checksum", store.ErrBadDigest, ck.Algorithm)
		}
	}
	return nil
}

// ErrCopyToItself is S3's answer to a copy onto itself that changes nothing;
// the message is AWS's, word for word (final period included).
//
//lint:ignore ST1005 the text is S3's error message as clients see it
var ErrCopyToItself = fmt.Errorf("%w: This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.", store.ErrInvalidRequest)
