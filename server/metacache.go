package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/metacache"
	"github.com/s3gate/s3gate/store/pg"
)

// metadataStore is what the keyring and s3api read keys and bucket
// configurations through: on PostgreSQL with METADATA_CACHE, the engine
// behind a cache kept valid by LISTEN on a dedicated session of the direct
// URL (never the pool's, which may go through a transaction pooler; the
// direct URL is checked not to at start-up). A read replica is uncached: it
// cannot LISTEN, and the primary's notifications do not reach it. The
// embedded engine is uncached: its read is an in-process statement
// (docs/adr/018-metadata-cache.md).
func (s *Server) metadataStore() (metadataStore, error) {
	pgEng, ok := s.engine.(metacache.Engine)
	if !s.cfg.MetadataCache || s.cfg.DatabaseURL == "" || s.readOnly || !ok {
		return s.engine, nil
	}
	m := &metacache.Metrics{}
	if err := registerCacheMetrics(s.metrics.Registry(), m); err != nil {
		return nil, err
	}
	c := metacache.New(metacache.Options{Metrics: m})
	done := make(chan struct{})
	go func() { defer close(done); metacache.Listen(s.work, s.cfg.DirectURL(), c, s.log) }()
	s.onClose("stop the metadata cache listener", func() error { <-done; return nil }) // Close cancelled s.work
	return metacache.Wrap(pgEng, c), nil
}

// The PostgreSQL engine is what the cache decorates.
var _ metacache.Engine = (*pg.Engine)(nil)

// metadataStore is the engine as requests see it.
type metadataStore interface {
	store.ObjectStore
	store.KeyStore
}

func registerCacheMetrics(reg prometheus.Registerer, m *metacache.Metrics) error {
	for _, c := range []struct {
		name, help string
		v          interface{ Load() int64 }
	}{
		{"hits_total", "Bucket configuration and access key reads answered from the metadata cache.", &m.Hits},
		{"misses_total", "Bucket configuration and access key reads that went to the database.", &m.Misses},
		{"invalidations_total", "Entries dropped: notifications of a commit, and this instance's own writes.", &m.Invalidations},
		{"resets_total", "Times the cache turned off and emptied because its notification session was lost.", &m.Resets},
	} {
		v := c.v
		err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "metadata_cache",
			Name: c.name, Help: c.help}, func() float64 { return float64(v.Load()) }))
		if err != nil {
			return fmt.Errorf("metrics: metadata cache: %w", err)
		}
	}
	return nil
}
