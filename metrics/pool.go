package metrics

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// poolCollector exports pgxpool statistics, read at scrape time.
type poolCollector struct {
	stat  func() *pgxpool.Stat
	descs []poolMetric
}

type poolMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*pgxpool.Stat) float64
}

// RegisterPool exports the statistics of a PostgreSQL connection pool (pass
// pool.Stat) as s3gate_db_pool_* gauges and counters.
func (m *Metrics) RegisterPool(stat func() *pgxpool.Stat) error {
	return m.reg.Register(newPoolCollector(stat))
}

func newPoolCollector(stat func() *pgxpool.Stat) *poolCollector {
	d := func(name, help string, kind prometheus.ValueType, v func(*pgxpool.Stat) float64) poolMetric {
		return poolMetric{
			desc:  prometheus.NewDesc(prometheus.BuildFQName(Namespace, "db_pool", name), help, nil, nil),
			kind:  kind,
			value: v,
		}
	}
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	return &poolCollector{stat: stat, descs: []poolMetric{
		d("acquired_connections", "Connections currently borrowed from the pool.", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) }),
		d("idle_connections", "Idle connections in the pool.", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) }),
		d("constructing_connections", "Connections being opened.", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.ConstructingConns()) }),
		d("total_connections", "Connections in the pool: acquired, idle and being opened.", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) }),
		d("max_connections", "Largest size of the pool.", gauge,
			func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) }),
		d("acquires_total", "Successful connection acquisitions.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) }),
		d("acquire_duration_seconds_total", "Time spent in successful acquisitions.", counter,
			func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() }),
		d("empty_acquires_total", "Successful acquisitions that had to wait because no connection was idle.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) }),
		d("empty_acquire_wait_seconds_total", "Time spent waiting in acquisitions that found no idle connection.", counter,
			func(s *pgxpool.Stat) float64 { return s.EmptyAcquireWaitTime().Seconds() }),
		d("canceled_acquires_total", "Acquisitions cancelled by their context.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.CanceledAcquireCount()) }),
		d("new_connections_total", "Connections opened.", counter,
			func(s *pgxpool.Stat) float64 { return float64(s.NewConnsCount()) }),
	}}
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d.desc
	}
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stat()
	for _, d := range c.descs {
		ch <- prometheus.MustNewConstMetric(d.desc, d.kind, d.value(s))
	}
}
