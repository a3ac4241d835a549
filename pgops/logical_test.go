package pgops

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fsck"
	"github.com/s3gate/s3gate/internal/pgtest"
)

// TestLogicalReplication publishes a pgchunks store (FOR ALL TABLES) to a
// subscriber database on another server whose schema came from pg_dump
// --schema-only: a read-only gateway on the subscriber serves every object
// byte-exact, those copied at subscription and those streamed after. Then a
// pglo object is written on the publisher: its blob row replicates, its
// large object does not (pg_largeobject is a catalog), and a read-only
// gateway refuses to start on the subscriber, saying why; fsck reports the
// missing large object.
func TestLogicalReplication(t *testing.T) {
	pub := pgtest.NewServer(t)
	pub.Set("wal_level=logical")
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	pdsn, err := pub.CreateDatabase("s3")
	if err != nil {
		t.Fatal(err)
	}
	first := sizeClasses("first/", 1)
	t.Run("publisher writes", func(t *testing.T) {
		c := client(start(t, config.EnginePGChunks, pdsn))
		createBucket(t, c, "bkt")
		putAll(t, c, "bkt", first)
	})

	sub := pgtest.NewServer(t)
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	sdsn, err := sub.CreateDatabase("s3")
	if err != nil {
		t.Fatal(err)
	}
	schema := filepath.Join(t.TempDir(), "schema.dump")
	tool(t, "pg_dump", "-Fc", "--schema-only", "-f", schema, "-d", pdsn)
	tool(t, "pg_restore", "--no-owner", "--exit-on-error", "-d", sdsn, schema)
	pdb, sdb := connect(t, pdsn), connect(t, sdsn)
	if _, err := pdb.Exec(ctxT(t), `CREATE PUBLICATION s3gate FOR ALL TABLES`); err != nil {
		t.Fatal(err)
	}
	if _, err := sdb.Exec(ctxT(t), fmt.Sprintf(`CREATE SUBSCRIPTION s3gate CONNECTION 'host=127.0.0.1 port=%d user=postgres dbname=s3' PUBLICATION s3gate`, pub.Port())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The subscription's slot lives on the publisher: drop both, so that
		// neither server waits for the other on shutdown.
		if _, err := sdb.Exec(context.Background(), `DROP SUBSCRIPTION s3gate`); err != nil {
			t.Errorf("drop subscription: %v", err)
		}
	})
	replicated := func() {
		t.Helper()
		q := `SELECT (SELECT count(*) FROM objects) || '/' || (SELECT count(*) FROM blobs) || '/' || (SELECT count(*) FROM blob_chunks)`
		var want string
		if err := pdb.QueryRow(ctxT(t), q).Scan(&want); err != nil {
			t.Fatal(err)
		}
		poll(t, "subscriber has "+want+" objects/blobs/chunks", func() (bool, error) {
			var got string
			err := sdb.QueryRow(ctxT(t), q).Scan(&got)
			return got == want, err
		})
	}
	replicated()
	second := sizeClasses("second/", 50)
	t.Run("publisher writes after the subscription", func(t *testing.T) {
		putAll(t, client(start(t, config.EnginePGChunks, pdsn)), "bkt", second)
	})
	replicated()
	t.Run("subscriber serves", func(t *testing.T) {
		c := client(start(t, config.EnginePGChunks, sdsn, "S3GATE_READ_ONLY=true"))
		expectExactly(t, c, "bkt", append(first, second...))
		_, err := c.PutObject(ctxT(t), &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("x"), Body: strings.NewReader("x")})
		if code, _ := apiCode(err); code != "AccessDenied" {
			t.Fatalf("PUT on the subscriber's gateway: %v; want AccessDenied", err)
		}
	})

	t.Run("publisher writes pglo", func(t *testing.T) {
		put(t, client(start(t, config.EnginePGLO, pdsn)), "bkt", object{key: "lo", data: randBytes(3, inlineMax+100)})
	})
	replicated()
	if err := readOnlyStartErr(t, sdsn); !strings.Contains(err.Error(), "logical replication subscriber") || !strings.Contains(err.Error(), "large objects do not replicate logically") {
		t.Fatalf("start-up error %q; want it to say that large objects do not replicate logically", err)
	}
	var out, errb bytes.Buffer
	if code := fsck.Command(ctxT(t), []string{"-database-url", sdsn}, &out, &errb); code != 1 || !strings.Contains(out.String(), "missing-content") {
		t.Fatalf("fsck on the subscriber: exit %d, want 1 reporting the missing large object:\n%s%s", code, out.String(), errb.String())
	}
}
