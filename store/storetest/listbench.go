package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/s3gate/s3gate/store"
)

// ListBenchBucket is the bucket that FillListBench fills.
const ListBenchBucket = "listbench"

// ListPage is one listing that BenchList measures, with the entries it
// returns.
type ListPage struct {
	Name              string
	Params            store.ListParams
	Objects, Prefixes int
}

// ListPages are the listings of the bucket FillListBench fills: 10,000 keys
// in 50 common prefixes under "d/" and 1,000 keys side by side under "f/".
var ListPages = []ListPage{
	{"delimiter-50-prefixes", store.ListParams{Prefix: "d/", Delimiter: "/"}, 0, 50},
	{"page-50", store.ListParams{Prefix: "d/", MaxKeys: 50}, 50, 0},
	{"delimiter-flat-1000", store.ListParams{Prefix: "f/", Delimiter: "/"}, 1000, 0},
	{"page-1000", store.ListParams{Prefix: "f/"}, 1000, 0},
}

// FillListBench creates ListBenchBucket and puts the keys of ListPages into
// it, from a few writers at once.
func FillListBench(tb testing.TB, s store.ObjectStore) {
	tb.Helper()
	ctx := context.Background()
	if err := s.CreateBucket(ctx, ListBenchBucket, ""); err != nil {
		tb.Fatal(err)
	}
	keys := make(chan string)
	go func() {
		defer close(keys)
		for i := range 10_000 {
			keys <- fmt.Sprintf("d/p%02d/k%05d", i%50, i)
		}
		for i := range 1000 {
			keys <- fmt.Sprintf("f/k%04d", i)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range cap(errs) {
		wg.Go(func() {
			for k := range keys {
				if _, err := s.PutObject(ctx, ListBenchBucket, k, bytes.NewReader([]byte(k)), store.PutOptions{Size: int64(len(k))}); err != nil {
					errs <- fmt.Errorf("put %s: %w", k, err)
					for range keys { // let the producer finish
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// BenchList measures each of ListPages on s, filled by FillListBench, and
// reports the statements per page that statements (a running count of the
// engine's statements, or nil) tells.
func BenchList(b *testing.B, s store.ObjectStore, statements func() int64) {
	ctx := context.Background()
	for _, pg := range ListPages {
		b.Run(pg.Name, func(b *testing.B) {
			var before int64
			if statements != nil {
				before = statements()
			}
			for b.Loop() {
				res, err := s.ListObjects(ctx, ListBenchBucket, pg.Params)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Objects) != pg.Objects || len(res.CommonPrefixes) != pg.Prefixes {
					b.Fatalf("%d objects and %d prefixes, want %d and %d", len(res.Objects), len(res.CommonPrefixes), pg.Objects, pg.Prefixes)
				}
			}
			if statements != nil {
				b.ReportMetric(float64(statements()-before)/float64(b.N), "stmts/op")
			}
		})
	}
}

// UploadPage is one ListMultipartUploads listing of the bucket that
// FillUploadBench fills, with the entries it returns.
type UploadPage struct {
	Name              string
	Params            store.ListUploadsParams
	Uploads, Prefixes int
}

// UploadPages are the listings of the bucket FillUploadBench fills: 5,000
// uploads in 50 common prefixes under "u/" (25 keys of 4 uploads each).
var UploadPages = []UploadPage{
	{"delimiter-50-prefixes", store.ListUploadsParams{Prefix: "u/", Delimiter: "/"}, 0, 50},
	{"delimiter-after-marker", store.ListUploadsParams{Prefix: "u/", Delimiter: "/", KeyMarker: "u/p24/k00"}, 0, 25},
	{"page-50", store.ListUploadsParams{Prefix: "u/", MaxUploads: 50}, 50, 0},
}

// FillUploadBench creates ListBenchBucket and the uploads of UploadPages in
// it, from a few writers at once.
func FillUploadBench(tb testing.TB, s store.ObjectStore) {
	tb.Helper()
	ctx := context.Background()
	if err := s.CreateBucket(ctx, ListBenchBucket, ""); err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range cap(errs) {
		wg.Go(func() {
			for i := w; i < 50*25*4; i += cap(errs) {
				k := fmt.Sprintf("u/p%02d/k%02d", i%50, i/50%25)
				if _, err := s.CreateMultipartUpload(ctx, ListBenchBucket, k, store.ObjectMeta{}, "", ""); err != nil {
					errs <- fmt.Errorf("create upload %s: %w", k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// CheckUploadPage fails tb unless res has the entries of pg.
func CheckUploadPage(tb testing.TB, pg UploadPage, res store.ListUploadsResult) {
	tb.Helper()
	if len(res.Uploads) != pg.Uploads || len(res.CommonPrefixes) != pg.Prefixes {
		tb.Fatalf("%s: %d uploads and %d prefixes, want %d and %d", pg.Name, len(res.Uploads), len(res.CommonPrefixes), pg.Uploads, pg.Prefixes)
	}
}
