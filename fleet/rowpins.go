package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Row pin defaults and bounds.
const (
	// DefaultPinTTL is the expiry of a row pin (S3GATE_PIN_TTL); its guard
	// renews it every TTL/3.
	DefaultPinTTL = 30 * time.Second
	// MinPinTTL is the shortest TTL accepted: a renewal every TTL/3 must fit
	// a round trip on a loaded database comfortably.
	MinPinTTL = 300 * time.Millisecond
	// RenewBatch is the most rows one renewal statement extends.
	RenewBatch = 1000
	// closeTimeout bounds the statement that drops the owner's rows on Close.
	closeTimeout = 5 * time.Second
)

// ErrBlobGone is what a RowPinStore reports when the blob to pin has no row
// (collected after the object was resolved): the caller resolves again.
var ErrBlobGone = errors.New("blob row gone")

// RowPinStore is the SQL of row pins (store/pg implements it on its pool).
// Every expiry is in database time (clock_timestamp() + ttl).
type RowPinStore interface {
	// Pin inserts the (blob, owner) row expiring ttl from now, or renews it if
	// it exists and has not expired, in one short transaction; an expired row
	// is deleted and a fresh one inserted, never renewed. A missing blob row
	// is ErrBlobGone.
	Pin(ctx context.Context, blobID int64, owner string, ttl time.Duration) error
	// Renew extends to ttl from now the rows of owner among ids that have not
	// expired, and returns the ids it extended.
	Renew(ctx context.Context, owner string, ids []int64, ttl time.Duration) ([]int64, error)
	// DropOwner deletes every row of owner.
	DropOwner(ctx context.Context, owner string) error
}

// RowPinMetrics are the counters of row pins (exported by the server as
// s3gate_pins{kind="row"}, s3gate_pin_renewals_total and
// s3gate_pin_renewal_failures_total).
type RowPinMetrics struct {
	// Held is a gauge: blobs this instance holds a live row pin of.
	Held atomic.Int64
	// Renewals counts rows renewed; RenewalFailures renewal statements that
	// failed (each leaves its rows to expire unless a later one succeeds in
	// time).
	Renewals        atomic.Int64
	RenewalFailures atomic.Int64
	// Rounds counts renewal rounds (one per TTL/3 while any pin is held).
	Rounds atomic.Int64
}

// RowPinsConfig configures NewRowPins.
type RowPinsConfig struct {
	// Store runs the statements.
	Store RowPinStore
	// Owner is this instance's id in the rows. In fleet mode it is the
	// instance id of the registry; "" makes a random one (NewOwnerID).
	Owner string
	// TTL is the expiry of a row (default DefaultPinTTL).
	TTL time.Duration
	// Metrics receives the counters; nil allocates them.
	Metrics *RowPinMetrics
	// OnError receives renewal failures (the caller logs them): they are no
	// error of any request.
	OnError func(error)
}

// NewOwnerID returns a fresh owner id: host, process id and 64 random bits,
// so that two processes (or one restarted) never share rows.
func NewOwnerID() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// RowPins are pins as rows (blob, owner, expiry), reference-counted in
// process: one row per blob however many streams and puts of this instance
// hold it. One shared loop renews every held row every TTL/3, in batched
// statements (ADR 010); a guard whose row was not renewed before its local
// deadline is lost for good. Release drops a reference; the last one stops
// the row's renewal and lets it expire (GC reaps expired rows). RowPins is a
// Pinner: Acquire commits a row in its own short transaction.
type RowPins struct {
	store   RowPinStore
	owner   string
	ttl     time.Duration
	every   time.Duration
	metrics *RowPinMetrics
	onError func(error)
	epoch   time.Time // monotonic origin of the deadlines

	mu      sync.Mutex
	entries map[int64]*rowEntry // the live entry of each blob
	closed  bool

	stop chan struct{}
	done chan struct{}
}

// rowEntry is one blob's row as this instance holds it.
type rowEntry struct {
	blob int64
	refs int // guarded by RowPins.mu
	// deadline is the local end of validity, as time since epoch: the send
	// time of the last statement that set the row's expiry, plus the TTL. The
	// statement ran after it was sent, so the row expires no sooner (in
	// database time, which advances at the same rate).
	deadline atomic.Int64
	// lost is latched once the deadline passed or a renewal found no row: the
	// entry is never valid again, whatever a later statement does.
	lost atomic.Bool
}

// NewRowPins starts the renewal loop; Close stops it.
func NewRowPins(cfg RowPinsConfig) (*RowPins, error) {
	if cfg.Store == nil {
		return nil, errors.New("row pins: no store")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultPinTTL
	}
	if cfg.TTL < MinPinTTL {
		return nil, fmt.Errorf("row pins: TTL %s is under the minimum %s", cfg.TTL, MinPinTTL)
	}
	if cfg.Owner == "" {
		cfg.Owner = NewOwnerID()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = new(RowPinMetrics)
	}
	p := &RowPins{store: cfg.Store, owner: cfg.Owner, ttl: cfg.TTL, every: cfg.TTL / 3, metrics: cfg.Metrics,
		onError: cfg.OnError, epoch: time.Now(), entries: make(map[int64]*rowEntry),
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop()
	return p, nil
}

// Owner is the owner id of this instance's rows.
func (p *RowPins) Owner() string { return p.owner }

// TTL is the expiry of a row.
func (p *RowPins) TTL() time.Duration { return p.ttl }

// Metrics are the counters.
func (p *RowPins) Metrics() *RowPinMetrics { return p.metrics }

// Now is the clock of Adopt's sent argument: read it just before sending the
// statement that sets a row's expiry.
func (p *RowPins) Now() time.Duration { return time.Since(p.epoch) }

func (e *rowEntry) valid(now time.Duration) bool {
	if e.lost.Load() {
		return false
	}
	if now >= time.Duration(e.deadline.Load()) {
		e.lost.Store(true)
		return false
	}
	return true
}

// Acquire pins a blob for a stream: an entry this instance already holds is
// shared, else a row is committed first. A blob whose row is gone is an error
// wrapping ErrBlobGone.
func (p *RowPins) Acquire(ctx context.Context, blobID int64) (Pin, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("pin blob %d: %w", blobID, ErrPinsClosed)
	}
	if e := p.entries[blobID]; e != nil && e.valid(p.Now()) {
		e.refs++
		p.mu.Unlock()
		return &rowPin{p: p, e: e}, nil
	}
	p.mu.Unlock()
	sent := p.Now()
	if err := p.store.Pin(ctx, blobID, p.owner, p.ttl); err != nil {
		return nil, fmt.Errorf("pin blob %d: %w", blobID, err)
	}
	return p.Adopt(blobID, sent), nil
}

// Adopt returns a guard of the row of blobID that a committed transaction
// inserted or renewed with a statement sent at sent (Now()). It shares the
// blob's live entry, or starts a new one: an entry already lost stays lost,
// and its handles with it.
func (p *RowPins) Adopt(blobID int64, sent time.Duration) Pin {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[blobID]
	if e == nil || !e.valid(p.Now()) {
		fresh := &rowEntry{blob: blobID}
		switch {
		case p.closed:
			fresh.lost.Store(true)
		case e == nil:
			p.metrics.Held.Add(1)
			fallthrough
		default:
			p.entries[blobID] = fresh
		}
		e = fresh
	}
	if d := int64(sent + p.ttl); d > e.deadline.Load() {
		e.deadline.Store(d)
	}
	e.refs++
	return &rowPin{p: p, e: e}
}

// release drops one reference; the last one stops the renewal of the row.
func (p *RowPins) release(e *rowEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.refs--
	if e.refs == 0 && p.entries[e.blob] == e {
		delete(p.entries, e.blob)
		p.metrics.Held.Add(-1)
	}
}

// loop renews every TTL/3, the next round scheduled after the previous one
// ended (a slow database never queues rounds).
func (p *RowPins) loop() {
	defer close(p.done)
	t := time.NewTimer(p.every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.renewOnce()
		t.Reset(p.every)
	}
}

// renewOnce renews the held rows in batches. A failed batch is counted and
// reported; its entries stay valid until their deadline, so that one slow
// round is no loss.
func (p *RowPins) renewOnce() {
	p.mu.Lock()
	live := make([]*rowEntry, 0, len(p.entries))
	for _, e := range p.entries {
		if e.valid(p.Now()) {
			live = append(live, e)
		} else {
			delete(p.entries, e.blob)
			p.metrics.Held.Add(-1)
		}
	}
	p.mu.Unlock()
	if len(live) == 0 {
		return
	}
	p.metrics.Rounds.Add(1)
	for len(live) > 0 {
		batch := live[:min(len(live), RenewBatch)]
		live = live[len(batch):]
		p.renewBatch(batch)
	}
}

func (p *RowPins) renewBatch(batch []*rowEntry) {
	ids := make([]int64, len(batch))
	for i, e := range batch {
		ids[i] = e.blob
	}
	sent := p.Now()
	ctx, cancel := context.WithTimeout(context.Background(), p.every)
	got, err := p.store.Renew(ctx, p.owner, ids, p.ttl)
	cancel()
	if err != nil {
		p.metrics.RenewalFailures.Add(1)
		if p.onError != nil {
			p.onError(fmt.Errorf("row pins: renew %d row(s): %w", len(ids), err))
		}
		return
	}
	p.metrics.Renewals.Add(int64(len(got)))
	renewed := make(map[int64]bool, len(got))
	for _, id := range got {
		renewed[id] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range batch {
		// An entry whose deadline passed before this answer stays lost even if
		// its row was still there: a lost handle is never revived.
		if !renewed[e.blob] || !e.valid(p.Now()) {
			e.lost.Store(true)
			continue
		}
		if d := int64(sent + p.ttl); d > e.deadline.Load() {
			e.deadline.Store(d)
		}
	}
}

// Close stops the renewal loop, invalidates every pin and drops this owner's
// rows. Pins still held are invalid; releasing them later is harmless.
func (p *RowPins) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, e := range p.entries {
		e.lost.Store(true)
	}
	p.metrics.Held.Add(-int64(len(p.entries)))
	p.entries = map[int64]*rowEntry{}
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := p.store.DropOwner(ctx, p.owner); err != nil {
		return fmt.Errorf("row pins: drop the rows of %s (they expire): %w", p.owner, err)
	}
	return nil
}

type rowPin struct {
	p        *RowPins
	e        *rowEntry
	released atomic.Bool
}

func (r *rowPin) Valid() bool { return !r.released.Load() && r.e.valid(r.p.Now()) }

func (r *rowPin) Release() {
	if r.released.CompareAndSwap(false, true) {
		r.p.release(r.e)
	}
}
