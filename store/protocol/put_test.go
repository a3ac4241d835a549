package protocol

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
)

// failingDialect runs the joint transaction's statements, then fails it
// with err; BlobExists answers the look-up after a failed COMMIT.
type failingDialect struct {
	err       error
	rowExists bool
	lookupErr error
	lookups   int
}

func (d *failingDialect) Write(ctx context.Context, _ []int64, fn func(Tx) error) error {
	if err := fn(fakeTx{d: d}); err != nil {
		return err
	}
	return d.err
}

func (d *failingDialect) Read(ctx context.Context, fn func(Tx) error) error { return fn(fakeTx{d: d}) }
func (d *failingDialect) Autocommit() Tx                                    { return fakeTx{d: d} }
func (d *failingDialect) OpenContent(context.Context, BlobLoc, int64, int64) (io.ReadCloser, error) {
	return nil, errors.New("not called")
}

// fakeTx answers the statements of a PutObject; the others (of the nil
// Tx) are not called.
type fakeTx struct {
	Tx
	d *failingDialect
}

func (fakeTx) BucketExists(context.Context, string) error { return nil }
func (fakeTx) UpsertBlob(context.Context, Blob) (int64, bool, error) {
	return 7, true, nil
}
func (fakeTx) CurrentObject(context.Context, string, string) (Current, error) { return Current{}, nil }
func (fakeTx) PutObjectRow(context.Context, ObjectRow) (time.Time, error)     { return time.Now(), nil }
func (t fakeTx) BlobExists(context.Context, int64) (bool, error) {
	t.d.lookups++
	return t.d.rowExists, t.d.lookupErr
}

// fileContent is content placed outside the transaction, like files.
type fileContent struct{ st *fakeStaged }

func (fileContent) Tier() string                                 { return store.TierLocal }
func (fileContent) FreshID(context.Context) (int64, bool, error) { return 0, false, nil }
func (fileContent) Slot(context.Context) (func(), error)         { return func() {}, nil }
func (c fileContent) Stage(_ context.Context, _ int64, r io.Reader) (Staged, error) {
	_, err := io.Copy(io.Discard, r)
	return c.st, err
}

type fakeStaged struct {
	placed, unplaced int64
	unstaged         bool
}

func (s *fakeStaged) Claim(context.Context, Tx) (*uint32, error) { return nil, nil }
func (s *fakeStaged) Place(_ context.Context, _ Tx, id int64, inserted bool) error {
	if inserted {
		s.placed = id
	}
	return nil
}
func (s *fakeStaged) Placed() int64                 { return s.placed }
func (s *fakeStaged) Unstage(context.Context) error { s.unstaged = true; return nil }
func (s *fakeStaged) Unplace(_ context.Context, id int64) error {
	s.unplaced = id
	return nil
}

// TestFailedPublishCleanup: after the joint transaction failed, a file
// placed under the new blob id is removed only when its row certainly does
// not exist: after a rollback, or after a failed COMMIT whose row a look-up
// did not find. A COMMIT that took effect, or one whose outcome the look-up
// cannot tell, keeps it.
func TestFailedPublishCleanup(t *testing.T) {
	rolledBack := errors.New("serialization failure")
	lost := &CommitError{Err: errors.New("commit: connection reset")}
	for _, c := range []struct {
		name        string
		d           failingDialect
		wantLookups int
		wantRemoved bool
	}{
		{"rolled back", failingDialect{err: rolledBack}, 0, true},
		{"commit lost, no row", failingDialect{err: lost}, 1, true},
		{"commit lost, row committed", failingDialect{err: lost, rowExists: true}, 1, false},
		{"commit lost, look-up fails", failingDialect{err: lost, lookupErr: errors.New("down")}, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &fakeStaged{}
			s := NewStore(&c.d, Config{Engine: "test", Content: fileContent{st}, InlineMax: -1})
			_, err := s.PutObject(context.Background(), "b", "k", strings.NewReader("large"), store.PutOptions{Size: 5})
			if !errors.Is(err, c.d.err) {
				t.Fatalf("err %v, want %v", err, c.d.err)
			}
			if !st.unstaged {
				t.Error("stage not dropped")
			}
			if c.d.lookups != c.wantLookups {
				t.Errorf("%d look-ups of the blob row, want %d", c.d.lookups, c.wantLookups)
			}
			if removed := st.unplaced == 7; removed != c.wantRemoved {
				t.Errorf("placed file removed: %v, want %v", removed, c.wantRemoved)
			}
		})
	}
}
