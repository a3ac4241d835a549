package gc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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

// LoadCommand parses a maintenance command's own flags into fs and the rest
// as the gateway's configuration. It returns the exit code to use when done
// is true (help printed, or a usage or configuration error reported).
func LoadCommand(flags *flag.FlagSet, own Flags, args, environ []string, stderr io.Writer) (l Loaded, code int, done bool) {
	mine, rest := SplitArgs(args, own)
	flags.SetOutput(stderr)
	help := false
	for _, a := range rest {
		if a == "-h" || a == "--help" || a == "-help" {
			help = true
		}
	}
	if help {
		flags.Usage()
		fmt.Fprintln(stderr, "\nConfiguration (the same settings as serve):")
		_, _ = config.Load([]string{"-h"}, environ, stderr)
		return l, ExitOK, true
	}
	if err := flags.Parse(mine); err != nil {
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

// Command is `s3gate gc [--offline] [--dry-run] [--grace D] [--stage-grace D]
// [--upload-expiry D] [configuration flags]`. Without --offline it collects
// once under the lease, exactly as a gateway's scheduled run does; with
// --offline it collects at once for a maintenance window (see Offline). On
// the embedded default both need the data directory to themselves: while
// serve runs, its own online GC collects, and the command refuses.
// --dry-run reports what would be reclaimed and deletes nothing. It returns
// the process exit code: 0 done, 1 failed, 2 usage or configuration error.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return command(ctx, args, os.Environ(), stdout, stderr)
}

func command(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gc", flag.ContinueOnError)
	offline := fs.Bool("offline", false, "collect now without the lease or the pin window (maintenance windows)")
	dryRun := fs.Bool("dry-run", false, "report what would be reclaimed; delete nothing")
	grace := fs.Duration("grace", DefaultGrace, "minimum age of unreferenced blobs, orphan large objects and blob files (0: none)")
	stageGrace := fs.Duration("stage-grace", DefaultStageGrace, "minimum age of stage files (0: none)")
	uploadExpiry := fs.Duration("upload-expiry", DefaultUploadExpiry, "age at which incomplete multipart uploads are aborted (0: every one)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: s3gate gc [--offline] [--dry-run] [--grace D] [--stage-grace D] [--upload-expiry D] [settings]")
		fs.PrintDefaults()
	}
	own := Flags{"offline": true, "dry-run": true, "grace": false, "stage-grace": false, "upload-expiry": false}
	l, code, done := LoadCommand(fs, own, args, environ, stderr)
	if done {
		return code
	}
	for _, d := range []*time.Duration{grace, stageGrace, uploadExpiry} {
		if *d < 0 {
			fmt.Fprintln(stderr, "s3gate gc: durations must not be negative")
			return ExitUsage
		}
	}
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
	none := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1 // Options' "none"
		}
		return d
	}
	opts := Options{
		Grace: none(*grace), StageGrace: none(*stageGrace), UploadExpiry: none(*uploadExpiry),
		Media: t.Media, Logger: l.Log,
	}
	var progress io.Writer = stdout
	if !IsTerminal(stdout) {
		progress = stderr // plain progress lines stay out of the report
	}
	switch {
	case *dryRun:
		// A dry run only reads, online or offline: no lease is needed.
		plan, _, err := Offline(ctx, t.DB, opts, true, nil)
		if err != nil {
			fmt.Fprintf(stderr, "s3gate gc: %v\n", err)
			return ExitFail
		}
		fmt.Fprintln(stdout, "gc: dry run: nothing was deleted; a collection now would reclaim:")
		WritePlan(stdout, plan)
		return ExitOK
	case *offline:
		_, st, err := Offline(ctx, t.DB, opts, false, progress)
		WriteStats(stdout, st)
		if err != nil {
			fmt.Fprintf(stderr, "s3gate gc: %v\n", err)
			return ExitFail
		}
		return ExitOK
	default:
		st, err := RunOnce(ctx, t.DB, t.Media, opts)
		WriteStats(stdout, st)
		if errors.Is(err, lease.ErrHeld) {
			fmt.Fprintln(stderr, "s3gate gc: another instance is collecting now (the gc lease is held); try again later, or use --offline in a maintenance window")
			return ExitFail
		}
		if err != nil {
			fmt.Fprintf(stderr, "s3gate gc: %v\n", err)
			return ExitFail
		}
		return ExitOK
	}
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
	fmt.Fprintf(w, "gc: reclaimed %d blobs (%s, %d bytes); aborted %d expired uploads; removed %d orphan large objects, %d stage files, %d blob files without row, %d abandoned stages; skipped %d pinned, %d referenced, %d busy\n",
		st.BlobsDeleted, FormatBytes(st.BytesReclaimed), st.BytesReclaimed, st.UploadsAborted,
		st.LargeObjectsUnlinked, st.StageFilesRemoved, st.BlobFilesRemoved, st.StagesReaped,
		st.SkippedPinned, st.SkippedReferenced, st.SkippedBusy)
}
