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

// failingDialect fails the object row's write with rowErr, or the COMMIT
// with commitErr; BlobExists answers the look-up after a failed COMMIT.
type failingDialect struct {
	rowErr, commitErr error
	rowExists         bool
	lookupErr         error
	lookups           int
	inTx              bool
}

func (d *failingDialect) Write(ctx context.Context, _ []int64, fn func(Tx) error) error {
	d.inTx = true
	defer func() { d.inTx = false }()
	if err := fn(fakeTx{d: d}); err != nil {
		return err
	}
	return d.commitErr
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
func (t fakeTx) PutObjectRow(context.Context, ObjectRow) (time.Time, error) {
	return time.Now(), t.d.rowErr
}
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
	d                *failingDialect
	placed, unplaced int64
	unplacedInTx     bool
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
	s.unplaced, s.unplacedInTx = id, s.d.inTx
	return nil
}

// TestFailedPublishCleanup: after the joint transaction failed, a file
// placed under the new blob id is removed only when its row certainly does
// not exist: inside the transaction when a later step fails (before the
// rollback frees the id for another put), or after a failed COMMIT whose row
// a look-up did not find. A COMMIT that took effect, or one whose outcome the
// look-up cannot tell, keeps it.
func TestFailedPublishCleanup(t *testing.T) {
	conflict := errors.New("row write failed")
	lost := &CommitError{Err: errors.New("commit: connection reset")}
	for _, c := range []struct {
		name        string
		d           failingDialect
		wantLookups int
		wantRemoved bool
		wantInTx    bool
	}{
		{"row write fails", failingDialect{rowErr: conflict}, 0, true, true},
		{"commit lost, no row", failingDialect{commitErr: lost}, 1, true, false},
		{"commit lost, row committed", failingDialect{commitErr: lost, rowExists: true}, 1, false, false},
		{"commit lost, look-up fails", failingDialect{commitErr: lost, lookupErr: errors.New("down")}, 1, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &fakeStaged{d: &c.d}
			s := NewStore(&c.d, Config{Engine: "test", Content: fileContent{st}, InlineMax: -1})
			_, err := s.PutObject(context.Background(), "b", "k", strings.NewReader("large"), store.PutOptions{Size: 5})
			want := c.d.rowErr
			if want == nil {
				want = c.d.commitErr
			}
			if !errors.Is(err, want) {
				t.Fatalf("err %v, want %v", err, want)
			}
			if !st.unstaged {
				t.Error("stage not dropped")
			}
			if c.d.lookups != c.wantLookups {
				t.Errorf("%d look-ups of the blob row, want %d", c.d.lookups, c.wantLookups)
			}
			if removed := st.unplaced == 7; removed != c.wantRemoved || st.unplacedInTx != c.wantInTx {
				t.Errorf("placed file removed: %v (inside the transaction: %v), want %v (%v)", removed, st.unplacedInTx, c.wantRemoved, c.wantInTx)
			}
		})
	}
}
