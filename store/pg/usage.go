package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/store"
)

var _ store.UsageStore = (*Engine)(nil)

// usageQuery counts per bucket ($1 ” for every bucket); each count reads
// the bucket's rows through the (bucket, key) indexes.
const usageQuery = `SELECT b.name,
	o.n, o.bytes, v.noncurrent, v.bytes, v.markers,
	(SELECT count(*) FROM uploads u WHERE u.bucket = b.name)
	FROM buckets b
	CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(sum(size), 0)::bigint AS bytes FROM objects WHERE bucket = b.name) o
	CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE NOT delete_marker) AS noncurrent,
		coalesce(sum(size), 0)::bigint AS bytes, count(*) FILTER (WHERE delete_marker) AS markers
		FROM object_versions WHERE bucket = b.name) v
	WHERE $1 = '' OR b.name = $1
	ORDER BY b.name`

// BucketUsage implements store.UsageStore. A latest delete marker counts
// as a delete marker; every other row of object_versions is noncurrent.
func (e *Engine) BucketUsage(ctx context.Context, bucket string) ([]store.BucketUsage, error) {
	out, err := bucketUsage(ctx, e.pool, bucket)
	if err != nil {
		return nil, fmt.Errorf("pg: bucket usage: %w", err)
	}
	if bucket != "" && len(out) == 0 {
		return nil, fmt.Errorf("bucket %q: %w", bucket, store.ErrNoSuchBucket)
	}
	return out, nil
}

func bucketUsage(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, bucket string) ([]store.BucketUsage, error) {
	rows, err := q.Query(ctx, usageQuery, bucket)
	if err != nil {
		return nil, mapErr(err)
	}
	var out []store.BucketUsage
	var u store.BucketUsage
	if _, err := pgx.ForEachRow(rows, []any{&u.Bucket, &u.Objects, &u.ObjectBytes, &u.NoncurrentVersions, &u.NoncurrentBytes, &u.DeleteMarkers, &u.Uploads}, func() error {
		out = append(out, u)
		return nil
	}); err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
