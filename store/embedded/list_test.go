package embedded

import (
	"context"
	"testing"

	"github.com/s3gate/s3gate/store/storetest"
)

// BenchmarkList measures storetest.ListPages.
func BenchmarkList(b *testing.B) {
	e, err := Open(context.Background(), Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	storetest.FillListBench(b, e)
	storetest.BenchList(b, e, nil)
}
