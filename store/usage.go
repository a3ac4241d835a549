package store

import "context"

// BucketUsage is what one bucket holds: its current objects, noncurrent
// versions, delete markers and multipart uploads in progress.
type BucketUsage struct {
	Bucket             string
	Objects            int64 // current versions (what ListObjects lists)
	ObjectBytes        int64
	NoncurrentVersions int64 // versions that are not the latest, delete markers not included
	NoncurrentBytes    int64
	DeleteMarkers      int64
	Uploads            int64
}

// UsageStore counts what buckets hold (for metrics and `s3gate admin bucket
// info`). Every count scans the bucket's rows: callers cache or call it
// rarely.
type UsageStore interface {
	// BucketUsage returns the usage of bucket, or of every bucket (in name
	// order) when bucket is ""; a named bucket that does not exist is
	// ErrNoSuchBucket.
	BucketUsage(ctx context.Context, bucket string) ([]BucketUsage, error)
}

// LogicalBytesOf is the sum of the sizes of every version in us (current and
// noncurrent; delete markers have none): BlobStats.LogicalBytes, derived from
// the per-bucket counts rather than scanned again.
func LogicalBytesOf(us []BucketUsage) int64 {
	var n int64
	for _, u := range us {
		n += u.ObjectBytes + u.NoncurrentBytes
	}
	return n
}
