package gc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
)

// Exit codes of Command (and of fsck.Command).
const (
	ExitOK    = 0
	ExitFail  = 1 // the work failed (or, for fsck, found problems)
	ExitUsage = 2 // bad flags or configuration
)

// ErrInUse is returned by OpenTarget when a running gateway holds the
// embedded data directory.
var ErrInUse = embedded.ErrInUse

// Target is what the maintenance commands work on: the metadata of a
// gateway's configuration and, if it holds local blobs, its media.
type Target struct {
	Config config.Config
	DB     Meta
	Pool   *pgxpool.Pool    // PostgreSQL only
	Engine *embedded.Engine // the embedded default only
	Media  *localfs.Media   // nil if no local blob exists and the engine is not local
}

// Close closes the pool or the engine (releasing the data directory).
func (t *Target) Close() {
	if t.Pool != nil {
		t.Pool.Close()
	}
	if t.Engine != nil {
		_ = t.Engine.Close() // the command's work is done or failed already
	}
}

// maintenanceConns is the pool size of the maintenance commands: they work
// one blob at a time and must not crowd the gateways' connections.
const maintenanceConns = 4

// OpenTarget opens the metadata of cfg: the PostgreSQL database of
// S3GATE_DATABASE_URL (its schema must be current; the media of the data
// directory if the engine is local or local blobs exist), or, without a URL,
// the embedded store in S3GATE_DATA_DIR, which must exist and must not be in
// use by a running gateway (ErrInUse).
func OpenTarget(ctx context.Context, cfg config.Config) (*Target, error) {
	if cfg.DatabaseURL == "" {
		if _, err := os.Stat(filepath.Join(cfg.DataDir, embedded.MetaFile)); err != nil {
			return nil, fmt.Errorf("%sDATA_DIR: no embedded store in %s: %w", config.Prefix, cfg.DataDir, err)
		}
		e, err := embedded.Open(ctx, embedded.Config{Dir: cfg.DataDir, InlineMax: int(cfg.InlineMax), Region: cfg.Region})
		if err != nil {
			return nil, fmt.Errorf("%sDATA_DIR: %w", config.Prefix, err)
		}
		return &Target{Config: cfg, DB: e.GC(), Engine: e, Media: e.Media()}, nil
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("%sDATABASE_URL: %w", config.Prefix, err)
	}
	if !strings.Contains(cfg.DatabaseURL, "pool_max_conns") {
		pcfg.MaxConns = maintenanceConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("%sDATABASE_URL: %w", config.Prefix, err)
	}
	t := &Target{Config: cfg, Pool: pool}
	if err := t.open(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return t, nil
}

func (t *Target) open(ctx context.Context) error {
	applied, known, err := pg.SchemaVersion(ctx, t.Pool)
	if err != nil {
		return fmt.Errorf("%sDATABASE_URL: %w", config.Prefix, err)
	}
	if applied != known {
		return fmt.Errorf("schema version %d, this binary knows %d: run `s3gate migrate` (or start the gateway) first", applied, known)
	}
	g := pg.NewGC(t.Pool)
	t.DB = g
	haveLocal, err := g.HasLocalBlobs(ctx)
	if err != nil {
		return err
	}
	if t.Config.LargeEngine != config.EngineLocal && !haveLocal {
		return nil
	}
	if t.Config.LargeEngine != config.EngineLocal {
		// Local blobs from an earlier configuration: use the data directory
		// only if it is one (never create an empty one and call it media).
		if _, err := os.Stat(filepath.Join(t.Config.DataDir, "blobs")); err != nil {
			return fmt.Errorf("%sDATA_DIR: the database has blobs on the local tier, but %s has no blobs/ directory: %w",
				config.Prefix, t.Config.DataDir, err)
		}
	}
	m, err := localfs.Open(t.Config.DataDir, false)
	if err != nil {
		return fmt.Errorf("%sDATA_DIR: %w", config.Prefix, err)
	}
	t.Media = m
	return nil
}

// Flags are the command-line flags of a maintenance command besides the
// configuration flags: name -> whether it is boolean.
type Flags map[string]bool

// SplitArgs separates a command's own flags (by name, with one or two dashes,
// "-name=value" or "-name value" for non-boolean ones) from the rest, which
// go to config.Load.
func SplitArgs(args []string, own Flags) (mine, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" { // the end of flags
			return mine, append(rest, args[i:]...)
		}
		name := strings.TrimLeft(a, "-")
		if name == a {
			rest = append(rest, a)
			continue
		}
		name, _, hasValue := strings.Cut(name, "=")
		isBool, ok := own[name]
		if !ok {
			rest = append(rest, a)
			continue
		}
		mine = append(mine, a)
		if !isBool && !hasValue && i+1 < len(args) {
			i++
			mine = append(mine, args[i])
		}
	}
	return mine, rest
}

// Loaded is the result of LoadCommand.
type Loaded struct {
	Config config.Config
	Log    *slog.Logger
}

// LoadCommand parses a maintenance command's own flags (described by
// help.Flags, named in own) and the rest as the gateway's configuration. It
// returns the exit code to use when done is true: help printed to stdout
// (0), or a usage or configuration error reported on stderr (2).
func LoadCommand(help Help, own Flags, args, environ []string, stdout, stderr io.Writer) (l Loaded, code int, done bool) {
	if WantsHelp(args) {
		help.Write(stdout)
		return l, ExitOK, true
	}
	flags := help.Flags
	if flags == nil {
		flags = flag.NewFlagSet("", flag.ContinueOnError)
	}
	mine, rest := SplitArgs(args, own)
	flags.SetOutput(io.Discard) // the error is reported below, with a pointer to the help
	if err := flags.Parse(mine); err != nil {
		fmt.Fprintf(stderr, "s3gate %s: %v (s3gate %s --help lists the flags)\n", flags.Name(), err, flags.Name())
		return l, ExitUsage, true
	}
	cfg, err := config.Load(rest, environ, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate %s: %v\n", flags.Name(), err)
		return l, ExitUsage, true
	}
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel)) // validated by config
	hopts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(stderr, hopts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(stderr, hopts)
	}
	return Loaded{Config: cfg, Log: slog.New(h)}, 0, false
}

// age is a duration flag of the gc command that tells whether it was given.
type age struct {
	d   time.Duration
	set bool
}

func (a *age) String() string { return "" } // defaults are in the usage text
func (a *age) Set(s string) error {
	d, err := time.ParseDuration(s)
	a.d, a.set = d, true
	return err
}

// Command is `s3gate gc [flags] [settings]` (see its --help). Without
// --offline it collects once under the lease, exactly as a gateway's
// scheduled run does; with --offline it collects at once for a maintenance
// window (see Offline). On the embedded default both need the data directory
// to themselves: while serve runs, its own online GC collects, and the
// command refuses. --dry-run reports what would be reclaimed and deletes
// nothing. It returns the process exit code: 0 done, 1 failed, 2 usage or
// configuration error.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command(ctx, args, os.Environ(), stdout, stderr)
}

func command(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gc", flag.ContinueOnError)
	offline := fs.Bool("offline", false, "collect now, without the lease or the pin window (a maintenance window)")
	dryRun := fs.Bool("dry-run", false, "report what a collection would reclaim now and what waits for its grace period; delete nothing")
	var grace, stageGrace, uploadExpiry, oldGrace age
	fs.Var(&grace, "gc-grace", fmt.Sprintf("unreferenced blobs, orphan large objects and blob files younger than this `age` are left alone\n(env %sGC_GRACE, as for serve's online GC; default %s)", config.Prefix, DefaultGrace))
	fs.Var(&stageGrace, "stage-grace", fmt.Sprintf("stage files and stage rows untouched for less than this `age` are left alone (default %s)", DefaultStageGrace))
	fs.Var(&uploadExpiry, "upload-expiry", fmt.Sprintf("incomplete multipart uploads older than this `age` are aborted\n(env %sUPLOAD_EXPIRY, as for serve's online GC; default %s)", config.Prefix, DefaultUploadExpiry))
	fs.Var(&oldGrace, "grace", "the old spelling of -gc-grace, which it means when positive")
	help := Help{
		Usage:   "gc [--offline] [--dry-run] [--gc-grace D] [--stage-grace D] [--upload-expiry D] [settings]",
		Purpose: "Reclaims content that nothing references: unreferenced blobs, expired multipart uploads, crash leftovers.",
		About: `Without -offline it collects once under the gc lease, as a gateway's scheduled run does:
it first waits out the pin window (` + DefaultPinWindow.String() + ` on PostgreSQL) so that streams whose pins a database
crash dropped have stopped. -offline collects at once, for a maintenance window. On the
embedded default the data directory must not be in use: a running gateway collects itself
(` + config.Prefix + `GC_INTERVAL). Durations given here must be positive; leave a flag out for its default.
Progress goes to stdout on a terminal, to stderr otherwise; the summary goes to stdout.
Exit status: 0 done, 1 failed (or another instance is collecting), 2 usage or settings error.`,
		Flags: fs, Hidden: []string{"grace"}, Settings: []string{"database-url", "data-dir"}, Shared: true,
		Examples: []string{
			"s3gate gc --dry-run                    # what would go now, and what waits for the grace",
			"s3gate gc                              # collect once, beside running gateways",
			"s3gate gc --offline --gc-grace 1s      # a maintenance window: collect everything now",
			"S3GATE_DATABASE_URL=postgres://... s3gate gc --upload-expiry 24h",
		},
	}
	own := Flags{"offline": true, "dry-run": true, "gc-grace": false, "grace": false, "stage-grace": false, "upload-expiry": false}
	l, code, done := LoadCommand(help, own, args, environ, stdout, stderr)
	if done {
		return code
	}
	// The settings' meaning holds here too: 0 is the default (in the
	// environment, as for serve). On the command line a 0 used to mean
	// "none", so it is refused rather than silently read otherwise.
	for _, f := range []struct {
		name string
		a    age
	}{{"gc-grace", grace}, {"grace", oldGrace}, {"stage-grace", stageGrace}, {"upload-expiry", uploadExpiry}} {
		switch {
		case f.a.set && f.a.d < 0:
			fmt.Fprintf(stderr, "s3gate gc: -%s %s: durations must not be negative\n", f.name, f.a.d)
			return ExitUsage
		case f.a.set && f.a.d == 0:
			fmt.Fprintf(stderr, "s3gate gc: -%s 0: give a positive age (0 no longer means none; leave the flag out for the default)\n", f.name)
			return ExitUsage
		}
	}
	if oldGrace.set && !grace.set {
		grace = oldGrace
	}
	opts := Options{
		Grace: time.Duration(l.Config.GCGrace), StageGrace: stageGrace.d, UploadExpiry: time.Duration(l.Config.UploadExpiry),
		Logger: l.Log,
	}
	if grace.set {
		opts.Grace = grace.d
	}
	if uploadExpiry.set {
		opts.UploadExpiry = uploadExpiry.d
	}
	if opts.Grace < 0 || opts.UploadExpiry < 0 {
		fmt.Fprintf(stderr, "s3gate gc: %sGC_GRACE / %sUPLOAD_EXPIRY: durations must not be negative\n", config.Prefix, config.Prefix)
		return ExitUsage
	}
	opts = opts.withDefaults()
	t, err := OpenTarget(ctx, l.Config)
	if errors.Is(err, ErrInUse) {
		fmt.Fprintf(stderr, "s3gate gc: %v; the gateway that serves it runs online GC itself (%sGC_INTERVAL): stop it to collect with s3gate gc\n", err, config.Prefix)
		return ExitFail
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3gate gc: %v\n", err)
		return ExitUsage
	}
	defer t.Close()
	opts.Media = t.Media
	var progress io.Writer = stdout
	if !IsTerminal(stdout) {
		progress = stderr // plain progress lines stay out of the report
	}
	var st Stats
	switch {
	case *dryRun:
		// A dry run only reads, online or offline: no lease is needed.
		if err := dryRunReport(ctx, t.DB, opts, stdout); err != nil {
			fmt.Fprintf(stderr, "s3gate gc: %v\n", err)
			return ExitFail
		}
		return ExitOK
	case *offline:
		_, st, err = Offline(ctx, t.DB, opts, false, progress)
	default:
		var r *Runner
		if r, err = NewRunner(ctx, t.DB, t.Media, opts); err == nil {
			r.progress = progress
			st, err = r.RunOnce(ctx)
		}
	}
	switch {
	case errors.Is(err, lease.ErrHeld):
		// Nothing ran: no summary.
		fmt.Fprintln(stderr, "s3gate gc: another instance is collecting now (the gc lease is held); nothing was done: try again later, or use -offline in a maintenance window")
		return ExitFail
	case err != nil:
		fmt.Fprintf(stderr, "s3gate gc: %v\n", err)
		if st != (Stats{}) {
			fmt.Fprintln(stdout, "gc: the run failed (see above) after this work:")
			WriteStats(stdout, st)
		}
		return ExitFail
	}
	WriteStats(stdout, st)
	return ExitOK
}

// dryRunReport prints what a collection with opts would reclaim now, and
// what is still inside its grace period: a later run collects that once the
// grace has passed, unless a put in flight or a new reference claims it.
func dryRunReport(ctx context.Context, db Meta, opts Options, w io.Writer) error {
	now, err := PlanCollection(ctx, db, opts)
	if err != nil {
		return err
	}
	all := opts
	all.Grace, all.StageGrace = -1, -1 // none: everything that waits for a grace
	later, err := PlanCollection(ctx, db, all)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "gc: dry run: nothing was deleted; a collection now would reclaim:")
	WritePlan(w, now)
	fmt.Fprintf(w, "gc: inside the grace period (-gc-grace %s, -stage-grace %s), collected by a later run once it has passed if still unused:\n",
		opts.Grace, opts.StageGrace)
	// The two plans are read apart: a put or a delete in between must not
	// make a count negative.
	line := func(what string, n, bytes int64) {
		fmt.Fprintf(w, "  %-24s %10d  %12s\n", what, max(n, 0), FormatBytes(max(bytes, 0)))
	}
	line("unreferenced blobs", later.TotalBlobs()-now.TotalBlobs(), later.BlobBytes+later.UploadBlobBytes-now.BlobBytes-now.UploadBlobBytes)
	line("orphan large objects", later.OrphanLOs-now.OrphanLOs, later.OrphanLOBytes-now.OrphanLOBytes)
	line("stage files", later.StageFiles-now.StageFiles, later.StageBytes-now.StageBytes)
	line("blob files without row", later.OrphanFiles-now.OrphanFiles, later.OrphanFileBytes-now.OrphanFileBytes)
	fmt.Fprintf(w, "  %-24s %10d\n", "abandoned stages", max(later.Stages-now.Stages, 0))
	fmt.Fprintf(w, "  %-24s %10s  %12s\n", "total", "", FormatBytes(max(later.TotalBytes()-now.TotalBytes(), 0)))
	return nil
}

// Help is a command's help page: what it does, how it is called, its own
// flags, the settings it reads as its own, the other settings it accepts
// (those of serve) and examples. A command prints it to stdout on -h/--help.
type Help struct {
	Usage    string        // after "usage: s3gate ", e.g. "gc [flags] [settings]"
	Purpose  string        // one line: what the command does
	About    string        // more paragraphs (optional)
	Flags    *flag.FlagSet // the command's own flags, in place of settings of the same name (nil: none)
	Hidden   []string      // own flags not shown (old spellings)
	Settings []string      // the settings (flags of serve) the command uses, shown with its own flags
	Groups   []Group       // settings shown under their own headings
	Shared   bool          // whether every other setting of serve is accepted too
	Examples []string
}

// Group is a heading of settings in a Help.
type Group struct {
	Title    string
	Settings []string
}

// Write prints the help page to w.
func (h Help) Write(w io.Writer) {
	fmt.Fprintf(w, "usage: s3gate %s\n\n%s\n", h.Usage, h.Purpose)
	if h.About != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(h.About))
	}
	settings := settingBlocks()
	shown := map[string]bool{}
	section := func(title string, entries []string) {
		if len(entries) > 0 {
			fmt.Fprintf(w, "\n%s:\n%s", title, strings.Join(entries, ""))
		}
	}
	pick := func(names []string) (entries []string) {
		for _, name := range names {
			if t, ok := settings.text[name]; ok && !shown[name] {
				shown[name] = true
				entries = append(entries, t)
			}
		}
		return entries
	}
	var own []string
	if h.Flags != nil {
		var b strings.Builder
		out := h.Flags.Output()
		h.Flags.SetOutput(&b)
		h.Flags.PrintDefaults()
		h.Flags.SetOutput(out)
		for name, text := range flagBlocks(b.String()) {
			shown[name] = true // an own flag takes the place of a setting of its name
			if !slices.Contains(h.Hidden, name) {
				own = append(own, text)
			}
		}
	}
	section("Flags", append(own, pick(h.Settings)...))
	if len(h.Groups) > 0 || h.Shared {
		fmt.Fprintf(w, "\nEach setting is also an %s* variable of the same name (-data-dir: %sDATA_DIR); a flag wins.\n",
			config.Prefix, config.Prefix)
	}
	for _, g := range h.Groups {
		section(g.Title, pick(g.Settings))
	}
	if h.Shared {
		title := "Settings shared with serve"
		if len(h.Groups) > 0 {
			title = "Other settings"
		}
		section(title, pick(settings.names))
	}
	if len(h.Examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range h.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// blocks are the entries of a flag listing by flag name, in order.
type blocks struct {
	names []string
	text  map[string]string
}

// settingBlocks returns the help entries of serve's settings (config.Load's flags).
func settingBlocks() blocks {
	var b strings.Builder
	_, _ = config.Load([]string{"-h"}, nil, &b) // ErrHelp: the listing is the point
	names, text := []string{}, map[string]string{}
	for name, t := range flagBlocks(b.String()) {
		names = append(names, name)
		text[name] = t
	}
	return blocks{names, text}
}

// flagBlocks iterates over the entries of a flag.PrintDefaults listing: an
// entry starts with "  -name" and goes on with indented lines.
func flagBlocks(listing string) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		var name string
		var text strings.Builder
		for _, line := range strings.SplitAfter(listing, "\n") {
			if rest, ok := strings.CutPrefix(line, "  -"); ok {
				if name != "" && !yield(name, text.String()) {
					return
				}
				name, _, _ = strings.Cut(strings.TrimSpace(rest), " ")
				text.Reset()
			}
			if name != "" && strings.HasPrefix(line, " ") {
				text.WriteString(line)
			}
		}
		if name != "" {
			yield(name, text.String())
		}
	}
}

// IsHelp reports whether a is a request for help (-h, -help, --help).
func IsHelp(a string) bool { return a == "-h" || a == "-help" || a == "--help" || a == "--h" }

// WantsHelp reports whether args ask for help before any "--".
func WantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if IsHelp(a) {
			return true
		}
	}
	return false
}

// WritePlan prints a plan as an aligned table.
func WritePlan(w io.Writer, p Plan) {
	line := func(what string, n, bytes int64) {
		fmt.Fprintf(w, "  %-24s %10d  %12s\n", what, n, FormatBytes(bytes))
	}
	line("unreferenced blobs", p.Blobs, p.BlobBytes)
	fmt.Fprintf(w, "  %-24s %10d\n", "expired uploads", p.ExpiredUploads)
	line("  their part blobs", p.UploadBlobs, p.UploadBlobBytes)
	line("orphan large objects", p.OrphanLOs, p.OrphanLOBytes)
	line("stage files", p.StageFiles, p.StageBytes)
	line("blob files without row", p.OrphanFiles, p.OrphanFileBytes)
	fmt.Fprintf(w, "  %-24s %10d\n", "abandoned stages", p.Stages)
	fmt.Fprintf(w, "  %-24s %10s  %12s (%d bytes)\n", "total", "", FormatBytes(p.TotalBytes()), p.TotalBytes())
}

// WriteStats prints what a run reclaimed.
func WriteStats(w io.Writer, st Stats) {
	fmt.Fprintf(w, "gc: reclaimed %d blobs (%s, %d bytes); aborted %d expired uploads; removed %d orphan large objects, %d stage files, %d blob files without row, %d abandoned stages; skipped %d pinned, %d referenced, %d busy",
		st.BlobsDeleted, FormatBytes(st.BytesReclaimed), st.BytesReclaimed, st.UploadsAborted,
		st.LargeObjectsUnlinked, st.StageFilesRemoved, st.BlobFilesRemoved, st.StagesReaped,
		st.SkippedPinned, st.SkippedReferenced, st.SkippedBusy)
	if st.InstancesReaped > 0 { // fleet mode only (ADR 009)
		fmt.Fprintf(w, "; reaped %d expired fleet registrations", st.InstancesReaped)
	}
	if st.PinsReaped > 0 { // row pins only (ADR 010)
		fmt.Fprintf(w, "; reaped %d expired pin rows", st.PinsReaped)
	}
	fmt.Fprintln(w)
}
