package protocol

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// fakePin is a pin the test invalidates by hand.
type fakePin struct{ lost, released bool }

func (p *fakePin) Valid() bool { return !p.lost && !p.released }
func (p *fakePin) Release()    { p.released = true }

// losingReader invalidates pin once lossAt bytes have been read.
type losingReader struct {
	r      io.Reader
	pin    *fakePin
	read   int
	lossAt int
	closed int
}

func (l *losingReader) Read(b []byte) (int, error) {
	n, err := l.r.Read(b[:min(len(b), 4)])
	l.read += n
	if l.read >= l.lossAt {
		l.pin.lost = true
	}
	return n, err
}

func (l *losingReader) Close() error { l.closed++; return nil }

func TestGuardedReader(t *testing.T) {
	tests := []struct {
		name     string
		mode     GuardMode
		lossAt   int
		want     string
		wantLost bool
	}{
		{"always, kept", GuardAlways, 100, "0123456789", false},
		{"always, lost mid-stream", GuardAlways, 6, "0123", true},
		{"always, lost on first read", GuardAlways, 1, "", true},
		{"governor only, no governor", GuardWithGovernor, 6, "0123456789", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pin := &fakePin{}
			src := &losingReader{r: strings.NewReader("0123456789"), pin: pin, lossAt: tc.lossAt}
			rd := GuardedReader(context.Background(), src, PinSet{pin}, nil, tc.mode)
			got, err := io.ReadAll(rd)
			if string(got) != tc.want {
				t.Errorf("read %q, want %q", got, tc.want)
			}
			lost := errors.Is(err, fleet.ErrPinLost) && errors.Is(err, store.ErrUnavailable)
			if lost != tc.wantLost || (!tc.wantLost && err != nil) {
				t.Errorf("err = %v, want lost=%v", err, tc.wantLost)
			}
			if pin.released {
				t.Fatal("pin released before Close")
			}
			for range 2 {
				if err := rd.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if !pin.released || src.closed != 1 {
				t.Errorf("after Close: released=%v, source closed %d times; want true, 1", pin.released, src.closed)
			}
		})
	}
}

func TestPinSetCheck(t *testing.T) {
	a, b := &fakePin{}, &fakePin{}
	s := PinSet{a, b}
	if err := s.Check(); err != nil {
		t.Fatalf("valid pins: %v", err)
	}
	b.lost = true
	if err := s.Check(); !errors.Is(err, fleet.ErrPinLost) {
		t.Errorf("lost pin: %v", err)
	}
	s.Release()
	if !a.released || !b.released {
		t.Error("Release left a pin")
	}
}
