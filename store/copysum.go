package store

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrCopySourceChanged is what an engine's CopyObject returns when the source
// no longer has the ETag (CopyOptions.SourceETag) whose bytes the store
// hashed: the checksum computed for the copy would not describe what the
// engine is about to reference. Store.CopyObject retries on it.
var ErrCopySourceChanged = fmt.Errorf("%w: the copy source changed while its checksum was computed", ErrUnavailable)

// copyChecksumAttempts bounds the retries of a copy whose source keeps
// changing while its checksum is computed.
const copyChecksumAttempts = 3

// copyChecksum decides the checksum of a copy, as S3 makes it: the algorithm
// asked for in x-amz-checksum-algorithm, else the source's, else CRC64NVME,
// always as a full-object checksum. When the source already carries that
// (a single put's or a FULL_OBJECT multipart checksum of the algorithm), the
// copy keeps it and nothing is read: opts comes back unchanged. Otherwise the
// source's bytes are streamed once through the hashing Body (never buffered
// whole; the engine's GET path pins them) and opts carries the result for the
// ETag it was computed from.
func (s *Store) copyChecksum(ctx context.Context, src CopySource, opts CopyOptions) (CopyOptions, error) {
	info, _, rd, err := s.e.GetObject(ctx, src.Bucket, src.Key, GetOptions{Cond: src.Cond, VersionID: src.VersionID}, true)
	if rd != nil {
		_ = rd.Close() // head opens nothing; close defensively
	}
	if err != nil {
		return opts, copySourceErr(err)
	}
	target := opts.ChecksumAlgorithm
	if target == "" {
		target = info.Checksum.Algorithm
	}
	if target == "" {
		target = AlgCRC64NVME
	}
	if info.Checksum.Algorithm == target && info.Checksum.Type != ChecksumComposite {
		return opts, nil
	}
	info, _, rd, err = s.e.GetObject(ctx, src.Bucket, src.Key, GetOptions{Cond: src.Cond, VersionID: src.VersionID}, false)
	if err != nil {
		if rd != nil {
			_ = rd.Close()
		}
		return opts, copySourceErr(err)
	}
	if rd == nil {
		return opts, fmt.Errorf("copy source %s/%s: the engine opened no content", src.Bucket, src.Key)
	}
	defer rd.Close() //nolint:errcheck // releases the pins; a read error is reported below
	body := NewBody(rd, PutOptions{Size: info.Size, ChecksumAlgorithm: target})
	if _, err := io.Copy(io.Discard, body); err != nil {
		return opts, fmt.Errorf("read copy source to compute its %s checksum: %w", target, err)
	}
	d, err := body.Finish()
	if err != nil {
		return opts, fmt.Errorf("checksum of copy source: %w", err)
	}
	ck := d.Checksum
	opts.Checksum, opts.SourceETag = &ck, info.ETag
	return opts, nil
}

// copySourceErr turns a GET answer about the copy source into the copy's:
// every failed condition is a 412 for copies, a 304 of GET included.
func copySourceErr(err error) error {
	switch {
	case errors.Is(err, ErrNotModified):
		return fmt.Errorf("%w: copy source: %v", ErrPreconditionFailed, err)
	case errors.Is(err, ErrDeleteMarker):
		return fmt.Errorf("copy source: %w: the source of a copy request may not specifically refer to a delete marker by version id", ErrInvalidRequest)
	}
	return fmt.Errorf("copy source: %w", err)
}
