package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s3gate/s3gate/store"
)

// DefaultBlobStatsTTL is how long blob statistics are usually reused (the
// default of S3GATE_METRICS_STATS_TTL): they scan the blob and object tables,
// so scrapes must not run them every time.
const DefaultBlobStatsTTL = 10 * time.Second

// blobStatsTimeout bounds one computation of the statistics.
const blobStatsTimeout = 10 * time.Second

// BlobStatsFunc computes blob statistics (a metadata engine's BlobStats).
type BlobStatsFunc func(ctx context.Context) (store.BlobStats, error)

// blobCollector exports blob counts and bytes by tier and dedup savings from
// a cached BlobStatsFunc result.
type blobCollector struct {
	src BlobStatsFunc
	ttl time.Duration
	now func() time.Time
	log *slog.Logger

	blobs, bytes, logical, saved, errors *prometheus.Desc
	// Per bucket: current objects and their bytes, noncurrent versions,
	// delete markers, uploads in progress.
	bObjects, bBytes, bNoncurrent, bMarkers, bUploads *prometheus.Desc

	mu      sync.Mutex // held while computing: concurrent scrapes share one query
	at      time.Time  // when cached was computed; zero: never
	cached  store.BlobStats
	lastErr error
	nErrors int64
}

// RegisterBlobStats exports the statistics of src, recomputed at most once per
// ttl (0: on every scrape), as s3gate_blobs{tier}, s3gate_blob_bytes{tier},
// s3gate_object_logical_bytes and s3gate_dedup_saved_bytes, and per bucket
// s3gate_bucket_{objects,object_bytes,noncurrent_versions,delete_markers,uploads}.
func (m *Metrics) RegisterBlobStats(src BlobStatsFunc, ttl time.Duration) error {
	return m.reg.Register(newBlobCollector(src, ttl, time.Now, m.log))
}

func newBlobCollector(src BlobStatsFunc, ttl time.Duration, now func() time.Time, log *slog.Logger) *blobCollector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := func(n string) string { return prometheus.BuildFQName(Namespace, "", n) }
	return &blobCollector{
		src: src, ttl: ttl, now: now, log: log,
		blobs: prometheus.NewDesc(name("blobs"),
			"Stored blobs (distinct contents) by tier, unreferenced ones awaiting GC included.", []string{"tier"}, nil),
		bytes: prometheus.NewDesc(name("blob_bytes"),
			"Bytes of stored blobs by tier, unreferenced ones awaiting GC included.", []string{"tier"}, nil),
		logical: prometheus.NewDesc(name("object_logical_bytes"),
			"Sum of the sizes of all objects, as clients see them.", nil, nil),
		saved: prometheus.NewDesc(name("dedup_saved_bytes"),
			"Bytes saved by deduplication: logical bytes of objects minus the bytes of the distinct blobs they reference.", nil, nil),
		errors: prometheus.NewDesc(name("blob_stats_errors_total"),
			"Failed computations of the blob statistics (the blob metrics are missing from those scrapes).", nil, nil),
		bObjects: prometheus.NewDesc(name("bucket_objects"),
			"Current objects (latest versions that are not delete markers) by bucket.", []string{"bucket"}, nil),
		bBytes: prometheus.NewDesc(name("bucket_object_bytes"),
			"Bytes of the current objects by bucket.", []string{"bucket"}, nil),
		bNoncurrent: prometheus.NewDesc(name("bucket_noncurrent_versions"),
			"Noncurrent versions (delete markers not included) by bucket.", []string{"bucket"}, nil),
		bMarkers: prometheus.NewDesc(name("bucket_delete_markers"),
			"Delete markers by bucket, latest or not.", []string{"bucket"}, nil),
		bUploads: prometheus.NewDesc(name("bucket_uploads"),
			"Multipart uploads in progress by bucket.", []string{"bucket"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *blobCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.blobs, c.bytes, c.logical, c.saved, c.errors, c.bObjects, c.bBytes, c.bNoncurrent, c.bMarkers, c.bUploads} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *blobCollector) Collect(ch chan<- prometheus.Metric) {
	st, nErrors, err := c.get()
	ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(nErrors))
	if err != nil {
		// Stale figures would mislead: leave the blob metrics out.
		return
	}
	for tier, ts := range st.Tiers {
		ch <- prometheus.MustNewConstMetric(c.blobs, prometheus.GaugeValue, float64(ts.Blobs), tier)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(ts.Bytes), tier)
	}
	ch <- prometheus.MustNewConstMetric(c.logical, prometheus.GaugeValue, float64(st.LogicalBytes))
	ch <- prometheus.MustNewConstMetric(c.saved, prometheus.GaugeValue, float64(st.DedupSavedBytes()))
	for _, u := range st.Buckets {
		for d, v := range map[*prometheus.Desc]int64{c.bObjects: u.Objects, c.bBytes: u.ObjectBytes,
			c.bNoncurrent: u.NoncurrentVersions, c.bMarkers: u.DeleteMarkers, c.bUploads: u.Uploads} {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), u.Bucket)
		}
	}
}

// get returns the cached statistics, recomputing them when older than the
// TTL. A failure is cached too, so a database outage is not hammered by
// every scrape.
func (c *blobCollector) get() (store.BlobStats, int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.at.IsZero() && c.ttl > 0 && now.Sub(c.at) < c.ttl {
		return c.cached, c.nErrors, c.lastErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), blobStatsTimeout)
	defer cancel()
	st, err := c.src(ctx)
	c.at = now
	if err != nil {
		c.nErrors++
		c.lastErr = fmt.Errorf("blob stats: %w", err)
		c.log.Warn("metrics: blob statistics failed", "err", err)
		return store.BlobStats{}, c.nErrors, c.lastErr
	}
	c.cached, c.lastErr = st, nil
	return st, c.nErrors, nil
}
