package fleettest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/jackc/pgx/v5/pgxpool"

	s3fleet "github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/store/pg"
)

// payload is deterministic content of size bytes for seed.
func payload(seed uint64, size int) []byte {
	var key [32]byte
	key[0], key[1] = byte(seed), byte(seed>>8)
	b := make([]byte, size)
	_, _ = rand.NewChaCha8(key).Read(b) // ChaCha8 reads never fail
	return b
}

// readAll fetches bucket/key and returns its body.
func readAll(ctx context.Context, c *s3.Client, bucket, key string) ([]byte, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

func isCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

func put(t *testing.T, c *s3.Client, bucket, key string, body []byte) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("PUT %s: %v", key, err)
	}
}

func createBucket(t *testing.T, c *s3.Client, bucket string) {
	t.Helper()
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
}

// TestFleet runs the three-instance scenarios; the binary is built once.
func TestFleet(t *testing.T) {
	bin := buildBinary(t, t.TempDir())
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			f := startFleet(t, bin, engine)
			t.Run("ReadAfterWrite", func(t *testing.T) { readAfterWrite(t, f) })
			t.Run("MultipartAcrossInstances", func(t *testing.T) { multipartAcross(t, f) })
			t.Run("ObjectLocksAcrossInstances", func(t *testing.T) { locksAcross(t, f) })
			t.Run("Linearizable", func(t *testing.T) { linearizable(t, f) })
			if engine == "pgchunks" { // engine-independent
				t.Run("MetadataAcrossInstances", func(t *testing.T) { metadataAcross(t, f) })
			}
		})
	}
	for _, engine := range bouncedEngines() {
		t.Run(engine+"/pgbouncer-rows", func(t *testing.T) {
			f := startBouncedFleet(t, bin, engine)
			t.Run("ReadAfterWrite", func(t *testing.T) { readAfterWrite(t, f) })
			t.Run("MultipartAcrossInstances", func(t *testing.T) { multipartAcross(t, f) })
			t.Run("Linearizable", func(t *testing.T) { linearizable(t, f) })
			if engine == "pgchunks" { // the pool through pgbouncer, LISTEN on the direct URL
				t.Run("MetadataAcrossInstances", func(t *testing.T) { metadataAcross(t, f) })
			}
		})
	}
	for _, engine := range heavyEngines() {
		t.Run(engine+"/pgbouncer-rows/Kill9MidStream", func(t *testing.T) { killMidStreamRows(t, startBouncedFleet(t, bin, engine)) })
	}
	t.Run("pgchunks/LeaseRounds", func(t *testing.T) { leaseRounds(t, bin) })
	for _, engine := range heavyEngines() {
		t.Run(engine+"/Stream64MiBWhileDeleteAndSweep", func(t *testing.T) { streamWhileSweep(t, startFleet(t, bin, engine)) })
		t.Run(engine+"/Kill9MidStream", func(t *testing.T) { killMidStream(t, startFleet(t, bin, engine)) })
		t.Run(engine+"/RollingRestart", func(t *testing.T) { rollingRestart(t, startFleet(t, bin, engine)) })
	}
}

// readAfterWrite: what one instance acknowledges, the others serve at once:
// GET, HEAD and LIST after a PUT, after an overwrite, and after a DELETE.
func readAfterWrite(t *testing.T, f *fleet) {
	ctx := context.Background()
	a, b, c := f.insts[0].client(), f.insts[1].client(), f.insts[2].client()
	createBucket(t, a, "raw")
	for i, size := range []int{1000, inlineMax + 1, 3<<20 + 17} {
		key := fmt.Sprintf("obj-%d", i)
		body := payload(uint64(i), size)
		put(t, a, "raw", key, body)
		head, err := b.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("raw"), Key: &key})
		if err != nil || aws.ToInt64(head.ContentLength) != int64(size) {
			t.Fatalf("HEAD %s on B after PUT on A: %v, %v", key, head, err)
		}
		if got, err := readAll(ctx, b, "raw", key); err != nil || sha256.Sum256(got) != sha256.Sum256(body) {
			t.Fatalf("GET %s on B after PUT on A: %d bytes, %v", key, len(got), err)
		}
		list, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("raw"), Prefix: &key})
		if err != nil || len(list.Contents) != 1 || aws.ToInt64(list.Contents[0].Size) != int64(size) || aws.ToString(list.Contents[0].ETag) != aws.ToString(head.ETag) {
			t.Fatalf("LIST %s on C after PUT on A: %+v, %v", key, list, err)
		}
		// Overwritten through B: A and C serve the new bytes at once.
		body2 := payload(uint64(i)+100, size/2+1)
		put(t, b, "raw", key, body2)
		for name, cl := range map[string]*s3.Client{"A": a, "C": c} {
			if got, err := readAll(ctx, cl, "raw", key); err != nil || !bytes.Equal(got, body2) {
				t.Fatalf("GET %s on %s after overwrite on B: %d bytes, %v", key, name, len(got), err)
			}
		}
		// Deleted through C: gone on A and from B's listing at once.
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("raw"), Key: &key}); err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(ctx, a, "raw", key); !isCode(err, "NoSuchKey") {
			t.Fatalf("GET %s on A after DELETE on C: %v, want NoSuchKey", key, err)
		}
		if list, err := b.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("raw"), Prefix: &key}); err != nil || len(list.Contents) != 0 {
			t.Fatalf("LIST %s on B after DELETE on C: %+v, %v", key, list, err)
		}
	}
}

// multipartAcross: parts uploaded through A and B, the upload completed
// through C, read back byte-exact through every instance.
func multipartAcross(t *testing.T, f *fleet) {
	ctx := context.Background()
	cl := []*s3.Client{f.insts[0].client(), f.insts[1].client(), f.insts[2].client()}
	createBucket(t, cl[0], "mpu")
	key := "assembled"
	up, err := cl[0].CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("mpu"), Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{5 << 20, 5 << 20, 1<<20 + 3} // every part but the last at S3's 5 MiB minimum
	var whole []byte
	var done []types.CompletedPart
	for i, size := range sizes {
		body := payload(uint64(50+i), size)
		whole = append(whole, body...)
		n := int32(i + 1)
		out, err := cl[i%2].UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("mpu"), Key: &key, UploadId: up.UploadId,
			PartNumber: &n, Body: bytes.NewReader(body)})
		if err != nil {
			t.Fatalf("part %d on %s: %v", n, f.insts[i%2].name, err)
		}
		done = append(done, types.CompletedPart{PartNumber: &n, ETag: out.ETag})
	}
	parts, err := cl[2].ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("mpu"), Key: &key, UploadId: up.UploadId})
	if err != nil || len(parts.Parts) != len(sizes) {
		t.Fatalf("ListParts on C: %+v, %v", parts, err)
	}
	if _, err := cl[2].CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("mpu"), Key: &key,
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}); err != nil {
		t.Fatalf("Complete on C: %v", err)
	}
	for i, c := range cl {
		if got, err := readAll(ctx, c, "mpu", key); err != nil || sha256.Sum256(got) != sha256.Sum256(whole) {
			t.Fatalf("GET on %s: %d bytes (want %d), %v", f.insts[i].name, len(got), len(whole), err)
		}
	}
}

// streamWhileSweep: a 64 MiB GET streams from A while B deletes the object
// and C sweeps: C's sweep skips the blob, because A's session pin (a shared
// advisory lock on the one server) is visible to it, and the stream reads
// back byte-exact. Once the stream ends, the next sweep reclaims the blob and
// all its content.
func streamWhileSweep(t *testing.T, f *fleet) {
	ctx := context.Background()
	a, b := f.insts[0].client(), f.insts[1].client()
	createBucket(t, a, "stream")
	body := payload(64, 64<<20)
	want := sha256.Sum256(body)
	put(t, b, "stream", "big", body)
	body = nil
	db := f.pool()
	id := count(t, db, `SELECT blob_id FROM objects WHERE key = 'big'`)
	// B's put committed its pin row, owned by B's registration, with the
	// object row (the joint entry+pin transaction).
	if n := count(t, db, `SELECT count(*) FROM pins p JOIN instances i ON i.id = p.owner WHERE p.blob_id = $1 AND i.pid = $2`,
		id, f.insts[1].pid()); n != 1 {
		t.Fatalf("%d pin rows of B's put, want 1", n)
	}
	waitPinRowsExpired(t, db)

	out, err := a.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("stream"), Key: aws.String("big")})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, out.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("stream"), Key: aws.String("big")}); err != nil {
		t.Fatal(err)
	}
	st := sweepAs(t, f, "C")
	if st.BlobsDeleted != 0 || st.SkippedPinned != 1 {
		t.Fatalf("sweep during the stream: %+v; want the one blob skipped as pinned", st)
	}
	if _, err := io.Copy(h, out.Body); err != nil {
		t.Fatalf("stream from A after the delete and sweep: %v", err)
	}
	if [32]byte(h.Sum(nil)) != want {
		t.Fatal("the stream from A read other bytes than were stored")
	}
	_ = out.Body.Close()
	waitUnpinned(t, db, id)
	if st := sweepAs(t, f, "C"); st.BlobsDeleted != 1 {
		t.Fatalf("sweep after the stream: %+v; want the blob reclaimed", st)
	}
	assertContent(t, f, db, 0, 0)
}

// killMidStream: A streams a deleted object's blob when it is killed with
// SIGKILL. Its session pin vanishes with its session (the server releases
// the lock when the socket closes), so C's next sweep reclaims exactly that
// blob and its content and nothing else; A's registration expires after its
// TTL and the sweeper reaps it.
func killMidStream(t *testing.T, f *fleet) {
	db, id, keep := streamDeletedVictim(t, f)
	if n := pinHolders(t, db, id); n != 1 {
		t.Fatalf("%d sessions pin the streamed blob, want A's one", n)
	}
	if st := sweepAs(t, f, "C"); st.BlobsDeleted != 0 || st.SkippedPinned != 1 {
		t.Fatalf("sweep while A streams: %+v", st)
	}
	f.insts[0].kill()
	waitUnpinned(t, db, id) // A's pin went with its session
	st := sweepAs(t, f, "C")
	if st.BlobsDeleted != 1 || st.SkippedPinned != 0 || st.SkippedReferenced != 0 {
		t.Fatalf("sweep after the kill: %+v; want exactly the victim's blob", st)
	}
	assertOnlyKeepLeft(t, f, db, keep)
	// A's registration expires after the TTL; the sweeper reaps it.
	deadline := time.Now().Add(30 * time.Second)
	for count(t, db, `SELECT count(*) FROM instances WHERE heartbeat_at + ttl < clock_timestamp()`) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("A's registration did not expire")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := sweepAs(t, f, "C"); st.InstancesReaped != 1 {
		t.Fatalf("sweep after A's TTL: %+v; want A's registration reaped", st)
	}
	if n := count(t, db, `SELECT count(*) FROM instances WHERE pid = ANY($1)`, []int{f.insts[1].pid(), f.insts[2].pid()}); n != 2 ||
		count(t, db, `SELECT count(*) FROM instances`) != 2 {
		t.Fatal("the registry does not hold exactly B and C")
	}
}

// killMidStreamRows is killMidStream behind pgbouncer with PIN_MODE=rows:
// A's stream is protected by a pin row owned by A's instance id, renewed
// every TTL/3 while it streams, not by a session lock, so C's sweep skips the
// deleted blob for that row alone. Killed with SIGKILL, A stops renewing; its
// row expires after the TTL (database time), and C's next sweep reaps it and
// reclaims exactly the victim's blob and its content.
func killMidStreamRows(t *testing.T, f *fleet) {
	ctx := context.Background()
	db, id, keep := streamDeletedVictim(t, f)
	// A's row pin: one live row owned by A's instance, renewed while A
	// streams (its expiry moves), and no session lock.
	var owner string
	if err := db.QueryRow(ctx, `SELECT id FROM instances WHERE pid = $1`, f.insts[0].pid()).Scan(&owner); err != nil {
		t.Fatalf("A's registration: %v", err)
	}
	livePin := `SELECT count(*) FROM pins WHERE blob_id = $1 AND owner = $2 AND expires_at > clock_timestamp()`
	expiry := func() (e time.Time) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT expires_at FROM pins WHERE blob_id = $1 AND owner = $2`, id, owner).Scan(&e); err != nil {
			t.Fatalf("A's pin row of the streamed blob: %v", err)
		}
		return e
	}
	first := expiry()
	deadline := time.Now().Add(10 * time.Second) // hang guard only
	for !expiry().After(first) {
		if time.Now().After(deadline) {
			t.Fatalf("A's pin row was not renewed while it streams (expires_at stays %v)", first)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := count(t, db, livePin, id, owner); n != 1 {
		t.Fatalf("%d live pin rows of A for the streamed blob, want 1", n)
	}
	if n := pinHolders(t, db, id); n != 0 {
		t.Fatalf("%d sessions pin the streamed blob in PIN_MODE=rows, want none", n)
	}
	// The sweep's candidates exclude a blob with an unexpired pin row (and
	// the pins foreign key would refuse its DELETE): nothing is collected.
	if st := sweepAs(t, f, "C"); st.BlobsDeleted != 0 {
		t.Fatalf("sweep while A streams: %+v; want the victim spared for A's row pin", st)
	}
	assertContent(t, f, db, 2, 18) // keep's 2 chunk rows and the victim's 16
	f.insts[0].kill()
	// A's row expires after the TTL: nothing renews it any more.
	deadline = time.Now().Add(30 * time.Second)
	for count(t, db, livePin, id, owner) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("A's pin row did not expire after A was killed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := count(t, db, `SELECT count(*) FROM pins`); n != 1 {
		t.Fatalf("%d pin rows before the sweep, want A's expired one alone", n)
	}
	st := sweepAs(t, f, "C")
	if st.BlobsDeleted != 1 || st.SkippedPinned != 0 || st.SkippedReferenced != 0 || st.PinsReaped != 1 {
		t.Fatalf("sweep after A's pin expired: %+v; want exactly the victim's blob, A's row reaped", st)
	}
	if n := count(t, db, `SELECT count(*) FROM pins`); n != 0 {
		t.Fatalf("%d pin rows left after the sweep, want none", n)
	}
	assertOnlyKeepLeft(t, f, db, keep)
}

// streamDeletedVictim is the scene of the kill tests: B stores "keep" and
// "victim" (its put pin rows left to expire, so that what protects the victim
// next is A's GET alone), A streams the victim's first MiB and holds the rest
// of the stream open (until the test ends), and B deletes the victim. It
// returns the test's pool, the victim's blob id and keep's bytes.
func streamDeletedVictim(t *testing.T, f *fleet) (*pgxpool.Pool, int64, []byte) {
	t.Helper()
	ctx := context.Background()
	a, b := f.insts[0].client(), f.insts[1].client()
	createBucket(t, a, "kill")
	keep := payload(1, 2<<20)
	put(t, b, "kill", "keep", keep)
	put(t, b, "kill", "victim", payload(2, 16<<20))
	db := f.pool()
	id := count(t, db, `SELECT blob_id FROM objects WHERE key = 'victim'`)
	waitPinRowsExpired(t, db)

	out, err := a.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("kill"), Key: aws.String("victim")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Body.Close() })
	if _, err := io.CopyN(io.Discard, out.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("kill"), Key: aws.String("victim")}); err != nil {
		t.Fatal(err)
	}
	return db, id, keep
}

// assertOnlyKeepLeft checks what a kill test's last sweep leaves: keep's
// blob and its content (2 chunk rows, one large object or one file, by
// engine), keep served byte-exact by C.
func assertOnlyKeepLeft(t *testing.T, f *fleet, db *pgxpool.Pool, keep []byte) {
	t.Helper()
	assertContent(t, f, db, 1, 2)
	if got, err := readAll(context.Background(), f.insts[2].client(), "kill", "keep"); err != nil || !bytes.Equal(got, keep) {
		t.Fatalf("keep on C: %d bytes, %v", len(got), err)
	}
}

// sweepAs runs one online collection under the gc lease as instance name
// (the code `s3gate gc` runs), with no grace and no pin window: the tests
// decide when blobs are garbage. While an instance's own run holds the lease
// it tries again.
func sweepAs(t *testing.T, f *fleet, name string) gc.Stats {
	t.Helper()
	db := f.pool()
	deadline := time.Now().Add(time.Minute) // hang guard only
	for {
		st, err := gc.RunOnce(context.Background(), pg.NewGC(db), f.media(), gc.Options{
			Grace: -1, StageGrace: -1, PinWindow: -1, Holder: "fleettest-" + name, Logger: slog.New(slog.DiscardHandler),
		})
		if errors.Is(err, lease.ErrHeld) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("gc as %s: %v", name, err)
		}
		return st
	}
}

func blobKey(id int64) int64 { return s3fleet.BlobLockKey(id) }

// locksAcross: the object and upload locks are advisory locks on the one
// server, so they serialize mutations across instances. A transaction of the
// test's own holds the lock, as another instance's mutation would; a PUT
// (object lock) and an UploadPart (upload lock) sent to B then wait for it —
// seen in pg_locks as B's ungranted request — while C still reads; once the
// lock goes, they complete and C serves their result.
func locksAcross(t *testing.T, f *fleet) {
	ctx := context.Background()
	b, c := f.insts[1].client(), f.insts[2].client()
	createBucket(t, b, "locks")
	put(t, b, "locks", "k", []byte("old"))
	up, err := b.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("locks"), Key: aws.String("u")})
	if err != nil {
		t.Fatal(err)
	}
	db := f.pool()
	one := int32(1)
	for _, tc := range []struct {
		name string
		key  int64
		op   func() error
		then func() error // what C sees after
	}{
		{"PUT", s3fleet.ObjectLockKey("locks", "k"), func() error {
			_, err := b.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("locks"), Key: aws.String("k"), Body: bytes.NewReader([]byte("new"))})
			return err
		}, func() error {
			if got, err := readAll(ctx, c, "locks", "k"); err != nil || string(got) != "new" {
				return fmt.Errorf("GET on C after the PUT: %q, %v", got, err)
			}
			return nil
		}},
		{"UploadPart", s3fleet.UploadLockKey(aws.ToString(up.UploadId)), func() error {
			_, err := b.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String("locks"), Key: aws.String("u"), UploadId: up.UploadId,
				PartNumber: &one, Body: bytes.NewReader([]byte("part"))})
			return err
		}, func() error {
			parts, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String("locks"), Key: aws.String("u"), UploadId: up.UploadId})
			if err != nil || len(parts.Parts) != 1 {
				return fmt.Errorf("ListParts on C after the part: %+v, %v", parts, err)
			}
			return nil
		}},
	} {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Ended on every path: the pool's Close waits for its connection.
		defer func() { _ = tx.Rollback(context.Background()) }() // ErrTxClosed once rolled back below
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, tc.key); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- tc.op() }()
		deadline := time.Now().Add(30 * time.Second)
		for count(t, db, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE l.locktype = 'advisory' AND NOT l.granted AND l.classid = $1 AND l.objid = $2 AND l.objsubid = 1
			  AND a.application_name = 's3gate-B'`, uint32(uint64(tc.key)>>32), uint32(tc.key)) != 1 {
			select {
			case err := <-done:
				t.Fatalf("%s on B finished (%v) while another transaction held its lock", tc.name, err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s on B never waited for the lock", tc.name)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if got, err := readAll(ctx, c, "locks", "k"); err != nil || len(got) == 0 {
			t.Fatalf("GET on C while B waits: %q, %v", got, err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s on B after the lock went: %v", tc.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s on B did not finish after the lock went", tc.name)
		}
		if err := tc.then(); err != nil {
			t.Fatal(err)
		}
	}
}

// pinHolders counts the sessions that hold blob id's pin (a shared advisory
// lock on its key, server-wide).
func pinHolders(t *testing.T, db *pgxpool.Pool, id int64) int64 {
	t.Helper()
	key := blobKey(id)
	return count(t, db, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' AND granted
		AND classid = $1 AND objid = $2 AND objsubid = 1`, uint32(uint64(key)>>32), uint32(key))
}

// waitUnpinned waits until no session pins blob id.
func waitUnpinned(t *testing.T, db *pgxpool.Pool, id int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for pinHolders(t, db, id) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("blob %d still pinned", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitPinRowsExpired waits until the pin rows of the puts so far expired
// (a put leaves its row to expire, PIN_TTL after its last renewal), so that
// what a sweep then skips is skipped for the GETs' session pins alone.
func waitPinRowsExpired(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // hang guard only
	for count(t, db, `SELECT count(*) FROM pins WHERE expires_at > clock_timestamp()`) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("pin rows of the puts did not expire")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// assertContent checks that exactly blobs blob rows remain, with their
// content and nothing else: chunks chunk rows (pgchunks), one large object
// per blob (pglo) or one file per blob (local), and no stage leftovers.
func assertContent(t *testing.T, f *fleet, db *pgxpool.Pool, blobs, chunks int64) {
	t.Helper()
	got := map[string]int64{
		"blobs":         count(t, db, `SELECT count(*) FROM blobs`),
		"chunk rows":    count(t, db, `SELECT count(*) FROM blob_chunks`),
		"large objects": count(t, db, `SELECT count(*) FROM pg_largeobject_metadata`),
		"stages":        count(t, db, `SELECT count(*) FROM blob_stages`),
	}
	want := map[string]int64{"blobs": blobs, "chunk rows": 0, "large objects": 0, "stages": 0}
	switch f.engine {
	case "pgchunks":
		want["chunk rows"] = chunks
	case "pglo":
		want["large objects"] = blobs
	case "local":
		ids, err := f.media().BlobIDs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		got["files"], want["files"] = int64(len(ids)), blobs
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], w, got)
		}
	}
}
