// Package metacache caches what every request reads of the metadata store
// and rarely changes: a bucket's configuration documents and access-key rows.
// It is a decorator over the engine (Wrap); invalidation comes from the
// database itself (Listen: PostgreSQL NOTIFY from triggers, migration 12), so
// a change made anywhere (another instance, `s3gate admin`, psql) drops the
// entry as soon as this instance has read the notification. While the
// listening session is down, the cache is off: every read goes to the
// database (docs/adr/018-metadata-cache.md).
package metacache

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s3gate/s3gate/store"
)

// Channel is the notification channel of migration 12's triggers.
const Channel = "s3gate_metadata"

// Defaults of Options.
const (
	// DefaultMaxEntries bounds buckets and keys, each.
	DefaultMaxEntries = 10000
	// DefaultTTL is the backstop: an entry older than this is read again
	// even if no notification came.
	DefaultTTL = time.Minute
)

// Metrics counts what the cache does; the server exports them.
type Metrics struct {
	Hits, Misses, Invalidations atomic.Int64
	// Resets counts the times the cache turned off (listening lost) and
	// was emptied.
	Resets atomic.Int64
}

// Options tune a Cache; zero values take the defaults.
type Options struct {
	MaxEntries int
	TTL        time.Duration
	Metrics    *Metrics
	// now is the clock (tests).
	now func() time.Time
}

type entry[V any] struct {
	v      V
	filled time.Time
}

// Cache holds the entries and the rules of their validity. Every read
// captures the epoch before it asks the database and fills only if the
// epoch is unchanged afterwards: a notification processed in between (a
// commit the read may or may not have seen) bumps the epoch, so a read that
// overlapped an invalidation never stores what it read. The cache is off
// until SetOn, and again after SetOff.
type Cache struct {
	mu      sync.Mutex
	epoch   uint64
	on      bool
	buckets map[string]entry[map[string]string]
	keys    map[string]entry[store.AccessKey]
	max     int
	ttl     time.Duration
	now     func() time.Time
	m       *Metrics
	// onInvalidate, if set, runs after each notification heard is applied
	// (a test hook, called without the lock).
	onInvalidate func(payload string)
}

// New returns an empty cache, off.
func New(o Options) *Cache {
	c := &Cache{max: o.MaxEntries, ttl: o.TTL, now: o.now, m: o.Metrics,
		buckets: map[string]entry[map[string]string]{}, keys: map[string]entry[store.AccessKey]{}}
	if c.max <= 0 {
		c.max = DefaultMaxEntries
	}
	if c.ttl <= 0 {
		c.ttl = DefaultTTL
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.m == nil {
		c.m = &Metrics{}
	}
	return c
}

// SetOn empties the cache, bumps the epoch and turns it on: called once
// LISTEN is in place, so that every later commit will be heard and no read
// that started before it can fill.
func (c *Cache) SetOn() { c.reset(true) }

// SetOff empties the cache and turns it off (listening lost): until SetOn,
// reads go to the database and nothing is stored.
func (c *Cache) SetOff() { c.reset(false) }

func (c *Cache) reset(on bool) {
	c.mu.Lock()
	c.epoch++
	clear(c.buckets)
	clear(c.keys)
	wasOn := c.on
	c.on = on
	c.mu.Unlock()
	if wasOn && !on {
		c.m.Resets.Add(1)
	}
}

// On reports whether the cache serves and stores entries.
func (c *Cache) On() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.on
}

// Invalidate drops what payload names: "b:<bucket>" the bucket, "k:<id>"
// the key, anything else everything. The epoch moves in every case.
func (c *Cache) Invalidate(payload string) {
	c.mu.Lock()
	c.epoch++
	switch kind, name, _ := strings.Cut(payload, ":"); kind {
	case "b":
		delete(c.buckets, name)
	case "k":
		delete(c.keys, name)
	default:
		clear(c.buckets)
		clear(c.keys)
	}
	c.mu.Unlock()
	c.m.Invalidations.Add(1)
}

// notified applies a notification heard by Listen.
func (c *Cache) notified(payload string) {
	c.Invalidate(payload)
	c.mu.Lock()
	hook := c.onInvalidate
	c.mu.Unlock()
	if hook != nil {
		hook(payload)
	}
}

// lookup returns a fresh entry of m and, on a miss, the epoch the caller's
// read must find unchanged to fill.
func lookup[V any](c *Cache, m map[string]entry[V], name string) (v V, hit bool, epoch uint64, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := m[name]; ok && c.on && c.now().Sub(e.filled) < c.ttl {
		c.m.Hits.Add(1)
		return e.v, true, 0, true
	}
	c.m.Misses.Add(1)
	return v, false, c.epoch, c.on
}

// fill stores v under name if no invalidation happened since epoch was
// read and the cache is still on; at the bound it first drops an arbitrary
// entry (map order), which keeps the cost of a full cache flat.
func fill[V any](c *Cache, m map[string]entry[V], name string, v V, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on || c.epoch != epoch {
		return
	}
	if _, ok := m[name]; !ok && len(m) >= c.max {
		for k := range m {
			delete(m, k)
			break
		}
	}
	m[name] = entry[V]{v: v, filled: c.now()}
}

// copyKey returns k with its own Buckets slice, so that no caller can change
// the cached one.
func copyKey(k store.AccessKey) store.AccessKey {
	k.Buckets = append([]string(nil), k.Buckets...)
	return k
}

// copyConfigs returns a map the caller may change.
func copyConfigs(m map[string]string) map[string]string { return maps.Clone(m) }
