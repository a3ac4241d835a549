package main

import (
	"fmt"
	"io"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/gc"
)

const usage = `s3gate is an S3-compatible object storage gateway; metadata in PostgreSQL or, by default,
in an embedded store in the data directory.

usage: s3gate <command> [flags] [settings]

Commands:
  serve        serve the S3 API (and /metrics, /healthz, /readyz on -metrics-addr)
  migrate      apply the PostgreSQL schema migrations and exit
  admin        manage access keys (admin key create | list | delete); list a fleet (admin instances);
               show a bucket (admin bucket info)
  gc           reclaim content that nothing references (online under the lease, or -offline)
  fsck         check that every referenced blob exists and hashes to its address
  healthcheck  exit 0 if the gateway on -metrics-addr is ready, else 1
  version      print the version
  help         show this, or a command's help: s3gate help <command>

Every setting is a flag and an ` + config.Prefix + `* variable of the same name (-inline-max is
` + config.Prefix + `INLINE_MAX); a flag wins. "s3gate help serve" lists them.

Examples:
  s3gate serve                              # the embedded default in ./data
  ` + config.Prefix + `DATABASE_URL=postgres://user@db/s3gate s3gate serve
  s3gate help gc
`

// helps are the help pages of the commands main runs itself; admin, gc and
// fsck have theirs in their packages.
var helps = map[string]gc.Help{
	"serve": {
		Usage:   "serve [settings]",
		Purpose: "Serves the S3 API until SIGINT or SIGTERM, then drains in-flight requests (at most -drain-timeout).",
		About: `Without -database-url the metadata and content live in -data-dir (the embedded default, one
gateway per data directory). With a PostgreSQL URL several instances may share the database:
one owns it and the others wait as standbys (-standby), or, with -fleet, every instance serves
reads and writes at once (large content in PostgreSQL, or -shared-media with the local engine). A root key pair is generated into the
data directory on the first start unless -root-access-key and -root-secret-key are set.
Online GC runs every -gc-interval.`,
		Groups: []gc.Group{
			{Title: "Storage", Settings: []string{"database-url", "data-dir", "large-engine", "inline-max"}},
			{Title: "Listening", Settings: []string{"addr", "metrics-addr", "tls-cert-file", "tls-key-file", "region", "domain"}},
			{Title: "Root key", Settings: []string{"root-access-key", "root-secret-key"}},
			{Title: "Instances and shutdown", Settings: []string{"standby", "read-only", "fleet", "shared-media", "instance-ttl", "db-wait", "db-max-conns", "drain-timeout"}},
			{Title: "Online GC", Settings: []string{"gc-interval", "gc-grace", "upload-expiry"}},
			{Title: "Limits", Settings: []string{"max-conns", "max-pins", "bandwidth-global", "bandwidth-per-request", "read-idle-timeout", "write-idle-timeout"}},
			{Title: "Logs and metrics", Settings: []string{"log-format", "log-level", "metrics-stats-ttl"}},
		},
		Shared: true, // and any setting not in a group
		Examples: []string{
			"s3gate serve -addr 0.0.0.0:9000 -data-dir /var/lib/s3gate",
			config.Prefix + "DATABASE_URL=postgres://user@db/s3gate " + config.Prefix + "LARGE_ENGINE=pglo s3gate serve",
			"s3gate serve -tls-cert-file cert.pem -tls-key-file key.pem -log-format json",
		},
	},
	"migrate": {
		Usage:   "migrate [--status] [settings]",
		Purpose: "Applies the PostgreSQL schema migrations and exits (the embedded store migrates itself on start).",
		About: `serve applies them too on start; migrate lets a deployment apply them first, as its own step.
--status changes nothing: it lists the applied, pending and unknown (applied by a newer binary)
migrations. Exit status of --status: 0 up to date, 1 the status could not be read, 2 usage or
settings error, 3 migrations pending, 4 the database is newer than this binary.`,
		Settings: []string{"database-url", "log-format", "log-level"},
		Shared:   true,
		Examples: []string{"s3gate migrate -database-url postgres://user@db/s3gate", "s3gate migrate --status"},
	},
	"healthcheck": {
		Usage:   "healthcheck [settings]",
		Purpose: "Exits 0 if the gateway whose metrics listener is -metrics-addr answers /readyz with 200, else 1.",
		About: `It is the container image's HEALTHCHECK (the image has no curl). It reads the same settings
and ` + config.Prefix + `* variables as serve and uses only -metrics-addr; a wildcard host
(0.0.0.0, ::) means this machine. Exit status: 0 ready, 1 anything else (Docker reserves 2).`,
		Settings: []string{"metrics-addr"},
		Examples: []string{"s3gate healthcheck", "s3gate healthcheck -metrics-addr 127.0.0.1:9001"},
	},
	"version": {
		Usage:    "version",
		Purpose:  "Prints the version of this binary (also: s3gate --version).",
		Examples: []string{"s3gate version"},
	},
	"help": {
		Usage:    "help [command [subcommand]]",
		Purpose:  "Shows the list of commands, or a command's help (the same as s3gate <command> --help).",
		Examples: []string{"s3gate help", "s3gate help gc", "s3gate help admin key create"},
	},
}

// help answers `s3gate help [command...]`: the overview, or the command's
// own --help.
func help(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return 0
	}
	return run(append(args[:len(args):len(args)], "--help"), stdout, stderr)
}
