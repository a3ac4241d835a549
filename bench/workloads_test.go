package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/jackc/pgx/v5"
)

// benchListings fills a bucket of its own with 10,000 keys in 50 prefixes
// ("p07/001234", untimed) and the same keys into a raw table, then times,
// one listing at a time: a full walk 1,000 keys a page, a 50-key page, and a
// delimiter listing (50 common prefixes in one page). The raw counterparts
// are keyset pages and a loose index scan (a recursive CTE that seeks past
// each prefix), one statement each.
func (e *gwEnv) benchListings(b *testing.B) {
	bucket := e.bucket + "-list"
	n, prefixes := e.sz.listKeys, e.sz.listPrefixes
	filled := false
	// fill populates both on the first listing round that -bench selects.
	outer := b // the bucket lives (and, on an external server, is removed) with the engine's benchmark
	fill := func(b *testing.B) {
		if filled {
			return
		}
		filled = true
		e.createBucket(outer, bucket)
		batch := make([]objRef, n)
		for i := range batch {
			batch[i] = objRef{key: fmt.Sprintf("p%02d/%06d", i%prefixes, i), id: newID(), size: 16}
		}
		// 64 writers: commits group, and the fill is not what is measured.
		if _, _, err := e.putAllIn(b.Context(), bucket, batch, 4*clients); err != nil {
			b.Fatalf("populate %s: %v", bucket, err)
		}
		if e.raw != nil {
			e.raw.fillKeys(b, batch)
			e.pg.settle(b, e.raw.dsn, e.dsn) // the listings are not charged the fill's write-out
		}
	}
	walk := func(ctx context.Context, maxKeys int32, delim string, pages int) (keys, commons int, err error) {
		in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), MaxKeys: aws.Int32(maxKeys)}
		if delim != "" {
			in.Delimiter = aws.String(delim)
		}
		for page := 0; pages == 0 || page < pages; page++ {
			out, err := e.clients[0].ListObjectsV2(ctx, in)
			if err != nil {
				return 0, 0, fmt.Errorf("list %s: %w", bucket, err)
			}
			keys, commons = keys+len(out.Contents), commons+len(out.CommonPrefixes)
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			in.ContinuationToken = out.NextContinuationToken
		}
		return keys, commons, nil
	}
	for _, l := range []struct {
		name          string
		reps          int
		maxKeys       int32
		delim         string
		pages         int // 0: to the end
		keys, commons int
		raw           func(ctx context.Context, c *pgx.Conn) (keys, commons int, err error)
		target        target
	}{
		{"list-walk-10000", e.sz.walks, 1000, "", 0, n, 0, e.raw.walkKeys, target{"–", nil}},
		{"list-page-50", e.sz.listings, 50, "", 1, 50, 0, e.raw.page50, target{"–", nil}},
		{"list-delimiter-50-prefixes", e.sz.listings, 1000, "/", 1, 0, prefixes, e.raw.loosePrefixes, target{"≤ 3 stmts, ≤ 2× a 50-key page", func(gw, _ round) (bool, bool) {
			p := e.page50 // per listing: gw.wall/gw.ops <= 2 p.wall/p.ops
			return gw.stmts() <= 3 && gw.wall*time.Duration(p.ops) <= 2*p.wall*time.Duration(gw.ops), gw.stmtsOK && p.ops > 0
		}}},
	} {
		b.Run(l.name, func(b *testing.B) {
			fill(b)
			check := func(keys, commons int) error {
				if keys != l.keys || commons != l.commons {
					return fmt.Errorf("%s: %d keys and %d common prefixes, want %d and %d", l.name, keys, commons, l.keys, l.commons)
				}
				return nil
			}
			var conn *pgx.Conn
			if e.raw != nil {
				conn = e.raw.connect(b, 1)[0]
			}
			// One listing of each side in turn.
			gw, raw := paired(l.reps, l.reps, func(int, int) *round {
				if conn == nil {
					return nil
				}
				return e.measureRaw(b, 1, 0, func() ([]time.Duration, time.Duration, error) {
					return runOps(b.Context(), 1, 1, func(ctx context.Context, _, _ int) error {
						keys, commons, err := l.raw(ctx, conn)
						if err != nil {
							return err
						}
						return check(keys, commons)
					})
				})
			}, func(int, int) round {
				return e.measure(b, 1, 0, func() ([]time.Duration, time.Duration, error) {
					return runOps(b.Context(), 1, 1, func(ctx context.Context, _, _ int) error {
						keys, commons, err := walk(ctx, l.maxKeys, l.delim, l.pages)
						if err != nil {
							return err
						}
						return check(keys, commons)
					})
				})
			})
			gw.timed = true
			if raw != nil {
				raw.timed = true
			}
			if l.name == "list-page-50" {
				e.page50 = gw
			}
			e.sum.report(b, e.engine, l.name, gw, raw, l.target)
		})
	}
}

// benchComplete times CompleteMultipartUpload of 1,000 parts (the issue's
// bound: 100 ms), each part an UploadPartCopy of one 5 MiB object (untimed;
// the gateway references the source's content, no bytes move).
func (e *gwEnv) benchComplete(b *testing.B) {
	ctx := b.Context()
	n := e.sz.completeParts
	src := []objRef{{key: "complete-source", id: newID(), size: 5 * mib}}
	if _, _, err := e.putAll(ctx, src, 1); err != nil {
		b.Fatal(err)
	}
	key := "complete-target"
	up, err := e.clients[0].CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(e.bucket), Key: aws.String(key)})
	if err != nil {
		b.Fatalf("create upload: %v", err)
	}
	parts := make([]types.CompletedPart, n)
	_, wall, err := runOps(ctx, clients, n, func(ctx context.Context, c, i int) error {
		out, err := e.clients[c].UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(e.bucket), Key: aws.String(key),
			UploadId: up.UploadId, PartNumber: aws.Int32(int32(i + 1)), CopySource: aws.String(e.bucket + "/" + src[0].key)})
		if err != nil {
			return fmt.Errorf("upload part copy %d: %w", i+1, err)
		}
		parts[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.CopyPartResult.ETag}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(n)/wall.Seconds(), "part-copies/s")
	gw := e.measure(b, 1, 0, func() ([]time.Duration, time.Duration, error) {
		return runOps(ctx, 1, 1, func(ctx context.Context, _, _ int) error {
			_, err := e.clients[0].CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(e.bucket),
				Key: aws.String(key), UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
			if err != nil {
				return fmt.Errorf("complete %d parts: %w", n, err)
			}
			return nil
		})
	})
	gw.timed = true
	head, err := e.clients[0].HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(key)})
	if err != nil {
		b.Fatalf("head %s: %v", key, err)
	}
	if want := int64(n) * src[0].size; aws.ToInt64(head.ContentLength) != want {
		b.Fatalf("completed object is %d bytes, want %d", aws.ToInt64(head.ContentLength), want)
	}
	e.sum.report(b, e.engine, fmt.Sprintf("complete-%d-parts", n), gw, nil, target{"≤ 100 ms", func(gw, _ round) (bool, bool) {
		return gw.wall <= 100*time.Millisecond, true
	}})
}

// benchMultipart uploads one object in 16 MiB parts, 4 parts at a time
// (create, parts, complete: all timed), against the raw medium writing the
// same parts as objects of their own with 4 streams.
func (e *gwEnv) benchMultipart(b *testing.B) {
	ctx := b.Context()
	n := e.sz.mpuParts
	total := int64(n) * partSize
	// The raw side writes half its parts before the upload and half after it,
	// so that drifting load lands on both sides alike.
	objs := newBaseObjs(n, partSize)
	raw := e.rawLarge(b, objs[:n/2], true)
	key := fmt.Sprintf("multipart-%dMiB", total/mib)
	gw := e.measure(b, n, total, func() ([]time.Duration, time.Duration, error) {
		start := time.Now()
		up, err := e.clients[0].CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(e.bucket), Key: aws.String(key)})
		if err != nil {
			return nil, 0, fmt.Errorf("create upload: %w", err)
		}
		parts := make([]types.CompletedPart, n)
		lat, _, err := runOps(ctx, largeClients, n, func(ctx context.Context, c, i int) error {
			out, err := e.clients[c].UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(e.bucket), Key: aws.String(key),
				UploadId: up.UploadId, PartNumber: aws.Int32(int32(i + 1)), Body: newGenReader(newID(), partSize),
				ContentLength: aws.Int64(partSize)})
			if err != nil {
				return fmt.Errorf("upload part %d: %w", i+1, err)
			}
			parts[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
		if _, err := e.clients[0].CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(e.bucket),
			Key: aws.String(key), UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
			return nil, 0, fmt.Errorf("complete: %w", err)
		}
		return lat, time.Since(start), nil
	})
	if r2 := e.rawLarge(b, objs[n/2:], true); raw != nil && r2 != nil {
		*raw = raw.add(*r2)
	}
	e.sum.report(b, e.engine, fmt.Sprintf("multipart %d MiB", total/mib), gw, raw, largeTarget)
}

// fillKeys replaces the raw listing table's rows with the keys of batch.
func (e *baseEnv) fillKeys(b *testing.B, batch []objRef) {
	conn := e.connect(b, 1)[0]
	ctx := b.Context()
	if _, err := conn.Exec(ctx, "TRUNCATE bench_keys"); err != nil {
		b.Fatalf("raw keys: %v", err)
	}
	rows := make([][]any, len(batch))
	for i, o := range batch {
		rows[i] = []any{o.key, o.size, strings.Repeat("0", 32)}
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"bench_keys"}, []string{"key", "size", "etag"}, pgx.CopyFromRows(rows)); err != nil {
		b.Fatalf("raw keys: %v", err)
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE bench_keys"); err != nil {
		b.Fatalf("raw keys: %v", err)
	}
}

// keyPage reads one keyset page of the raw listing table after `after`.
func keyPage(ctx context.Context, c *pgx.Conn, after string, limit int) (n int, last string, err error) {
	rows, err := c.Query(ctx, "SELECT key, size, etag, modified FROM bench_keys WHERE key > $1 ORDER BY key LIMIT $2", after, limit)
	if err != nil {
		return 0, "", fmt.Errorf("raw page: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var size int64
		var etag string
		var mod time.Time
		if err := rows.Scan(&last, &size, &etag, &mod); err != nil {
			return 0, "", fmt.Errorf("raw page: %w", err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, "", fmt.Errorf("raw page: %w", err)
	}
	return n, last, nil
}

// walkKeys reads the raw table 1,000 keys a page.
func (e *baseEnv) walkKeys(ctx context.Context, c *pgx.Conn) (int, int, error) {
	total, after := 0, ""
	for {
		n, last, err := keyPage(ctx, c, after, 1000)
		if err != nil {
			return 0, 0, err
		}
		total, after = total+n, last
		if n < 1000 {
			return total, 0, nil
		}
	}
}

func (e *baseEnv) page50(ctx context.Context, c *pgx.Conn) (int, int, error) {
	n, _, err := keyPage(ctx, c, "", 50)
	return n, 0, err
}

// loosePrefixes lists the distinct first-level prefixes of the raw table with
// a loose index scan: each step seeks to the first key past the previous
// prefix ('/' + 1 is '0'), one statement.
func (e *baseEnv) loosePrefixes(ctx context.Context, c *pgx.Conn) (int, int, error) {
	const q = `WITH RECURSIVE p(pfx) AS (
		SELECT (SELECT substr(key, 1, strpos(key, '/')) FROM bench_keys ORDER BY key LIMIT 1)
		UNION ALL
		SELECT (SELECT substr(key, 1, strpos(key, '/')) FROM bench_keys
			WHERE key >= left(p.pfx, -1) || '0' ORDER BY key LIMIT 1)
		FROM p WHERE p.pfx IS NOT NULL)
	SELECT pfx FROM p WHERE pfx IS NOT NULL LIMIT 1000`
	rows, err := c.Query(ctx, q)
	if err != nil {
		return 0, 0, fmt.Errorf("raw prefixes: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var pfx string
		if err := rows.Scan(&pfx); err != nil {
			return 0, 0, fmt.Errorf("raw prefixes: %w", err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("raw prefixes: %w", err)
	}
	return 0, n, nil
}
