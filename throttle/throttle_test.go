package throttle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// fakeSource returns its chunks one per Read and logs each call into a shared
// event list, so tests can check the order of reads and guard calls.
type fakeSource struct {
	chunks  []string
	eofWith bool // return io.EOF together with the last chunk
	err     error
	log     *[]string
}

func (f *fakeSource) Read(p []byte) (int, error) {
	if len(f.chunks) == 0 {
		*f.log = append(*f.log, "read:EOF")
		if f.err != nil {
			return 0, f.err
		}
		return 0, io.EOF
	}
	c := f.chunks[0]
	n := copy(p, c)
	if n < len(c) {
		f.chunks[0] = c[n:]
	} else {
		f.chunks = f.chunks[1:]
	}
	*f.log = append(*f.log, "read:"+string(p[:n]))
	if f.eofWith && len(f.chunks) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func TestGuardCallsAndOrder(t *testing.T) {
	tests := []struct {
		name    string
		chunks  []string
		eofWith bool
		quantum int
		want    []string
	}{
		{"empty source", nil, false, 0, []string{"guard", "read:EOF", "guard"}},
		{"one chunk", []string{"abc"}, false, 0, []string{"guard", "read:abc", "guard", "read:EOF", "guard"}},
		{"eof with data", []string{"ab", "cd"}, true, 0,
			[]string{"guard", "read:ab", "guard", "read:cd", "guard", "guard"}},
		{"quantum splits", []string{"abcdefg"}, false, 3,
			[]string{"guard", "read:abc", "guard", "read:def", "guard", "read:g", "guard", "read:EOF", "guard"}},
	}
	for _, tc := range tests {
		for _, limited := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/limited=%v", tc.name, limited), func(t *testing.T) {
				var log []string
				cfg := Config{Quantum: tc.quantum}
				if limited {
					// Fast enough never to wait long, but exercising the limiters.
					cfg.Global, cfg.PerRequest = 1<<40, 1<<40
				}
				g, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				src := &fakeSource{chunks: append([]string(nil), tc.chunks...), eofWith: tc.eofWith, log: &log}
				r := g.NewReader(context.Background(), src, func() error { log = append(log, "guard"); return nil })
				got, err := io.ReadAll(r)
				if err != nil {
					t.Fatalf("ReadAll: %v", err)
				}
				if want := strings.Join(tc.chunks, ""); string(got) != want {
					t.Errorf("data %q, want %q", got, want)
				}
				if strings.Join(log, ",") != strings.Join(tc.want, ",") {
					t.Errorf("events\n got %v\nwant %v", log, tc.want)
				}
				if n := g.Metrics().PacedBytes.Load(); n != int64(len(got)) {
					t.Errorf("PacedBytes %d, want %d", n, len(got))
				}
			})
		}
	}
}

// A guard that fails on its k-th call: the bytes read before it are delivered,
// the chunk it vetoes never is, and the error sticks.
func TestGuardErrorAborts(t *testing.T) {
	errLost := errors.New("pin lost")
	tests := []struct {
		name     string
		failAt   int // 1 = inner guard
		wantData string
	}{
		{"inner guard", 1, ""},
		{"first quantum", 2, ""},
		{"second quantum", 3, "aa"},
		{"at EOF", 4, "aabb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			g, err := New(Config{})
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			src := &fakeSource{chunks: []string{"aa", "bb"}, log: &log}
			r := g.NewReader(context.Background(), src, func() error {
				calls++
				if calls >= tc.failAt {
					return errLost
				}
				return nil
			})
			got, err := io.ReadAll(r)
			if !errors.Is(err, errLost) {
				t.Fatalf("err %v, want %v", err, errLost)
			}
			if string(got) != tc.wantData {
				t.Errorf("data %q, want %q", got, tc.wantData)
			}
			if n, err2 := r.Read(make([]byte, 8)); n != 0 || !errors.Is(err2, errLost) {
				t.Errorf("read after abort: %d, %v", n, err2)
			}
			if calls != tc.failAt {
				t.Errorf("guard called %d times, want %d", calls, tc.failAt)
			}
		})
	}
}

func TestClosure(t *testing.T) {
	tests := []struct {
		name     string
		chunks   []string
		closeAt  int // close the governor on the guard call with this number
		limited  bool
		wantData string
	}{
		{"empty source closed before", nil, 1, false, ""},
		{"closed mid-stream unlimited", []string{"aa", "bb"}, 2, false, "aa"},
		{"closed mid-stream limited", []string{"aa", "bb"}, 2, true, "aa"},
		{"closed after last quantum", []string{"aa", "bb"}, 3, false, "aabb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			cfg := Config{}
			if tc.limited {
				cfg.Global = 1 << 40
			}
			g, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			src := &fakeSource{chunks: tc.chunks, log: &log}
			r := g.NewReader(context.Background(), src, func() error {
				calls++
				if calls == tc.closeAt {
					g.Close()
				}
				return nil
			})
			got, err := io.ReadAll(r)
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("err %v, want ErrClosed", err)
			}
			if string(got) != tc.wantData {
				t.Errorf("data %q, want %q", got, tc.wantData)
			}
		})
	}
}

func TestSourceErrorAndContext(t *testing.T) {
	boom := errors.New("boom")
	var log []string
	g, err := New(Config{PerRequest: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	r := g.NewReader(context.Background(), &fakeSource{chunks: []string{"x"}, err: boom, log: &log}, nil)
	got, err := io.ReadAll(r)
	if !errors.Is(err, boom) || string(got) != "x" {
		t.Errorf("got %q, %v; want \"x\", boom", got, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = g.NewReader(ctx, strings.NewReader("data"), nil)
	if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled ctx: err %v, want context.Canceled", err)
	}
}

// A per-request rate far below a quantum must still work: WaitN is clamped to
// the burst. 3 bytes/s with a quantum of 4 makes the bucket 3 tokens; the first
// 3 bytes come from the full bucket, so the test waits about 1/3 s.
func TestWaitClampedToBurst(t *testing.T) {
	g, err := New(Config{PerRequest: 3, Quantum: 4})
	if err != nil {
		t.Fatal(err)
	}
	r := g.NewReader(context.Background(), strings.NewReader("abcd"), nil)
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "abcd" {
		t.Fatalf("got %q, %v", got, err)
	}
	if g.Metrics().ThrottledNanos.Load() <= 0 {
		t.Errorf("no throttled wait recorded")
	}
}

func TestNewRejectsNegative(t *testing.T) {
	for _, cfg := range []Config{{Global: -1}, {PerRequest: -1}, {Quantum: -1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestLargeCopyIntegrity(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 50000) // 800 kB, many quanta
	g, err := New(Config{Global: 1 << 40, PerRequest: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	guards := 0
	r := g.NewReader(context.Background(), bytes.NewReader(data), func() error { guards++; return nil })
	var out bytes.Buffer
	if _, err := io.Copy(&out, r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		t.Fatal("copied bytes differ")
	}
	// inner + at least one per quantum + EOF
	if min := 2 + (len(data)+DefaultQuantum-1)/DefaultQuantum; guards < min {
		t.Errorf("guard called %d times, want >= %d", guards, min)
	}
}
