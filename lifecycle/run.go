package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/s3gate/s3gate/store"
)

// Store is what the runner needs of the store: store.Store (over any
// metadata engine) implements it.
type Store interface {
	ListBuckets(ctx context.Context) ([]store.Bucket, error)
	BucketConfigs(ctx context.Context, bucket string) (map[string]string, error)
	BucketVersioning(ctx context.Context, bucket string) (string, error)
	ListObjects(ctx context.Context, bucket string, p store.ListParams) (store.ListResult, error)
	GetObject(ctx context.Context, bucket, key string, opts store.GetOptions, head bool) (store.ObjectInfo, *store.ByteRange, store.Reader, error)
	ListObjectVersions(ctx context.Context, bucket string, p store.ListVersionsParams) (store.ListVersionsResult, error)
	DeleteObjectVersion(ctx context.Context, bucket, key string, opts store.DeleteOptions) (store.DeleteVersionResult, error)
	DeleteObjectVersions(ctx context.Context, bucket string, ids []store.ObjectID) ([]store.DeleteVersionResult, error)
	ListMultipartUploads(ctx context.Context, bucket string, p store.ListUploadsParams) (store.ListUploadsResult, error)
	AbortMultipartUpload(ctx context.Context, bucket, key, uploadID string) error
}

// DefaultBatch is the page size of every listing and the largest batch of
// version deletions.
const DefaultBatch = 1000

// Options configure a run.
type Options struct {
	// Day is the length of a lifecycle day (24h; tests and demos shorten it).
	Day time.Duration
	// Batch bounds each listing page and deletion batch (DefaultBatch).
	Batch int
	// Now is the clock the ages are measured on: the database's, which
	// stamped every LastModified and Initiated.
	Now func(ctx context.Context) (time.Time, error)
	// Guard, if set, is checked before every deletion: an error stops the
	// run (the lease was lost).
	Guard  func() error
	Logger *slog.Logger
	// Metrics, if set, counts what runs do.
	Metrics *Metrics
	// beforeExpire, if set (tests), runs between the judgement that a current
	// version expired and its deletion.
	beforeExpire func(bucket, key string)
}

// Stats count what one run did.
type Stats struct {
	Buckets    int64 // buckets with an enabled rule
	Expired    int64 // current versions expired (removed, or a delete marker made)
	Noncurrent int64 // noncurrent versions removed
	Markers    int64 // expired object delete markers removed
	Aborted    int64 // multipart uploads aborted
	Refused    int64 // deletions the store refused (Object Lock, ...): skipped
	Changed    int64 // objects rewritten or gone since they were judged: left alone
}

// Metrics are the runner's counters (s3gate_lifecycle_*).
type Metrics struct {
	Runs, Failed                                   atomic.Int64
	Expired, Noncurrent, Markers, Aborted, Refused atomic.Int64
}

func (m *Metrics) record(st Stats, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.Failed.Add(1)
	} else {
		m.Runs.Add(1)
	}
	m.Expired.Add(st.Expired)
	m.Noncurrent.Add(st.Noncurrent)
	m.Markers.Add(st.Markers)
	m.Aborted.Add(st.Aborted)
	m.Refused.Add(st.Refused)
}

// RunOnce applies every bucket's enabled rules once: it expires current
// versions, removes noncurrent versions and expired delete markers
// (versioned buckets), and aborts stale multipart uploads, each in pages of
// opts.Batch. A deletion the store refuses is counted and skipped; a store
// failure ends the run with an error (the next run starts over: every step
// is judged afresh from the store).
func RunOnce(ctx context.Context, st Store, opts Options) (stats Stats, err error) {
	if opts.Day <= 0 {
		opts.Day = 24 * time.Hour
	}
	if opts.Batch <= 0 || opts.Batch > DefaultBatch {
		opts.Batch = DefaultBatch
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	defer func() { opts.Metrics.record(stats, err) }()
	buckets, err := st.ListBuckets(ctx)
	if err != nil {
		return stats, fmt.Errorf("lifecycle: list buckets: %w", err)
	}
	for _, b := range buckets {
		r := &run{st: st, opts: opts, bucket: b.Name, stats: &stats}
		if err := r.bucket1(ctx); err != nil {
			return stats, fmt.Errorf("lifecycle: bucket %q: %w", b.Name, err)
		}
	}
	return stats, nil
}

type run struct {
	st     Store
	opts   Options
	bucket string
	rules  []*Rule
	now    time.Time
	stats  *Stats
}

func (r *run) bucket1(ctx context.Context) error {
	cfgs, err := r.st.BucketConfigs(ctx, r.bucket)
	if errors.Is(err, store.ErrNoSuchBucket) || errors.Is(err, store.ErrNoBucketConfigs) {
		return nil // deleted meanwhile, or an engine without configurations
	}
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	doc, ok := cfgs[ConfigName]
	if !ok {
		return nil
	}
	c, err := Decode(doc)
	if err != nil {
		return err
	}
	for i := range c.Rules {
		if c.Rules[i].Enabled() {
			r.rules = append(r.rules, &c.Rules[i])
		}
	}
	if len(r.rules) == 0 {
		return nil
	}
	r.stats.Buckets++
	// The clock is read once per bucket, after its rules: a version is
	// judged against a time no later than its judgement.
	if r.now, err = r.opts.Now(ctx); err != nil {
		return fmt.Errorf("clock: %w", err)
	}
	if err := r.expireCurrent(ctx); err != nil {
		return err
	}
	state, err := r.st.BucketVersioning(ctx, r.bucket)
	if err != nil {
		return fmt.Errorf("versioning state: %w", err)
	}
	if state != "" {
		if err := r.expireVersions(ctx); err != nil {
			return err
		}
	}
	return r.abortUploads(ctx)
}

// commonPrefix is the longest prefix shared by the keys of the rules that
// take takes: the listing's prefix.
func (r *run) commonPrefix(takes func(*Rule) bool) (string, bool) {
	p, any := "", false
	for _, rule := range r.rules {
		if !takes(rule) {
			continue
		}
		k := rule.KeyPrefix()
		if !any {
			p, any = k, true
			continue
		}
		for !strings.HasPrefix(k, p) {
			p = p[:len(p)-1]
		}
	}
	for !utf8.ValidString(p) { // cut inside a character: back to its start
		p = p[:len(p)-1]
	}
	return p, any
}

// outcome sorts the error of one deletion: nil (done), errChanged (the
// object is not what was judged), errRefused (the store refused it), or the
// error that ends the run.
var (
	errChanged = errors.New("changed since judged")
	errRefused = errors.New("refused")
)

func outcome(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return err
	case errors.Is(err, store.ErrPreconditionFailed), errors.Is(err, store.ErrNoSuchKey),
		errors.Is(err, store.ErrNoSuchVersion), errors.Is(err, store.ErrNoSuchUpload):
		return errChanged
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrNotImplemented),
		errors.Is(err, store.ErrNoSuchBucket), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	return fmt.Errorf("%w: %w", errRefused, err)
}

// count books one deletion's outcome on done; it returns the error that
// ends the run, if any.
func (r *run) count(ctx context.Context, what string, key string, err error, done *int64) error {
	switch err = outcome(ctx, err); {
	case err == nil:
		*done++
	case errors.Is(err, errChanged):
		r.stats.Changed++
	case errors.Is(err, errRefused):
		r.stats.Refused++
		// The run's summary counts them; each one is for debugging.
		r.opts.Logger.Debug("lifecycle: deletion refused", "bucket", r.bucket, "key", key, "action", what, "err", err)
	default:
		return fmt.Errorf("%s %q: %w", what, key, err)
	}
	return nil
}

func (r *run) guard() error {
	if r.opts.Guard != nil {
		return r.opts.Guard()
	}
	return nil
}

// expireCurrent expires current versions whose Expiration (Days or Date)
// has come. Each deletion names the ETag and last-modified time it judged,
// so an object rewritten meanwhile is never removed.
func (r *run) expireCurrent(ctx context.Context) error {
	has := func(rule *Rule) bool { _, ok := rule.CurrentExpiry(time.Time{}, r.opts.Day); return ok }
	prefix, ok := r.commonPrefix(has)
	if !ok {
		return nil
	}
	p := store.ListParams{Prefix: prefix, MaxKeys: r.opts.Batch}
	for {
		page, err := r.st.ListObjects(ctx, r.bucket, p)
		if err != nil {
			return fmt.Errorf("list objects: %w", err)
		}
		for _, o := range page.Objects {
			due, err := r.currentDue(ctx, o, has)
			if err != nil {
				return err
			}
			if !due {
				continue
			}
			if err := r.guard(); err != nil {
				return err
			}
			if r.opts.beforeExpire != nil {
				r.opts.beforeExpire(r.bucket, o.Key)
			}
			lm := o.LastModified
			_, err = r.st.DeleteObjectVersion(ctx, r.bucket, o.Key, store.DeleteOptions{IfMatch: o.ETag, IfMatchLastModified: &lm})
			if err := r.count(ctx, "expire", o.Key, err, &r.stats.Expired); err != nil {
				return err
			}
		}
		if !page.Truncated {
			return nil
		}
		p.After = page.NextAfter
	}
}

// currentDue reports whether an enabled rule expires the current version o
// now; the object's tags are read only for a rule that needs them.
func (r *run) currentDue(ctx context.Context, o store.ObjectInfo, has func(*Rule) bool) (bool, error) {
	var tags []store.Tag
	read := false
	for _, rule := range r.rules {
		at, ok := rule.CurrentExpiry(o.LastModified, r.opts.Day)
		if !ok || !has(rule) || at.After(r.now) || !rule.matchesKeySize(o.Key, o.Size) {
			continue
		}
		if rule.UsesTags() && !read {
			info, err := r.head(ctx, o.Key, "")
			if err != nil || info == nil {
				return false, err
			}
			if info.ETag != o.ETag {
				return false, nil // rewritten since the listing: judged next run
			}
			tags, read = info.Meta.Tags, true
		}
		if rule.Matches(o.Key, o.Size, tags) {
			return true, nil
		}
	}
	return false, nil
}

// head reads one version's metadata; nil if it is gone.
func (r *run) head(ctx context.Context, key, versionID string) (*store.ObjectInfo, error) {
	info, _, rd, err := r.st.GetObject(ctx, r.bucket, key, store.GetOptions{VersionID: versionID}, true)
	if rd != nil {
		_ = rd.Close() // head=true opens nothing
	}
	if errors.Is(err, store.ErrNoSuchKey) || errors.Is(err, store.ErrNoSuchVersion) || errors.Is(err, store.ErrDeleteMarker) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("head %q: %w", key, err)
	}
	return &info, nil
}

// keyState follows one key through a newest-first listing of its versions.
type keyState struct {
	key        string
	seen       int       // versions of the key so far
	successor  time.Time // LastModified of the previous (newer) version
	noncurrent int       // noncurrent versions so far
	marker     *store.ObjectInfo
}

// expireVersions removes noncurrent versions (NoncurrentVersionExpiration)
// and expired object delete markers (a latest marker with no other
// version), in batches of at most opts.Batch.
func (r *run) expireVersions(ctx context.Context) error {
	takes := func(rule *Rule) bool { return rule.NoncurrentVersionExpiration != nil || rule.ExpiresMarkers() }
	prefix, ok := r.commonPrefix(takes)
	if !ok {
		return nil
	}
	var pending []pendingDelete
	var ks keyState
	p := store.ListVersionsParams{Prefix: prefix, MaxKeys: r.opts.Batch}
	for {
		page, err := r.st.ListObjectVersions(ctx, r.bucket, p)
		if err != nil {
			return fmt.Errorf("list object versions: %w", err)
		}
		for _, v := range page.Versions {
			if v.Key != ks.key {
				pending = r.endKey(&ks, pending)
				ks = keyState{key: v.Key}
			}
			if ks.seen == 0 && v.IsLatest && v.DeleteMarker {
				m := v
				ks.marker = &m
			} else if ks.seen > 0 {
				ks.marker = nil // the marker has other versions
				del, err := r.noncurrentDue(ctx, v, ks.successor, ks.noncurrent)
				if err != nil {
					return err
				}
				if del {
					pending = append(pending, pendingDelete{id: store.ObjectID{Key: v.Key, VersionID: v.VersionID}, marker: false})
				}
				ks.noncurrent++
			}
			ks.seen++
			ks.successor = v.LastModified
		}
		if !page.Truncated {
			pending = r.endKey(&ks, pending)
			return r.flush(ctx, pending, store.ObjectID{})
		}
		// The page's last version is the next page's marker: it is kept
		// for the next flush, so that the listing resumes from a version
		// that still exists.
		cursor := store.ObjectID{Key: page.NextKeyMarker, VersionID: page.NextVersionIDMarker}
		if err := r.flush(ctx, pending, cursor); err != nil {
			return err
		}
		pending = keepCursor(pending, cursor)
		p.KeyMarker, p.VersionIDMarker = page.NextKeyMarker, page.NextVersionIDMarker
	}
}

type pendingDelete struct {
	id     store.ObjectID
	marker bool // an expired delete marker, else a noncurrent version
}

// endKey decides a key's latest delete marker once all its versions were
// seen: with no other version, a rule that expires markers removes it.
func (r *run) endKey(ks *keyState, pending []pendingDelete) []pendingDelete {
	if ks.marker == nil || ks.seen != 1 {
		return pending
	}
	for _, rule := range r.rules {
		if rule.ExpiresMarkers() && rule.Matches(ks.key, 0, nil) {
			return append(pending, pendingDelete{id: store.ObjectID{Key: ks.key, VersionID: ks.marker.VersionID}, marker: true})
		}
	}
	return pending
}

// noncurrentDue reports whether a rule removes the noncurrent version v,
// which became noncurrent at successor and has rank newer noncurrent
// versions before it.
func (r *run) noncurrentDue(ctx context.Context, v store.ObjectInfo, successor time.Time, rank int) (bool, error) {
	var tags []store.Tag
	read := false
	for _, rule := range r.rules {
		n := rule.NoncurrentVersionExpiration
		if n == nil || Due(successor, *n.NoncurrentDays, r.opts.Day).After(r.now) {
			continue
		}
		if n.NewerNoncurrentVersions != nil && rank < *n.NewerNoncurrentVersions {
			continue
		}
		if !rule.matchesKeySize(v.Key, v.Size) {
			continue
		}
		if rule.UsesTags() && !read && !v.DeleteMarker {
			info, err := r.head(ctx, v.Key, v.VersionID)
			if err != nil || info == nil {
				return false, err
			}
			tags, read = info.Meta.Tags, true
		}
		if rule.Matches(v.Key, v.Size, tags) {
			return true, nil
		}
	}
	return false, nil
}

// keepCursor returns the pending deletion of cursor, if any.
func keepCursor(pending []pendingDelete, cursor store.ObjectID) []pendingDelete {
	for _, d := range pending {
		if d.id == cursor {
			return []pendingDelete{d}
		}
	}
	return nil
}

// flush deletes the pending versions but cursor, in batches.
func (r *run) flush(ctx context.Context, pending []pendingDelete, cursor store.ObjectID) error {
	var ids []store.ObjectID
	var kinds []bool
	for _, d := range pending {
		if d.id != cursor || cursor == (store.ObjectID{}) {
			ids, kinds = append(ids, d.id), append(kinds, d.marker)
		}
	}
	for len(ids) > 0 {
		n := min(len(ids), r.opts.Batch, store.MaxDeleteObjects)
		if err := r.guard(); err != nil {
			return err
		}
		res, err := r.st.DeleteObjectVersions(ctx, r.bucket, ids[:n])
		if err != nil {
			return fmt.Errorf("delete versions: %w", err)
		}
		for i, x := range res {
			done := &r.stats.Noncurrent
			what := "expire noncurrent version"
			if kinds[i] {
				done, what = &r.stats.Markers, "remove expired delete marker"
			}
			if err := r.count(ctx, what, x.Key, x.Err, done); err != nil {
				return err
			}
		}
		ids, kinds = ids[n:], kinds[n:]
	}
	return nil
}

// abortUploads aborts the multipart uploads that an
// AbortIncompleteMultipartUpload rule finds stale.
func (r *run) abortUploads(ctx context.Context) error {
	takes := func(rule *Rule) bool { return rule.AbortIncompleteMultipartUpload != nil }
	prefix, ok := r.commonPrefix(takes)
	if !ok {
		return nil
	}
	p := store.ListUploadsParams{Prefix: prefix, MaxUploads: r.opts.Batch}
	for {
		page, err := r.st.ListMultipartUploads(ctx, r.bucket, p)
		if err != nil {
			return fmt.Errorf("list multipart uploads: %w", err)
		}
		for _, u := range page.Uploads {
			if !r.uploadDue(u) {
				continue
			}
			if err := r.guard(); err != nil {
				return err
			}
			err := r.st.AbortMultipartUpload(ctx, r.bucket, u.Key, u.UploadID)
			if err := r.count(ctx, "abort upload", u.Key, err, &r.stats.Aborted); err != nil {
				return err
			}
		}
		if !page.Truncated {
			return nil
		}
		p.KeyMarker, p.UploadIDMarker = page.NextKeyMarker, page.NextUploadIDMarker
	}
}

func (r *run) uploadDue(u store.Upload) bool {
	for _, rule := range r.rules {
		a := rule.AbortIncompleteMultipartUpload
		if a != nil && rule.Matches(u.Key, 0, nil) && !Due(u.Initiated, *a.DaysAfterInitiation, r.opts.Day).After(r.now) {
			return true
		}
	}
	return false
}
