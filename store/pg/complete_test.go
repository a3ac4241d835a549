package pg

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// TestCompleteStatements: Complete is a metadata operation whose statement
// count does not grow with the parts it names (issue: Complete of 10,000
// parts within a bounded number of statements). The part rows are written
// directly, as 10,000 UploadParts would leave them, so that the test
// measures Complete alone.
func TestCompleteStatements(t *testing.T) {
	v := newEnv(t, LargePGChunks)
	ctx := context.Background()
	const partSize = 5 << 20
	var blob int64
	if err := v.e.pool.QueryRow(ctx, `INSERT INTO blobs (sha256, size, tier) VALUES (sha256('complete-fixture'), $1, 'pgchunks') RETURNING id`,
		partSize).Scan(&blob); err != nil {
		t.Fatal(err)
	}
	complete := func(key string, n int) int64 {
		t.Helper()
		up, err := v.e.CreateMultipartUpload(ctx, "b", key, store.ObjectMeta{}, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.e.pool.Exec(ctx, `INSERT INTO upload_parts (upload_id, part_number, blob_id, size, etag)
			SELECT $1, g, $2, $3, md5(g::text) FROM generate_series(1, $4::int) g`, up.UploadID, blob, partSize, n); err != nil {
			t.Fatal(err)
		}
		parts := make([]store.CompletePart, n)
		for i := range parts {
			sum := md5.Sum([]byte(strconv.Itoa(i + 1)))
			parts[i] = store.CompletePart{Number: i + 1, ETag: hex.EncodeToString(sum[:])}
		}
		c := countStatements(t, v)
		info, err := v.e.CompleteMultipartUpload(ctx, "b", key, up.UploadID, parts, store.PutOptions{})
		if err != nil {
			t.Fatalf("Complete of %d parts: %v", n, err)
		}
		if info.Size != int64(n)*partSize || !strings.HasSuffix(info.ETag, fmt.Sprintf("-%d", n)) {
			t.Fatalf("Complete of %d parts: size %d, ETag %q", n, info.Size, info.ETag)
		}
		if got := v.count(t, `SELECT count(*) FROM object_parts WHERE bucket = 'b' AND key = $1`, key); got != n {
			t.Fatalf("Complete of %d parts wrote %d manifest rows", n, got)
		}
		return c.n.Load()
	}
	small, large := complete("three", 3), complete("ten-thousand", 10_000)
	t.Logf("statements: %d for 3 parts, %d for 10,000", small, large)
	if large > small {
		t.Fatalf("Complete of 10,000 parts took %d statements, of 3 parts %d: it grows with the parts", large, small)
	}
}
