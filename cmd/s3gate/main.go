// Command s3gate is an S3-compatible object storage gateway that keeps
// metadata and content in PostgreSQL.
//
// Usage:
//
//	s3gate serve       [flags]   serve the S3 API (and metrics/health on -metrics-addr)
//	s3gate migrate     [flags]   apply the schema migrations and exit (--status: report only)
//	s3gate healthcheck [flags]   exit 0 if the gateway on -metrics-addr is ready, else 1
//	s3gate admin key ...       manage access keys
//	s3gate gc          [flags]   reclaim content that nothing references
//	s3gate fsck        [flags]   check the store; repair only what --repair names
//	s3gate version               print the version (also --version)
//	s3gate help [command]        the list of commands, or a command's help
//
// Every flag has an environment variable of the same name with the prefix
// S3GATE_ (-inline-max is S3GATE_INLINE_MAX); run `s3gate help serve` for the list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/s3gate/s3gate/admin"
	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fsck"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/server"
	"github.com/s3gate/s3gate/store/pg"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	metrics.Version = version // labels s3gate_build_info
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "-h", "-help", "--help":
		cmd = "help"
	case "-version", "--version":
		cmd = "version"
	}
	if h, ok := helps[cmd]; ok && gc.WantsHelp(rest) {
		h.Write(stdout)
		return 0
	}
	switch cmd {
	case "version":
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "s3gate version: unexpected argument %q\n", rest[0])
			return 2
		}
		fmt.Fprintln(stdout, "s3gate", version)
		return 0
	case "help":
		return help(rest, stdout, stderr)
	case "healthcheck":
		return healthcheck(rest, os.Environ(), stdout, stderr)
	case "admin", "gc", "fsck":
		ctx, stop := signalContext()
		defer stop()
		return map[string]func(context.Context, []string, io.Writer, io.Writer) int{
			"admin": admin.Run, "gc": gc.Command, "fsck": fsck.Command,
		}[cmd](ctx, rest, stdout, stderr)
	case "serve", "migrate":
	default:
		fmt.Fprintf(stderr, "s3gate: unknown command %q (serve, migrate, admin, gc, fsck, healthcheck, version, help); s3gate help lists them\n", cmd)
		return 2
	}
	status := false
	if cmd == "migrate" {
		rest, status = statusFlag(rest)
	}
	cfg, err := config.Load(rest, os.Environ(), stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3gate: %v\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signalContext()
	defer stop()
	switch cmd {
	case "migrate":
		if cfg.DatabaseURL == "" {
			log.Error("migrate needs " + config.Prefix + "DATABASE_URL (the embedded store migrates itself on start)")
			return 2
		}
		if status {
			return migrateStatus(ctx, cfg.DatabaseURL, stdout, stderr)
		}
		if err := pg.Migrate(ctx, cfg.DatabaseURL); err != nil {
			log.Error("migrate failed", "err", err)
			return 1
		}
		log.Info("migrations applied")
		return 0
	default:
		return serve(ctx, cfg, log, stdout)
	}
}

func serve(ctx context.Context, cfg config.Config, log *slog.Logger, stdout io.Writer) int {
	// A misspelt setting would otherwise be ignored in silence.
	for _, u := range cfg.Unknown {
		if u.Nearest != "" {
			log.Warn("unknown setting ignored: "+u.Name+" (did you mean "+u.Nearest+"?)", "name", u.Name, "nearest", u.Nearest)
		} else {
			log.Warn("unknown setting ignored: "+u.Name, "name", u.Name)
		}
	}
	scheme := "http"
	if cfg.TLSCertFile != "" {
		scheme = "https"
	}
	// Files and directories first: a bad one fails at once, not after a
	// wait for the database or a "serving" line.
	if err := server.Preflight(cfg); err != nil {
		log.Error("start-up failed: " + server.Flatten(err))
		return 1
	}
	// A gateway started before its database (a reboot, a compose file) waits
	// for it instead of exiting.
	if err := server.WaitForDatabase(ctx, cfg, log); err != nil {
		if ctx.Err() != nil {
			return 0
		}
		log.Error("start-up failed: " + server.Flatten(err))
		return 1
	}
	// On PostgreSQL, New takes the writer claim first (waiting as a standby
	// while another instance holds it) and logs what it does.
	srv, err := server.New(ctx, cfg, log)
	// A generated root key pair is kept from the moment it is made, and only
	// the start that made it can show its secret. So it is shown now, even
	// if New failed after making it or a listener fails next, rather than
	// made only once start-up has succeeded: New needs the pair to build the
	// handler, before the steps that can still fail. The endpoint is the
	// configured address (the listener may not exist).
	if k, ok := server.GeneratedKey(srv, err); ok {
		host, port, _ := net.SplitHostPort(cfg.Addr) // validated by config
		if host == "" {
			host = "localhost"
		}
		printKey(stdout, k, scheme+"://"+net.JoinHostPort(host, port), cfg.Region)
	}
	if errors.Is(err, server.ErrNoClaim) {
		if ctx.Err() != nil {
			return 0 // stopped while waiting as a standby
		}
		return 1
	}
	if err != nil {
		log.Error("start-up failed: " + server.Flatten(err))
		return 1
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		log.Error("listen failed", "setting", config.Prefix+"ADDR", "err", err)
		return 1
	}
	metricsURL := "off"
	var mln net.Listener
	if cfg.MetricsAddr != "" {
		// A standby has served it since it began to wait.
		if mln = srv.MetricsListener(); mln == nil {
			mln, err = net.Listen("tcp", cfg.MetricsAddr)
		}
		if err != nil {
			_ = ln.Close() // the listen error is the one to report
			log.Error("listen failed", "setting", config.Prefix+"METRICS_ADDR", "err", err)
			return 1
		}
		metricsURL = "http://" + mln.Addr().String()
	}
	endpoint := scheme + "://" + ln.Addr().String()
	meta := "postgresql"
	if cfg.DatabaseURL == "" {
		meta = "embedded"
	}
	log.Info("s3gate serving", "endpoint", endpoint, "metrics", metricsURL, "region", cfg.Region, "metadata", meta,
		"large_engine", cfg.LargeEngine, "inline_max", int64(cfg.InlineMax), "version", version)
	if !srv.RootKey.Generated { // shown above
		printKey(stdout, srv.RootKey, endpoint, cfg.Region)
	}
	// The metrics listener outlives the S3 drain, so that probes see /readyz
	// turn 503 while in-flight requests finish.
	mctx, mstop := context.WithCancel(context.Background())
	mdone := make(chan error, 1)
	if mln != nil {
		go func() { mdone <- srv.ServeMetrics(mctx, mln) }()
	} else {
		mdone <- nil
	}
	// Losing the ownership claim cancels all work at once (another instance
	// may take over) and stops Serve, which drains what is left; serve then
	// exits 1 (the loss is logged where it is seen).
	err = srv.Serve(ctx, ln)
	mstop()
	if merr := <-mdone; merr != nil {
		log.Error("metrics listener stopped with error", "err", merr)
	}
	if err != nil {
		// Serve returns ErrClaimLost itself when the loss is all there is to
		// say, and it was logged when it was seen.
		if err != server.ErrClaimLost { //nolint:errorlint // a joined drain error is still logged
			log.Error("stopped with error", "err", err)
		}
		return 1
	}
	log.Info("stopped")
	return 0
}

// printKey shows a freshly generated root key pair once, with a line to paste.
func printKey(w io.Writer, k server.RootKey, endpoint, region string) {
	if !k.Generated {
		if k.Kept() != "" {
			fmt.Fprintf(w, "s3gate: endpoint %s, root key %s (secret in %s)\n", endpoint, k.AccessKey, k.Kept())
		}
		return
	}
	fmt.Fprintf(w, `s3gate: generated a root key pair, kept in %s (the secret is shown only this once)
  endpoint    %s
  access key  %s
  secret key  %s
  try:  AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s aws --region %s --endpoint-url %s s3 ls
`, k.Kept(), endpoint, k.AccessKey, k.SecretKey, k.AccessKey, k.SecretKey, region, endpoint)
}

// signalContext is cancelled by the first SIGINT/SIGTERM (graceful drain); a
// second signal exits at once.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-ch
		cancel()
		<-ch
		os.Exit(1)
	}()
	return ctx, func() { signal.Stop(ch); cancel() }
}

func newLogger(cfg config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel)) // validated by config
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
