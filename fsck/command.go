package fsck

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/s3gate/s3gate/gc"
)

// maxListed bounds the problems printed one per line; the count is exact.
const maxListed = 1000

// Command is `s3gate fsck [--orphans] [--repair=...] [configuration flags]`:
// it checks the database (and media) of the gateway's configuration and
// prints what is wrong. It changes nothing unless --repair names what to
// repair. Exit code: 0 clean (after the repairs, if any), 1 problems found (or
// the check failed), 2 usage or configuration error.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command(ctx, args, os.Environ(), stdout, stderr)
}

func command(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fsck", flag.ContinueOnError)
	orphans := fs.Bool("orphans", false, "also report blob files that no blob row names (large = local, after a restore)")
	repairFlag := fs.String("repair", "", "repair what the `list` names: "+RepairRemoveMissing+" (delete the objects whose blobs have no bytes, then those blob rows),\n"+
		RepairRemoveOrphans+" (remove blob files without a row older than the GC grace); comma-separated")
	bypass := fs.Bool("bypass-governance", false, "with --repair="+RepairRemoveMissing+", also remove objects under a running GOVERNANCE retention;\n"+
		"a COMPLIANCE retention or a legal hold keeps its object whatever this says")
	help := gc.Help{
		Usage:   "fsck [--orphans] [--repair=remove-missing,remove-orphans] [--bypass-governance] [settings]",
		Purpose: "Checks the store: every referenced blob exists and its stored bytes hash to its address; repairs only what --repair names.",
		About: `It reads the database (and the data directory's files) of the same settings as serve. On
the embedded default the data directory must not be in use: stop the gateway first.
Objects whose blobs have no bytes are listed (object-without-bytes); after a restore of
large = local, --orphans also lists blob files without a row. --repair changes the store only
as named, then checks again and reports the result (docs/operations.md). Object Lock holds
for it as for a DELETE: an object or version under a legal hold or a running retention is left
in place (REPAIR left ... under Object Lock) and keeps its problem, so fsck exits 1; --bypass-governance
lifts GOVERNANCE retentions only, never COMPLIANCE ones or legal holds.
Progress goes to stdout on a terminal, to stderr otherwise; problems and the summary go to stdout.
Exit status: 0 clean (after the repairs, if any), 1 problems found (or the check did not finish), 2 usage or settings error.`,
		Flags:    fs,
		Settings: []string{"database-url", "data-dir", "gc-grace"},
		Shared:   true,
		Examples: []string{
			"s3gate fsck -data-dir /var/lib/s3gate",
			"S3GATE_DATABASE_URL=postgres://... s3gate fsck > fsck.txt",
			"s3gate fsck --orphans --repair=remove-missing   # after restoring large = local",
			"s3gate fsck --repair=remove-missing --bypass-governance   # GOVERNANCE-retained objects too",
		},
	}
	l, code, done := gc.LoadCommand(help, gc.Flags{"orphans": true, "repair": false, "bypass-governance": true}, args, environ, stdout, stderr)
	if done {
		return code
	}
	repairs, err := ParseRepairs(*repairFlag)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate fsck: --repair: %v\n", err)
		return gc.ExitUsage
	}
	if *bypass && !repairs[RepairRemoveMissing] {
		fmt.Fprintf(stderr, "s3gate fsck: --bypass-governance applies to --repair=%s only\n", RepairRemoveMissing)
		return gc.ExitUsage
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
	opts := Options{Media: t.Media, Progress: progress, Orphans: *orphans || repairs[RepairRemoveOrphans]}
	r, err := Check(ctx, t.DB.(Meta), opts)
	WriteReport(stdout, r)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate fsck: the check did not finish: %v\n", err)
		return gc.ExitFail
	}
	if len(repairs) > 0 && !r.OK() {
		done, err := Repair(ctx, t.DB, t.Media, r, repairs, RepairOptions{Grace: time.Duration(l.Config.GCGrace), BypassGovernance: *bypass})
		for _, d := range done {
			fmt.Fprintln(stdout, "REPAIR", d)
		}
		if err != nil {
			fmt.Fprintf(stderr, "s3gate fsck: repair: %v\n", err)
			return gc.ExitFail
		}
		fmt.Fprintln(stdout, "fsck: checking again after the repairs")
		if r, err = Check(ctx, t.DB.(Meta), opts); err != nil {
			WriteReport(stdout, r)
			fmt.Fprintf(stderr, "s3gate fsck: the check did not finish: %v\n", err)
			return gc.ExitFail
		}
		WriteReport(stdout, r)
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
	for i, p := range r.Affected {
		if i == maxListed {
			fmt.Fprintf(w, "... and %d more affected\n", len(r.Affected)-maxListed)
			break
		}
		fmt.Fprintln(w, "AFFECTED", p)
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
