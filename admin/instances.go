package admin

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/gc"
)

// instancesHelp is the help page of `admin instances`.
func instancesHelp(fs *flag.FlagSet) gc.Help {
	return gc.Help{Flags: fs, Settings: []string{"database-url"}, Shared: true,
		Usage:   "admin instances [-json] [settings]",
		Purpose: "Lists the instances of a fleet registered in the database, live or expired (heartbeat older than its TTL, in database time).",
		About: `Each instance in fleet mode (-fleet) registers on start, heartbeats every TTL/3
(-instance-ttl) and deregisters on a clean shutdown; online GC deletes expired registrations.`,
		Examples: []string{"S3GATE_DATABASE_URL=postgres://... s3gate admin instances", "s3gate admin instances -json"},
	}
}

// instances runs `s3gate admin instances`.
func instances(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	own, cfgArgs, pos := splitArgs(args)
	fs := flag.NewFlagSet("s3gate admin instances", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON: every registration with its state")
	if slices.ContainsFunc(args, isHelpFlag) {
		instancesHelp(fs).Write(stdout)
		return exitOK
	}
	if err := fs.Parse(own); err != nil {
		return exitUsage
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "s3gate admin instances: unexpected argument %q\n", pos[0])
		return exitUsage
	}
	cfg, code, done := loadConfig(cfgArgs, environ, stderr)
	if done {
		return code
	}
	if cfg.DatabaseURL == "" {
		fmt.Fprintf(stderr, "s3gate admin instances: needs %s: the embedded default runs no fleet\n", config.Name("DATABASE_URL"))
		return exitUsage
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin instances: open database (%sDATABASE_URL): %v\n", config.Prefix, err)
		return exitFail
	}
	defer pool.Close()
	list, err := fleet.ListInstances(ctx, pool)
	if err == nil {
		err = printInstances(list, *asJSON, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "s3gate admin instances: %v\n", err)
		return exitFail
	}
	return exitOK
}

func printInstances(list []fleet.Instance, asJSON bool, out io.Writer) error {
	if asJSON {
		type instanceJSON struct {
			ID          fleet.InstanceID `json:"id"`
			Host        string           `json:"host"`
			PID         int              `json:"pid"`
			StartedAt   time.Time        `json:"started_at"`
			HeartbeatAt time.Time        `json:"heartbeat_at"`
			TTLSeconds  float64          `json:"ttl_seconds"`
			State       string           `json:"state"` // live or expired
		}
		l := []instanceJSON{}
		for _, in := range list {
			l = append(l, instanceJSON{ID: in.ID, Host: in.Host, PID: in.PID, StartedAt: in.StartedAt.UTC(),
				HeartbeatAt: in.HeartbeatAt.UTC(), TTLSeconds: in.TTL.Seconds(), State: stateText(in.Live)})
		}
		return writeJSON(out, l)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tHOST\tPID\tSTARTED\tHEARTBEAT\tTTL\tSTATE")
	for _, in := range list {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", in.ID, in.Host, in.PID, in.StartedAt.UTC().Format(time.RFC3339),
			in.HeartbeatAt.UTC().Format(time.RFC3339), in.TTL, stateText(in.Live))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func stateText(live bool) string {
	if live {
		return "live"
	}
	return "expired"
}
