package server

import (
	"context"
	"fmt"
	"net/url"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/pg"
)

// RoleReplica is the role of a read-only instance (READ_ONLY, or a hot
// standby): it serves reads and holds no writer claim.
const RoleReplica = "replica"

// detectReadOnly decides whether this instance is a read replica: by
// READ_ONLY, or because the database is a hot standby, where no write could
// succeed anyway (ADR 013).
func (s *Server) detectReadOnly(ctx context.Context) error {
	s.readOnly = s.cfg.ReadOnly
	in, err := pg.InRecovery(ctx, s.cfg.DatabaseURL)
	if err != nil {
		return err
	}
	if in && !s.readOnly {
		s.log.Info("the database is a hot standby (pg_is_in_recovery): serving read-only")
	}
	s.readOnly = s.readOnly || in
	if s.readOnly {
		s.role.Store(RoleReplica)
		s.log.Info("read-only replica: writes are refused; no writer claim, GC or migrations")
	}
	return nil
}

// openReplica checks what a read-only instance needs in place of migrating
// and returns the pool's URL with read-only transactions, so that a write
// that slipped past the API's refusal would fail in PostgreSQL too.
func (s *Server) openReplica(ctx context.Context, dbURL string) (string, error) {
	if err := pg.CheckReplica(ctx, s.cfg.DatabaseURL); err != nil {
		return "", fmt.Errorf("read-only: %w", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("%sDATABASE_URL: %w", config.Prefix, err)
	}
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// replicaRootKey is the root key of a read-only instance: from the
// environment, or the one the primary generated into the database (a replica
// cannot generate one).
func replicaRootKey(ctx context.Context, cfg config.Config, db store.RootKeyStore) (RootKey, error) {
	k, found, err := FindRootKey(ctx, cfg, db)
	if err != nil {
		return RootKey{}, err
	}
	if !found {
		return RootKey{}, fmt.Errorf("read-only: no root key in the database (a replica cannot generate one): "+
			"start the primary's gateway once, or set %sROOT_ACCESS_KEY and %sROOT_SECRET_KEY", config.Prefix, config.Prefix)
	}
	return k, nil
}
