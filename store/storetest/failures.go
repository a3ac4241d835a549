package storetest

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // S3 ETags are MD5
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// testFailuresLeaveNothing forces failures after the engine started writing
// (a body that breaks after the large object / chunk rows / stage file were
// started, a bad digest, a short or long body, a failed conditional write, a
// cancelled context, a stage reaped mid-body) and checks that nothing was
// stored, for puts and parts, and that the engine holds nothing (A1).
func testFailuresLeaveNothing(t *testing.T, v *Env) {
	ctx := context.Background()
	s := v.Store
	clientGone := errors.New("client went away")
	v.put(t, "b", "exists", []byte("small"))
	u, err := s.CreateMultipartUpload(ctx, "b", "mp", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	before := v.Content(t)
	data := Bytes(21, 2<<20+1000)
	wrongMD5 := md5.Sum([]byte("other")) //nolint:gosec // see import
	wrongSHA := sha256.Sum256([]byte("other"))
	whole := func(b []byte) func() io.Reader { return func() io.Reader { return bytes.NewReader(b) } }
	size := int64(len(data))
	tests := []struct {
		name    string
		key     string
		body    func() io.Reader
		opts    store.PutOptions
		want    error
		putOnly bool // a write condition, which parts do not have
	}{
		{"body fails mid-stream", "k1", func() io.Reader { return &failingReader{r: bytes.NewReader(data[:2<<20]), err: clientGone} },
			store.PutOptions{Size: -1}, clientGone, false},
		{"bad content-md5 large", "k2", whole(data), store.PutOptions{Size: size, ContentMD5: wrongMD5[:]}, store.ErrBadDigest, false},
		{"bad content-md5 inline", "k3", whole(data[:100]), store.PutOptions{Size: 100, ContentMD5: wrongMD5[:]}, store.ErrBadDigest, false},
		{"bad CRC32 large", "k4", whole(data), store.PutOptions{Size: size, Checksums: map[string]string{"CRC32": "AAAAAA=="}}, store.ErrBadDigest, false},
		{"bad crc32 above knee", "k4", whole(data[:3*Knee]), store.PutOptions{Size: 3 * Knee, Checksums: map[string]string{"crc32": "AAAAAA=="}}, store.ErrBadDigest, false},
		{"bad payload sha256 large", "k9", whole(data), store.PutOptions{Size: size, PayloadSHA256: &wrongSHA}, store.ErrPayloadSHA256Mismatch, false},
		{"bad payload sha256 inline", "k9", whole(data[:100]), store.PutOptions{Size: 100, PayloadSHA256: &wrongSHA}, store.ErrPayloadSHA256Mismatch, false},
		{"bad payload sha256 before bad content-md5", "k9", whole(data), store.PutOptions{Size: size, PayloadSHA256: &wrongSHA, ContentMD5: wrongMD5[:]}, store.ErrPayloadSHA256Mismatch, false},
		{"short body", "k5", whole(data[:1<<20]), store.PutOptions{Size: size}, store.ErrIncompleteBody, false},
		{"short body above knee", "k5", whole(data[:3*Knee]), store.PutOptions{Size: 3*Knee + 10}, store.ErrIncompleteBody, false},
		{"long body inline", "k6", whole(data[:100]), store.PutOptions{Size: 99}, store.ErrInvalidRequest, false},
		{"if-none-match on existing", "exists", whole(data), store.PutOptions{Size: size, IfNoneMatch: "*"}, store.ErrPreconditionFailed, true},
		{"if-match mismatch", "exists", whole(data), store.PutOptions{Size: size, IfMatch: `"nope"`}, store.ErrPreconditionFailed, true},
	}
	check := func(what string) {
		t.Helper()
		v.sameContent(t, what, before)
		if r := v.Rows(t); r.Objects != 1 || r.UploadParts != 0 {
			t.Errorf("%s: rows %+v, want 1 object and no part", what, r)
		}
		v.Idle(t)
	}
	for _, tc := range tests {
		if _, err := s.PutObject(ctx, "b", tc.key, tc.body(), tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: put err %v, want %v", tc.name, err, tc.want)
		}
		check(tc.name + ": put")
		if tc.putOnly {
			continue
		}
		if _, err := s.UploadPart(ctx, "b", "mp", u.UploadID, 1, tc.body(), tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: upload part err %v, want %v", tc.name, err, tc.want)
		}
		check(tc.name + ": upload part")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancelling := io.MultiReader(bytes.NewReader(data[:2<<20]), readerFunc(func([]byte) (int, error) {
		cancel()
		return 0, errors.New("cancelled")
	}))
	if _, err := s.PutObject(cctx, "b", "k7", cancelling, store.PutOptions{Size: -1}); err == nil {
		t.Errorf("put with cancelled context succeeded")
	}
	check("cancelled")
	if v.ReapStages != nil {
		// GC's stage reaper takes the stage mid-body: the put cannot
		// publish, answers 503 and leaves nothing.
		reaped := false
		reaping := io.MultiReader(bytes.NewReader(data[:2<<20]), readerFunc(func([]byte) (int, error) {
			if !reaped {
				reaped = true
				v.ReapStages(t)
			}
			return 0, io.EOF
		}), bytes.NewReader(data[2<<20:]))
		if _, err := s.PutObject(ctx, "b", "k8", reaping, store.PutOptions{Size: size}); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("stage reaped mid-body: err %v, want ErrUnavailable", err)
		}
		check("stage reaped")
	}
	_, _, b := v.get(t, "b", "exists", store.GetOptions{})
	SameBytes(t, "exists", b, []byte("small"))
}

// testConcurrentPuts: writers race on one key, inline and large bodies
// mixed, while readers read it: every read sees one whole version, the last
// write is one of them, and each distinct content is stored once.
func testConcurrentPuts(t *testing.T, v *Env) {
	const writers = 8
	datas := make([][]byte, writers)
	sizes := make([]int, writers)
	etags := map[string][]byte{}
	for i := range datas {
		switch i % 4 {
		case 0:
			sizes[i] = 1<<20 + i // large, more than one chunk
		case 2:
			sizes[i] = 2*Knee + i // large, one chunk
		default:
			sizes[i] = 1000 + i // inline
		}
		datas[i] = Bytes(uint64(100+i), sizes[i])
		etags[MD5Hex(datas[i])] = datas[i]
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, writers*3)
	for i := range writers {
		wg.Go(func() {
			for range 3 {
				if _, err := v.Store.PutObject(ctx, "b", "hot", bytes.NewReader(datas[i]), store.PutOptions{Size: int64(len(datas[i]))}); err != nil {
					errs <- fmt.Errorf("put %d: %w", i, err)
				}
			}
		})
		wg.Go(func() {
			for range 3 {
				info, _, rd, err := v.Store.GetObject(ctx, "b", "hot", store.GetOptions{}, false)
				if errors.Is(err, store.ErrNoSuchKey) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(rd)
				if cerr := rd.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					errs <- err
					return
				}
				if want, ok := etags[info.ETag]; !ok || !bytes.Equal(b, want) {
					errs <- fmt.Errorf("read %d bytes that match no version (etag %s)", len(b), info.ETag)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	info, _, b := v.get(t, "b", "hot", store.GetOptions{})
	if want, ok := etags[info.ETag]; !ok || !bytes.Equal(b, want) {
		t.Errorf("final object (%d bytes, etag %s) matches no writer", len(b), info.ETag)
	}
	if n := v.Rows(t).Objects; n != 1 {
		t.Errorf("objects = %d", n)
	}
	v.wantContent(t, "after the race", sizes...)
	v.Idle(t)
}

// testConditionalPutRace: concurrent If-None-Match: * puts of one key (inline
// and large bodies mixed) commit exactly one object; every other writer gets
// ErrPreconditionFailed, and the stored bytes are the winner's. Likewise for
// If-Match against the same ETag: one winner.
func testConditionalPutRace(t *testing.T, v *Env) {
	ctx := context.Background()
	first := v.put(t, "b", "match", []byte("first"))
	for _, tc := range []struct {
		key  string
		opts store.PutOptions
	}{
		{"fresh", store.PutOptions{IfNoneMatch: "*"}},
		{"match", store.PutOptions{IfMatch: `"` + first.ETag + `"`}},
	} {
		const n = 8
		datas := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			size := 100 + i
			if i%2 == 0 {
				size = 1<<20 + i // above the knee
			}
			datas[i] = Bytes(uint64(300+i), size)
			wg.Go(func() {
				opts := tc.opts
				opts.Size = int64(len(datas[i]))
				<-start
				_, errs[i] = v.Store.PutObject(ctx, "b", tc.key, bytes.NewReader(datas[i]), opts)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("%s: writers %d and %d both succeeded", tc.key, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, store.ErrPreconditionFailed):
				t.Fatalf("%s: writer %d: %v", tc.key, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no writer succeeded", tc.key)
		}
		_, _, got := v.get(t, "b", tc.key, store.GetOptions{})
		SameBytes(t, fmt.Sprintf("%s winner %d", tc.key, winner), got, datas[winner])
	}
	v.Idle(t)
}
