package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/metrics"
	"github.com/s3gate/s3gate/store/pg"
)

// dbStatsTimeout bounds the catalog queries of one scrape.
const dbStatsTimeout = 5 * time.Second

// dbCollector exports PostgreSQL's view of the store's health at scrape
// time: the oldest open transaction of the gateways' sessions and each
// table's size (main, TOAST, indexes) and tuples (docs/metrics.md).
type dbCollector struct {
	stats              func(ctx context.Context) (pg.DBStats, error)
	log                *slog.Logger
	oldest, bytes, tup *prometheus.Desc
	failures           prometheus.Counter
}

func newDBCollector(stats func(ctx context.Context) (pg.DBStats, error), log *slog.Logger) *dbCollector {
	name := func(n string) string { return prometheus.BuildFQName(metrics.Namespace, "db", n) }
	return &dbCollector{stats: stats, log: log,
		oldest: prometheus.NewDesc(name("oldest_xact_age_seconds"), "Age of the oldest open transaction of the gateways' sessions on this database (it holds back vacuum).", nil, nil),
		bytes:  prometheus.NewDesc(name("table_bytes"), "Size of the store's tables by part: main, toast, indexes.", []string{"table", "part"}, nil),
		tup:    prometheus.NewDesc(name("table_tuples"), "Live and dead tuples of the store's tables (pg_stat_all_tables estimates).", []string{"table", "state"}, nil),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "db", Name: "stats_errors_total",
			Help: "Scrapes whose database statistics failed; their db gauges are missing rather than stale."}),
	}
}

// Describe implements prometheus.Collector.
func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.oldest
	ch <- c.bytes
	ch <- c.tup
	c.failures.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	defer c.failures.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), dbStatsTimeout)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		c.failures.Inc()
		c.log.Warn("metrics: database statistics", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, st.OldestXactSeconds)
	for _, t := range st.Tables {
		for part, v := range map[string]int64{"main": t.MainBytes, "toast": t.ToastBytes, "indexes": t.IndexBytes} {
			ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(v), t.Table, part)
		}
		ch <- prometheus.MustNewConstMetric(c.tup, prometheus.GaugeValue, float64(t.LiveTuples), t.Table, "live")
		ch <- prometheus.MustNewConstMetric(c.tup, prometheus.GaugeValue, float64(t.DeadTuples), t.Table, "dead")
	}
}

// registerDBMetrics registers the database collector on PostgreSQL.
func (s *Server) registerDBMetrics(reg prometheus.Registerer) error {
	e, ok := s.engine.(interface {
		DBStats(ctx context.Context) (pg.DBStats, error)
	})
	if !ok {
		return nil
	}
	if err := reg.Register(newDBCollector(e.DBStats, s.log)); err != nil {
		return fmt.Errorf("metrics: database: %w", err)
	}
	return nil
}

// registerReadBatchMetrics registers s3gate_db_read_batch_statements and
// returns what the engine calls with each batch's size (store/pg/rowbatch).
func registerReadBatchMetrics(reg prometheus.Registerer) (func(int), error) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: metrics.Namespace, Subsystem: "db", Name: "read_batch_statements",
		Help:    "Object reads (the resolving statement of a GET or HEAD) sent to PostgreSQL together in one batch; 1: a read alone.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	})
	if err := reg.Register(h); err != nil {
		return nil, fmt.Errorf("register read batch metrics: %w", err)
	}
	return func(n int) { h.Observe(float64(n)) }, nil
}
