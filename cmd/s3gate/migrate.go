package main

import (
	"context"
	"fmt"
	"io"

	"github.com/s3gate/s3gate/store/pg"
)

// Exit codes of `s3gate migrate --status` beyond 0 (the schema is exactly
// this binary's), 1 (the status could not be read) and 2 (usage).
const (
	exitPending = 3 // migrations this binary knows are not applied yet
	exitNewer   = 4 // the database has migrations this binary does not know
)

// statusFlag takes --status (or -status) out of args, as config.Load knows
// only the settings.
func statusFlag(args []string) (rest []string, status bool) {
	for _, a := range args {
		if a == "-status" || a == "--status" {
			status = true
			continue
		}
		rest = append(rest, a)
	}
	return rest, status
}

// migrateStatus prints the applied and the known migrations and the
// pending ones, changing nothing, and returns the exit code.
func migrateStatus(ctx context.Context, databaseURL string, stdout, stderr io.Writer) int {
	st, err := pg.MigrationStatus(ctx, databaseURL)
	if err != nil {
		fmt.Fprintf(stderr, "s3gate migrate --status: %v\n", err)
		return 1
	}
	for _, a := range st.Applied {
		fmt.Fprintf(stdout, "applied  %04d %s (%s)\n", a.Version, a.Name, a.AppliedAt.UTC().Format("2006-01-02 15:04:05Z"))
	}
	for _, m := range st.Pending {
		fmt.Fprintf(stdout, "pending  %04d %s\n", m.Version, m.Name)
	}
	for _, a := range st.Unknown {
		fmt.Fprintf(stdout, "unknown  %04d %s: applied by a newer binary\n", a.Version, a.Name)
	}
	known := st.Known[len(st.Known)-1].Version
	switch {
	case len(st.Unknown) > 0:
		fmt.Fprintf(stdout, "migrate: the database is newer than this binary (it knows up to %d)\n", known)
		return exitNewer
	case len(st.Pending) > 0:
		fmt.Fprintf(stdout, "migrate: %d pending (this binary knows up to %d); s3gate migrate applies them\n", len(st.Pending), known)
		return exitPending
	}
	fmt.Fprintf(stdout, "migrate: up to date at %d\n", known)
	return 0
}
