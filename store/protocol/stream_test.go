package protocol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/throttle"
)

// part is a test segment: its bytes and its blob (0: inline, no pin).
type part struct {
	data string
	blob int64
}

func partBlob(p part) (int64, bool) { return p.blob, p.blob != 0 }

// fakePinner records pins; gone blobs fail the re-check, lose makes the pin of
// a blob invalid once taken, full refuses a number of acquires as SlowDown.
type fakePinner struct {
	live    map[int64]int // blob -> live pins
	maxLive int           // most distinct blobs pinned at once
	gone    map[int64]bool
	lose    map[int64]bool
	full    int
}

func (f *fakePinner) pinning() Pinning {
	return Pinning{
		Acquire: func(_ context.Context, id int64) (fleet.Pin, error) {
			if f.full > 0 {
				f.full--
				return nil, fmt.Errorf("%w: %w", store.ErrSlowDown, fleet.ErrTooManyPins)
			}
			f.live[id]++
			f.maxLive = max(f.maxLive, len(f.live))
			return &countedPin{fakePin: &fakePin{lost: f.lose[id]}, f: f, id: id}, nil
		},
		Exists: func(_ context.Context, id int64) (bool, error) { return !f.gone[id], nil },
	}
}

type countedPin struct {
	*fakePin
	f  *fakePinner
	id int64
}

func (p *countedPin) Release() {
	if p.released {
		return
	}
	p.fakePin.Release()
	if p.f.live[p.id]--; p.f.live[p.id] == 0 {
		delete(p.f.live, p.id)
	}
}

// openTestStream pins the first blob as GetObject does and returns the stream.
func openTestStream(t *testing.T, f *fakePinner, parts []part, mode GuardMode) (io.ReadCloser, error) {
	return openStream(t, f, parts, mode, false)
}

// fakeFile is a part in a file (FileSender): it sends through dst.ReadFrom.
type fakeFile struct {
	r     *strings.Reader
	sends int
	after func() // runs after each send (nil: none)
}

func (f *fakeFile) Read(p []byte) (int, error) { panic("a file part was Read, not sent") }
func (f *fakeFile) Close() error               { return nil }

func (f *fakeFile) SendTo(dst io.ReaderFrom, max int64) (int64, error) {
	f.sends++
	n, err := dst.ReadFrom(io.LimitReader(f.r, max))
	if f.after != nil {
		f.after()
	}
	if err == nil && f.r.Len() == 0 {
		err = io.EOF
	}
	return n, err
}

// openStream is openTestStream whose pinned parts are files when files is set.
func openStream(t *testing.T, f *fakePinner, parts []part, mode GuardMode, files bool) (io.ReadCloser, error) {
	t.Helper()
	var first fleet.Pin
	id, need := FirstPinned(parts, partBlob)
	if need {
		var err error
		if first, err = f.pinning().PinFirst(context.Background(), id); err != nil {
			return nil, err
		}
	}
	open := func(_ context.Context, p part) (io.ReadCloser, error) {
		if files && p.blob != 0 {
			return &fakeFile{r: strings.NewReader(p.data)}, nil
		}
		return io.NopCloser(strings.NewReader(p.data)), nil
	}
	s := NewPinnedSegments(context.Background(), "test", parts, partBlob, open, f.pinning(), first, id)
	return GuardedStream(context.Background(), s, nil, mode, files), nil
}

// A stream pins one blob at a time, as it reaches it; the bytes of a blob that
// vanished or whose pin was lost are never handed over, and the stream ends
// short with an error that says ServiceUnavailable.
func TestPinnedSegments(t *testing.T) {
	many := make([]part, 2000)
	var manyWant strings.Builder
	for i := range many {
		many[i] = part{data: fmt.Sprintf("<%d>", i), blob: int64(i%40 + 1)} // blobs repeat, not adjacently
		manyWant.WriteString(many[i].data)
	}
	tests := []struct {
		name     string
		parts    []part
		gone     map[int64]bool
		lose     map[int64]bool
		full     int
		want     string
		wantErr  error // nil: a clean EOF
		firstErr error // from PinFirst, before any byte
		maxLive  int
	}{
		{name: "2000 parts, one pin at a time", parts: many, want: manyWant.String(), maxLive: 1},
		{name: "shared blob kept across parts", parts: []part{{"ab", 1}, {"cd", 1}, {"ef", 2}}, want: "abcdef", maxLive: 1},
		{name: "inline parts need no pin", parts: []part{{"ab", 0}, {"cd", 3}, {"ef", 0}}, want: "abcdef", maxLive: 1},
		{name: "later part vanished", parts: []part{{"ab", 1}, {"cd", 2}, {"ef", 3}}, gone: map[int64]bool{2: true},
			want: "ab", wantErr: ErrVanished, maxLive: 1},
		{name: "later part's pin lost", parts: []part{{"ab", 1}, {"cd", 2}}, lose: map[int64]bool{2: true},
			want: "ab", wantErr: store.ErrUnavailable, maxLive: 1},
		{name: "first blob vanished", parts: []part{{"ab", 1}}, gone: map[int64]bool{1: true}, firstErr: ErrVanished},
		{name: "pin table full for a while mid-stream", parts: []part{{"ab", 1}, {"cd", 2}}, full: 3, want: "abcd", maxLive: 1},
	}
	for _, tc := range tests {
		for _, send := range []bool{false, true} { // read, or sent as files
			t.Run(fmt.Sprintf("%s/sendfile=%v", tc.name, send), func(t *testing.T) {
				f := &fakePinner{live: map[int64]int{}, gone: tc.gone, lose: tc.lose}
				rd, err := openStream(t, f, tc.parts, GuardAlways, send)
				f.full = tc.full // refusals only after the first pin
				if tc.firstErr != nil {
					if !errors.Is(err, tc.firstErr) || len(f.live) != 0 {
						t.Fatalf("first pin: %v with %d pins held; want %v and none", err, len(f.live), tc.firstErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				var got []byte
				if send {
					var buf bytes.Buffer // an io.ReaderFrom
					_, err = rd.(io.WriterTo).WriteTo(&buf)
					got = buf.Bytes()
				} else {
					got, err = io.ReadAll(rd)
				}
				if string(got) != tc.want {
					t.Errorf("read %q, want %q", got, tc.want)
				}
				switch {
				case tc.wantErr == nil && err != nil:
					t.Errorf("err = %v, want a clean end", err)
				case tc.wantErr != nil && (!errors.Is(err, tc.wantErr) || !errors.Is(err, store.ErrUnavailable)):
					t.Errorf("err = %v, want %v (ServiceUnavailable)", err, tc.wantErr)
				}
				if f.maxLive != tc.maxLive {
					t.Errorf("at most %d blobs pinned at once, want %d", f.maxLive, tc.maxLive)
				}
				if err := rd.Close(); err != nil {
					t.Fatal(err)
				}
				if len(f.live) != 0 {
					t.Errorf("pins left after Close: %v", f.live)
				}
			})
		}
	}
}

// The pin of the part just read lives until the next Read (its bytes were
// handed over under it) and the last one until Close, so the guard also
// covers EOF.
func TestPinnedSegmentsPinLifetime(t *testing.T) {
	f := &fakePinner{live: map[int64]int{}}
	rd, err := openTestStream(t, f, []part{{"ab", 1}, {"cd", 2}}, GuardWithGovernor)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, err := rd.Read(buf); n != 2 || err != nil || f.live[1] != 1 {
		t.Fatalf("first read: %d, %v, pins %v; want 2 bytes under blob 1's pin", n, err, f.live)
	}
	if n, err := rd.Read(buf); n != 2 || err != nil || f.live[1] != 0 || f.live[2] != 1 {
		t.Fatalf("second read: %d, %v, pins %v; want blob 1 released, blob 2 pinned", n, err, f.live)
	}
	if _, err := rd.Read(buf); err != io.EOF || f.live[2] != 1 {
		t.Fatalf("at EOF: %v, pins %v; want EOF with blob 2 still pinned", err, f.live)
	}
	for range 2 {
		if err := rd.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.live) != 0 {
		t.Errorf("pins after Close: %v", f.live)
	}
}

// A stream sent as files runs the Read path's checks between slices: a pin
// lost, a governor closed or a request cancelled during one slice ends the
// stream before the next one goes out, and the error says why.
func TestSendChecksEverySlice(t *testing.T) {
	data := strings.Repeat("x", 3*sendSlice+5)
	for _, tc := range []struct {
		name    string
		stop    func(pin *fakePin, gov *throttle.BandwidthGovernor, cancel context.CancelFunc)
		wantErr error
	}{
		{"pin lost", func(p *fakePin, _ *throttle.BandwidthGovernor, _ context.CancelFunc) { p.lost = true }, fleet.ErrPinLost},
		{"governor closed", func(_ *fakePin, g *throttle.BandwidthGovernor, _ context.CancelFunc) { g.Close() }, throttle.ErrClosed},
		{"request cancelled", func(_ *fakePin, _ *throttle.BandwidthGovernor, c context.CancelFunc) { c() }, context.Canceled},
		{"nothing", func(*fakePin, *throttle.BandwidthGovernor, context.CancelFunc) {}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			gov, err := throttle.New(throttle.Config{})
			if err != nil {
				t.Fatal(err)
			}
			pin := &fakePin{}
			file := &fakeFile{r: strings.NewReader(data)}
			file.after = func() {
				if file.sends == 1 {
					tc.stop(pin, gov, cancel)
				}
			}
			pins := Pinning{
				Acquire: func(context.Context, int64) (fleet.Pin, error) { return pin, nil },
				Exists:  func(context.Context, int64) (bool, error) { return true, nil },
			}
			open := func(context.Context, part) (io.ReadCloser, error) { return file, nil }
			first, err := pins.PinFirst(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			s := NewPinnedSegments(ctx, "test", []part{{blob: 1}}, partBlob, open, pins, first, 1)
			rd := GuardedStream(ctx, s, gov, GuardAlways, true)
			var out bytes.Buffer
			n, err := rd.(io.WriterTo).WriteTo(&out)
			wantN, wantSends := int64(len(data)), 4
			if tc.wantErr != nil {
				wantN, wantSends = sendSlice, 1
			}
			if !errors.Is(err, tc.wantErr) || n != wantN || int64(out.Len()) != wantN || file.sends != wantSends {
				t.Errorf("sent %d bytes (%d written) in %d slices, %v; want %d in %d, %v", n, out.Len(), file.sends, err, wantN, wantSends, tc.wantErr)
			}
			if got := gov.Metrics().PacedBytes.Load(); got != wantN {
				t.Errorf("paced bytes %d, want %d", got, wantN)
			}
			if err := rd.Close(); err != nil || !pin.released {
				t.Errorf("close: %v, pin released %v", err, pin.released)
			}
		})
	}
}
