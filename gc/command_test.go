package gc

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/pg"
)

// TestCommandOutput: what `s3gate gc` prints on a pipe. A dry run lists what
// waits for its grace period; a held lease fails first, with no summary; an
// online run says that it waits out the pin window, and for how long, before
// its progress lines, which go to stderr, and its summary to stdout.
func TestCommandOutput(t *testing.T) {
	v := newEnv(t, pg.LargeLocal)
	v.leftovers(t) // all of it young: inside the default grace periods
	environ := []string{"S3GATE_DATABASE_URL=" + v.pool.Config().ConnString(), "S3GATE_LARGE_ENGINE=local",
		"S3GATE_DATA_DIR=" + v.media.Dir(), "S3GATE_LOG_LEVEL=error"}
	ctx := context.Background()
	tests := []struct {
		name   string
		args   []string
		before func(t *testing.T)
		code   int
		stdout []string // in this order, spaces collapsed
		stderr []string
		quiet  bool // nothing on stdout
	}{
		{name: "dry run", args: []string{"--dry-run"}, code: ExitOK, stdout: []string{
			"a collection now would reclaim:", "unreferenced blobs 0 0 B",
			"inside the grace period (-gc-grace 1m0s, -stage-grace 1h0m0s)", "unreferenced blobs 2 3.2 KiB",
			"stage files 1 10 B", "blob files without row 1 26 B", "total 3.3 KiB"}},
		{name: "held lease", before: v.holdLease, code: ExitFail, quiet: true,
			stderr: []string{"another instance is collecting now (the gc lease is held); nothing was done"}},
		{name: "online", args: []string{"--gc-grace=1ns", "--stage-grace=1ns"}, code: ExitOK,
			stdout: []string{"gc: reclaimed 2 blobs"},
			stderr: []string{"gc: waiting out the pin window (8s) before deleting", "expired uploads: 0 done",
				"unreferenced blobs: 2/2 done", "crash leftovers: 2/2 done"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			var out, errOut bytes.Buffer
			code := command(ctx, tc.args, environ, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out.String(), errOut.String())
			}
			inOrder(t, "stdout", out.String(), tc.stdout)
			inOrder(t, "stderr", errOut.String(), tc.stderr)
			if tc.quiet && out.Len() > 0 {
				t.Errorf("stdout: %q, want nothing", out.String())
			}
		})
	}
}

// holdLease takes the gc lease as another instance until the test ends.
func (v *env) holdLease(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	st, err := lease.NewPGStore(ctx, v.pool)
	if err != nil {
		t.Fatal(err)
	}
	g, err := lease.Acquire(ctx, st, lease.Config{Kind: LeaseKind, Holder: "other"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = g.Finish(ctx) })
}

// inOrder asserts that text holds each of want, in order, spaces collapsed.
func inOrder(t *testing.T, what, text string, want []string) {
	t.Helper()
	flat := strings.Join(strings.Fields(text), " ")
	for _, w := range want {
		i := strings.Index(flat, w)
		if i < 0 {
			t.Errorf("%s lacks %q (or has it too early):\n%s", what, w, text)
			return
		}
		flat = flat[i+len(w):]
	}
}

// records is a slog handler that sends every record to a channel.
type records chan slog.Record

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	r <- rec
	return nil
}
func (r records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r records) WithGroup(string) slog.Handler      { return r }

// TestRunDoneLevel: a scheduled run that reclaimed nothing logs "gc: run
// done" at DEBUG (it would say so every minute); one that reclaimed logs it
// at INFO.
func TestRunDoneLevel(t *testing.T) {
	tests := []struct {
		name    string
		garbage bool
		want    slog.Level
	}{
		{"nothing to do", false, slog.LevelDebug},
		{"reclaimed", true, slog.LevelInfo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newEmbeddedEnv(t, embedded.Config{})
			if tc.garbage {
				v.garbage(t, "a", content(1))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			recs := make(records, 16)
			opts := v.opts()
			opts.Interval, opts.Logger = time.Hour, slog.New(recs)
			r, err := NewRunner(ctx, v.db, v.media, opts)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			for rec := range recs {
				if rec.Message == "gc: run done" {
					if rec.Level != tc.want {
						t.Errorf("gc: run done at %s, want %s", rec.Level, tc.want)
					}
					break
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
