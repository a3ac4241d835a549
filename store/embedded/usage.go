package embedded

import (
	"context"
	"fmt"

	"github.com/s3gate/s3gate/store"
)

var _ store.UsageStore = (*Engine)(nil)

// usageQuery counts per bucket (?1 ” for every bucket), each count through
// the (bucket, key) indexes.
const usageQuery = `SELECT b.name,
	(SELECT count(*) FROM objects WHERE bucket = b.name),
	(SELECT coalesce(sum(size), 0) FROM objects WHERE bucket = b.name),
	(SELECT count(*) FROM object_versions WHERE bucket = b.name AND NOT delete_marker),
	(SELECT coalesce(sum(size), 0) FROM object_versions WHERE bucket = b.name),
	(SELECT count(*) FROM object_versions WHERE bucket = b.name AND delete_marker),
	(SELECT count(*) FROM uploads WHERE bucket = b.name)
	FROM buckets b WHERE ?1 = '' OR b.name = ?1 ORDER BY b.name`

// BucketUsage implements store.UsageStore. A latest delete marker counts
// as a delete marker; every other row of object_versions is noncurrent.
func (e *Engine) BucketUsage(ctx context.Context, bucket string) ([]store.BucketUsage, error) {
	out, err := bucketUsage(ctx, e.rq, bucket)
	if err != nil {
		return nil, fmt.Errorf("embedded: bucket usage: %w", err)
	}
	if bucket != "" && len(out) == 0 {
		return nil, fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchBucket)
	}
	return out, nil
}

func bucketUsage(ctx context.Context, q querier, bucket string) ([]store.BucketUsage, error) {
	rows, err := q.QueryContext(ctx, usageQuery, bucket)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []store.BucketUsage
	for rows.Next() {
		var u store.BucketUsage
		if err := rows.Scan(&u.Bucket, &u.Objects, &u.ObjectBytes, &u.NoncurrentVersions, &u.NoncurrentBytes, &u.DeleteMarkers, &u.Uploads); err != nil {
			return nil, mapErr(err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
