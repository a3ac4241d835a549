package fsck

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/s3gate/s3gate/gc"
)

// maxListed bounds the problems printed one per line; the count is exact.
const maxListed = 1000

// Command is `s3gate fsck [configuration flags]`: it checks the database
// (and media) of the gateway's configuration and prints what is wrong. It
// never changes anything. Exit code: 0 clean, 1 problems found (or the check
// failed), 2 usage or configuration error.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command(ctx, args, os.Environ(), stdout, stderr)
}

func command(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	help := gc.Help{
		Usage:   "fsck [settings]",
		Purpose: "Checks the store: every referenced blob exists and its stored bytes hash to its address; reports, never repairs.",
		About: `It reads the database (and the data directory's files) of the same settings as serve. On
the embedded default the data directory must not be in use: stop the gateway first.
Progress goes to stdout on a terminal, to stderr otherwise; problems and the summary go to stdout.
Exit status: 0 clean, 1 problems found (or the check did not finish), 2 usage or settings error.`,
		Flags:    flag.NewFlagSet("fsck", flag.ContinueOnError),
		Settings: []string{"database-url", "data-dir"},
		Shared:   true,
		Examples: []string{
			"s3gate fsck -data-dir /var/lib/s3gate",
			"S3GATE_DATABASE_URL=postgres://... s3gate fsck > fsck.txt",
		},
	}
	l, code, done := gc.LoadCommand(help, gc.Flags{}, args, environ, stdout, stderr)
	if done {
		return code
	}
	t, err := gc.OpenTarget(ctx, l.Config)
	if errors.Is(err, gc.ErrInUse) {
		fmt.Fprintf(stderr, "s3gate fsck: %v: stop the gateway that serves it first\n", err)
		return gc.ExitFail
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3gate fsck: %v\n", err)
		return gc.ExitUsage
	}
	defer t.Close()
	var progress io.Writer = stdout
	if !gc.IsTerminal(stdout) {
		progress = stderr
	}
	r, err := Check(ctx, t.DB.(Meta), Options{Media: t.Media, Progress: progress})
	WriteReport(stdout, r)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate fsck: the check did not finish: %v\n", err)
		return gc.ExitFail
	}
	if !r.OK() {
		return gc.ExitFail
	}
	return gc.ExitOK
}

// WriteReport prints the problems (up to maxListed) and a summary line.
func WriteReport(w io.Writer, r Report) {
	for i, p := range r.Problems {
		if i == maxListed {
			fmt.Fprintf(w, "... and %d more\n", len(r.Problems)-maxListed)
			break
		}
		fmt.Fprintln(w, "PROBLEM", p)
	}
	state := "clean"
	if !r.OK() {
		state = fmt.Sprintf("%d problems", len(r.Problems))
	}
	fmt.Fprintf(w, "fsck: %s; %d blobs checked, %s hashed", state, r.BlobsChecked, gc.FormatBytes(r.BytesHashed))
	if r.Vanished > 0 {
		fmt.Fprintf(w, ", %d deleted by GC while checked", r.Vanished)
	}
	fmt.Fprintln(w)
}
