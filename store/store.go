package store

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Listing caps, as S3 has them.
const (
	// MaxListKeys is the most entries one listing page returns.
	MaxListKeys = 1000
	// MaxDeleteObjects is the most keys one DeleteObjects request may name.
	MaxDeleteObjects = 1000
)

// Store implements ObjectStore on top of a metadata engine: it validates names,
// keys, part numbers, checksum options and listing bounds, then delegates.
// Engines may therefore assume validated input.
type Store struct {
	e ObjectStore
}

var _ ObjectStore = (*Store)(nil)

// New returns a Store that validates requests and delegates them to e.
func New(e ObjectStore) *Store { return &Store{e: e} }

// ListBuckets implements ObjectStore.
func (s *Store) ListBuckets(ctx context.Context) ([]Bucket, error) {
	return s.e.ListBuckets(ctx)
}

// CreateBucket implements ObjectStore; the name must follow the S3 rules.
func (s *Store) CreateBucket(ctx context.Context, name, region string) error {
	if err := ValidBucketName(name); err != nil {
		return err
	}
	return s.e.CreateBucket(ctx, name, region)
}

// HeadBucket implements ObjectStore.
func (s *Store) HeadBucket(ctx context.Context, name string) (Bucket, error) {
	if name == "" {
		return Bucket{}, fmt.Errorf("%w: empty bucket name", ErrNoSuchBucket)
	}
	return s.e.HeadBucket(ctx, name)
}

// DeleteBucket implements ObjectStore.
func (s *Store) DeleteBucket(ctx context.Context, name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty bucket name", ErrNoSuchBucket)
	}
	return s.e.DeleteBucket(ctx, name)
}

// PutObject implements ObjectStore; the key must be valid and the declared
// size at most MaxObjectSize.
func (s *Store) PutObject(ctx context.Context, bucket, key string, body io.Reader, opts PutOptions) (ObjectInfo, error) {
	if err := ValidKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if err := checkPutOptions(opts); err != nil {
		return ObjectInfo{}, err
	}
	return s.e.PutObject(ctx, bucket, key, body, opts)
}

// GetObject implements ObjectStore. A key that could never have been written
// is ErrNoSuchKey without asking the engine.
func (s *Store) GetObject(ctx context.Context, bucket, key string, opts GetOptions, head bool) (ObjectInfo, *ByteRange, Reader, error) {
	if err := ValidKey(key); err != nil {
		return ObjectInfo{}, nil, nil, s.bucketFirst(ctx, bucket, fmt.Errorf("%w: %v", ErrNoSuchKey, err))
	}
	if err := checkPartNumber(opts.PartNumber, true); err != nil {
		return ObjectInfo{}, nil, nil, err
	}
	if r := opts.Range; r != nil && (r.Start < 0 || r.End < r.Start) {
		return ObjectInfo{}, nil, nil, fmt.Errorf("%w: bytes=%d-%d", ErrInvalidRange, r.Start, r.End)
	}
	return s.e.GetObject(ctx, bucket, key, opts, head)
}

// DeleteObject implements ObjectStore; an invalid key is reported as such.
func (s *Store) DeleteObject(ctx context.Context, bucket, key string) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	return s.e.DeleteObject(ctx, bucket, key)
}

// DeleteObjects implements ObjectStore. At most MaxDeleteObjects keys; an
// invalid key gets its own error result and is not sent to the engine. The
// engine returns one result per key it was given, in order.
func (s *Store) DeleteObjects(ctx context.Context, bucket string, keys []string) ([]DeleteResult, error) {
	if len(keys) > MaxDeleteObjects {
		return nil, fmt.Errorf("%w: %d keys, at most %d per request", ErrInvalidRequest, len(keys), MaxDeleteObjects)
	}
	valid := make([]string, 0, len(keys))
	bad := make(map[int]error)
	for i, k := range keys {
		if err := ValidKey(k); err != nil {
			bad[i] = err
			continue
		}
		valid = append(valid, k)
	}
	if len(bad) == 0 {
		return s.e.DeleteObjects(ctx, bucket, keys)
	}
	var got []DeleteResult
	if len(valid) > 0 {
		var err error
		if got, err = s.e.DeleteObjects(ctx, bucket, valid); err != nil {
			return nil, err
		}
		if len(got) != len(valid) {
			return nil, fmt.Errorf("delete objects: engine returned %d results for %d keys", len(got), len(valid))
		}
	}
	out := make([]DeleteResult, 0, len(keys))
	for i, k := range keys {
		if err, ok := bad[i]; ok {
			out = append(out, DeleteResult{Key: k, Err: err})
			continue
		}
		out = append(out, got[0])
		got = got[1:]
	}
	return out, nil
}

// ListObjects implements ObjectStore. MaxKeys above MaxListKeys is clamped;
// a negative value is ErrInvalidArgument; 0 returns an empty page (after
// checking that the bucket exists), as S3 does for max-keys=0.
func (s *Store) ListObjects(ctx context.Context, bucket string, p ListParams) (ListResult, error) {
	switch {
	case p.MaxKeys < 0:
		return ListResult{}, fmt.Errorf("%w: max-keys %d must not be negative", ErrInvalidArgument, p.MaxKeys)
	case p.MaxKeys == 0:
		if _, err := s.HeadBucket(ctx, bucket); err != nil {
			return ListResult{}, err
		}
		return ListResult{}, nil
	case p.MaxKeys > MaxListKeys:
		p.MaxKeys = MaxListKeys
	}
	return s.e.ListObjects(ctx, bucket, p)
}

// CopyObject implements ObjectStore; the destination key must be valid. The
// copy's checksum is decided here (see copyChecksum), reading the source's
// bytes only when the checksum it carries does not serve.
func (s *Store) CopyObject(ctx context.Context, src CopySource, dstBucket, dstKey string, opts CopyOptions) (ObjectInfo, error) {
	if err := ValidKey(src.Key); err != nil {
		return ObjectInfo{}, fmt.Errorf("copy source: %w: %v", ErrNoSuchKey, err)
	}
	if err := ValidKey(dstKey); err != nil {
		return ObjectInfo{}, err
	}
	alg, err := NormalizeChecksumAlgorithm(opts.ChecksumAlgorithm)
	if err != nil {
		return ObjectInfo{}, err
	}
	opts.ChecksumAlgorithm = alg
	for attempt := 1; ; attempt++ {
		o := opts
		if opts.Checksum == nil { // given: a metadata rewrite keeping the source's own
			if o, err = s.copyChecksum(ctx, src, opts); err != nil {
				return ObjectInfo{}, err
			}
		}
		info, err := s.e.CopyObject(ctx, src, dstBucket, dstKey, o)
		if errors.Is(err, ErrCopySourceChanged) && attempt < copyChecksumAttempts {
			continue
		}
		return info, err
	}
}

// CreateMultipartUpload implements ObjectStore; it validates the key and
// normalizes the checksum algorithm and type (ctype "" with an algorithm
// becomes S3's default for it).
func (s *Store) CreateMultipartUpload(ctx context.Context, bucket, key string, meta ObjectMeta, checksumAlg, checksumType string) (Upload, error) {
	if err := ValidKey(key); err != nil {
		return Upload{}, err
	}
	alg, err := NormalizeChecksumAlgorithm(checksumAlg)
	if err != nil {
		return Upload{}, err
	}
	ctype, err := NormalizeChecksumType(alg, checksumType)
	if err != nil {
		return Upload{}, err
	}
	return s.e.CreateMultipartUpload(ctx, bucket, key, meta, alg, ctype)
}

// UploadPart implements ObjectStore; the part number must be 1..MaxPartNumber.
func (s *Store) UploadPart(ctx context.Context, bucket, key, uploadID string, partNumber int, body io.Reader, opts PutOptions) (PartInfo, error) {
	if err := checkUploadTarget(key, uploadID); err != nil {
		return PartInfo{}, s.bucketFirst(ctx, bucket, err)
	}
	if err := checkPartNumber(partNumber, false); err != nil {
		return PartInfo{}, err
	}
	if err := checkPutOptions(opts); err != nil {
		return PartInfo{}, err
	}
	pi, err := s.e.UploadPart(ctx, bucket, key, uploadID, partNumber, body, opts)
	return pi, s.bucketFirst(ctx, bucket, err)
}

// UploadPartCopy implements ObjectStore.
func (s *Store) UploadPartCopy(ctx context.Context, src CopySource, bucket, key, uploadID string, partNumber int) (PartInfo, error) {
	if err := checkUploadTarget(key, uploadID); err != nil {
		return PartInfo{}, s.bucketFirst(ctx, bucket, err)
	}
	if err := checkPartNumber(partNumber, false); err != nil {
		return PartInfo{}, err
	}
	if err := ValidKey(src.Key); err != nil {
		return PartInfo{}, fmt.Errorf("copy source: %w: %v", ErrNoSuchKey, err)
	}
	if r := src.Range; r != nil && (r.Start < 0 || r.End < r.Start) {
		return PartInfo{}, fmt.Errorf("%w: x-amz-copy-source-range bytes=%d-%d must be of the form bytes=first-last with first <= last", ErrInvalidArgument, r.Start, r.End)
	}
	pi, err := s.e.UploadPartCopy(ctx, src, bucket, key, uploadID, partNumber)
	return pi, s.bucketFirst(ctx, bucket, err)
}

// CompleteMultipartUpload implements ObjectStore; the part list must not be
// empty (the engine runs CheckCompleteParts against the stored parts).
func (s *Store) CompleteMultipartUpload(ctx context.Context, bucket, key, uploadID string, parts []CompletePart, opts PutOptions) (ObjectInfo, error) {
	if err := checkUploadTarget(key, uploadID); err != nil {
		return ObjectInfo{}, s.bucketFirst(ctx, bucket, err)
	}
	if len(parts) == 0 {
		return ObjectInfo{}, fmt.Errorf("%w: You must specify at least one part", ErrInvalidRequest)
	}
	if len(parts) > MaxPartNumber {
		return ObjectInfo{}, fmt.Errorf("%w: %d parts, at most %d", ErrInvalidRequest, len(parts), MaxPartNumber)
	}
	info, err := s.e.CompleteMultipartUpload(ctx, bucket, key, uploadID, parts, opts)
	return info, s.bucketFirst(ctx, bucket, err)
}

// AbortMultipartUpload implements ObjectStore.
func (s *Store) AbortMultipartUpload(ctx context.Context, bucket, key, uploadID string) error {
	if err := checkUploadTarget(key, uploadID); err != nil {
		return s.bucketFirst(ctx, bucket, err)
	}
	return s.bucketFirst(ctx, bucket, s.e.AbortMultipartUpload(ctx, bucket, key, uploadID))
}

// ListParts implements ObjectStore. maxParts above MaxListKeys is clamped;
// negative bounds are ErrInvalidArgument.
func (s *Store) ListParts(ctx context.Context, bucket, key, uploadID string, partMarker, maxParts int) (ListPartsResult, error) {
	if err := checkUploadTarget(key, uploadID); err != nil {
		return ListPartsResult{}, s.bucketFirst(ctx, bucket, err)
	}
	if partMarker < 0 || maxParts < 0 {
		return ListPartsResult{}, fmt.Errorf("%w: part-number-marker and max-parts must not be negative", ErrInvalidArgument)
	}
	maxParts = min(maxParts, MaxListKeys)
	res, err := s.e.ListParts(ctx, bucket, key, uploadID, partMarker, maxParts)
	return res, s.bucketFirst(ctx, bucket, err)
}

// ListMultipartUploads implements ObjectStore. MaxUploads above MaxListKeys is
// clamped; a negative value is ErrInvalidArgument.
func (s *Store) ListMultipartUploads(ctx context.Context, bucket string, p ListUploadsParams) (ListUploadsResult, error) {
	if p.MaxUploads < 0 {
		return ListUploadsResult{}, fmt.Errorf("%w: max-uploads %d must not be negative", ErrInvalidArgument, p.MaxUploads)
	}
	p.MaxUploads = min(p.MaxUploads, MaxListKeys)
	return s.e.ListMultipartUploads(ctx, bucket, p)
}

// bucketFirst gives NoSuchBucket precedence over NoSuchUpload and NoSuchKey,
// as S3 does: an upload or key looked up in a bucket that does not exist is
// reported as the missing bucket. Only the miss pays the extra lookup; other
// errors (and nil) pass unchanged.
func (s *Store) bucketFirst(ctx context.Context, bucket string, err error) error {
	if err == nil || (!errors.Is(err, ErrNoSuchUpload) && !errors.Is(err, ErrNoSuchKey)) {
		return err
	}
	if _, herr := s.HeadBucket(ctx, bucket); errors.Is(herr, ErrNoSuchBucket) {
		return herr
	}
	return err
}

// checkPutOptions rejects what can be refused before any content is read.
func checkPutOptions(opts PutOptions) error {
	if opts.Size > MaxObjectSize {
		return fmt.Errorf("%w: %d bytes, at most %d in one request", ErrEntityTooLarge, opts.Size, int64(MaxObjectSize))
	}
	// The same planning that Body does, to fail before staging anything.
	_, _, err := planChecksums(opts)
	return err
}

// checkPartNumber accepts 1..MaxPartNumber, and 0 when optional (GET/HEAD
// without partNumber).
func checkPartNumber(n int, optional bool) error {
	if (optional && n == 0) || (n >= 1 && n <= MaxPartNumber) {
		return nil
	}
	return fmt.Errorf("%w: part number %d must be an integer between 1 and %d", ErrInvalidArgument, n, MaxPartNumber)
}

// checkUploadTarget maps impossible keys and empty upload ids to
// ErrNoSuchUpload: no upload can exist for them.
func checkUploadTarget(key, uploadID string) error {
	if uploadID == "" {
		return fmt.Errorf("%w: empty upload id", ErrNoSuchUpload)
	}
	if err := ValidKey(key); err != nil {
		return fmt.Errorf("%w: %v", ErrNoSuchUpload, err)
	}
	return nil
}

// PutBucketCors implements ObjectStore.
func (s *Store) PutBucketCors(ctx context.Context, bucket string, rules []CORSRule) error {
	if len(rules) == 0 {
		return fmt.Errorf("%w: a CORS configuration needs at least one rule", ErrInvalidArgument)
	}
	return s.e.PutBucketCors(ctx, bucket, rules)
}

// GetBucketCors implements ObjectStore.
func (s *Store) GetBucketCors(ctx context.Context, bucket string) ([]CORSRule, error) {
	return s.e.GetBucketCors(ctx, bucket)
}

// DeleteBucketCors implements ObjectStore.
func (s *Store) DeleteBucketCors(ctx context.Context, bucket string) error {
	return s.e.DeleteBucketCors(ctx, bucket)

}

// ErrNoBucketConfigs is the answer of the BucketConfigStore methods when the
// engine keeps no bucket configuration.
var ErrNoBucketConfigs = errors.New("this metadata engine keeps no bucket configuration")

func (s *Store) configs() (BucketConfigStore, error) {
	if c, ok := s.e.(BucketConfigStore); ok {
		return c, nil
	}
	return nil, ErrNoBucketConfigs
}

// BucketConfigs implements BucketConfigStore.
func (s *Store) BucketConfigs(ctx context.Context, bucket string) (map[string]string, error) {
	c, err := s.configs()
	if err != nil {
		return nil, err
	}
	return c.BucketConfigs(ctx, bucket)
}

// PutBucketConfig implements BucketConfigStore.
func (s *Store) PutBucketConfig(ctx context.Context, bucket, name, value string) error {
	c, err := s.configs()
	if err != nil {
		return err
	}
	return c.PutBucketConfig(ctx, bucket, name, value)
}

// DeleteBucketConfig implements BucketConfigStore.
func (s *Store) DeleteBucketConfig(ctx context.Context, bucket, name string) (bool, error) {
	c, err := s.configs()
	if err != nil {
		return false, err
	}
	return c.DeleteBucketConfig(ctx, bucket, name)
}
