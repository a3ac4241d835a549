package protocol

import (
	"strings"
	"unicode/utf8"

	"github.com/s3gate/s3gate/store"
)

// ListBatch is how many rows one listing statement fetches at most: a full
// page and the one entry that tells whether it is truncated.
const ListBatch = store.MaxListKeys + 1

// Successor returns the smallest string greater than every string that starts
// with p, in byte order (which for valid UTF-8 is code point order), and false
// if there is none. It increments the last code point (skipping surrogates,
// which UTF-8 text cannot hold), carrying past U+10FFFF, so the result is
// valid UTF-8 that both databases accept as text.
func Successor(p string) (string, bool) {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		switch {
		case r == utf8.MaxRune || r == utf8.RuneError && size == 1:
			continue // carry into the previous code point
		case r == 0xD7FF:
			return p + string(rune(0xE000)), true
		default:
			return p + string(r+1), true
		}
	}
	return "", false
}

// Rollup returns the common prefix that key rolls up into, or "" if none.
func Rollup(key, prefix, delim string) string {
	if delim == "" || !strings.HasPrefix(key, prefix) {
		return ""
	}
	if i := strings.Index(key[len(prefix):], delim); i >= 0 {
		return key[:len(prefix)+i+len(delim)]
	}
	return ""
}

// KeyRange is the key interval that a prefix and a lower bound select.
type KeyRange struct {
	From      string
	Inclusive bool // From itself is included
	To        string
	Bounded   bool // To is an exclusive upper bound
}

// ListCursor walks keys under a prefix in order, skipping the rest of a common
// prefix with one index seek to its successor instead of scanning its keys.
// The engine turns Range into its SQL condition.
//
// With DelimNext set, a fetch may make those seeks itself, inside its one
// statement: after a key that rolls up into a common prefix (the key up to
// and including the first Delim after Prefix) it continues at that prefix
// without its final Delim followed by DelimNext, which is the prefix's
// Successor. Rows it does not skip are dropped here.
type ListCursor struct {
	Prefix, Delim string
	DelimNext     string // Successor(Delim), or "" when there is none or no Delim
	Range         KeyRange
	Done          bool // nothing is left to fetch
}

// NewListCursor starts a listing of keys under prefix after the marker after.
func NewListCursor(prefix, delim, after string) *ListCursor {
	c := &ListCursor{Prefix: prefix, Delim: delim}
	if delim != "" {
		c.DelimNext, _ = Successor(delim)
	}
	c.Range.From, c.Range.Inclusive = prefix, true
	if to, ok := Successor(prefix); ok && prefix != "" {
		c.Range.To, c.Range.Bounded = to, true
	}
	if after >= c.Range.From {
		c.Range.From, c.Range.Inclusive = after, false
		// A marker that is (or lies inside) a common prefix resumes after all
		// of that prefix: the prefix was already returned.
		if cp := Rollup(after, prefix, delim); cp != "" {
			c.SkipPast(cp)
		}
	}
	if c.Range.Bounded && c.Range.From >= c.Range.To {
		c.Done = true
	}
	return c
}

// SkipPast moves the cursor beyond every key starting with cp.
func (c *ListCursor) SkipPast(cp string) {
	next, ok := Successor(cp)
	if !ok || (c.Range.Bounded && next >= c.Range.To) {
		c.Done = true
		return
	}
	c.Range.From, c.Range.Inclusive = next, true
}

// Advance moves the cursor past key.
func (c *ListCursor) Advance(key string) { c.Range.From, c.Range.Inclusive = key, false }

// FetchObjects returns, in key order, at most limit objects of the cursor's
// current Range.
type FetchObjects func(c *ListCursor, limit int) ([]store.ObjectInfo, error)

// ListObjects pages a ListObjects answer out of fetch. Objects and common
// prefixes count together towards MaxKeys, as in S3; a common prefix costs one
// seek past it rather than a scan of its keys. Errors of fetch come back as
// they are.
func ListObjects(p store.ListParams, fetch FetchObjects) (store.ListResult, error) {
	var res store.ListResult
	maxKeys := p.MaxKeys
	if maxKeys <= 0 || maxKeys > store.MaxListKeys {
		maxKeys = store.MaxListKeys
	}
	c := NewListCursor(p.Prefix, p.Delimiter, p.After)
	count, last, lastCP := 0, "", ""
	for !c.Done && !res.Truncated {
		limit := min(maxKeys-count+1, ListBatch)
		batch, err := fetch(c, limit)
		if err != nil {
			return res, err
		}
		if len(batch) < limit {
			c.Done = true // the interval holds nothing beyond this batch
		}
		for _, o := range batch {
			if lastCP != "" && strings.HasPrefix(o.Key, lastCP) {
				continue // under the prefix just returned: the fetch did not skip it
			}
			if count == maxKeys {
				res.Truncated = true
				break
			}
			count++
			if cp := Rollup(o.Key, p.Prefix, p.Delimiter); cp != "" {
				res.CommonPrefixes = append(res.CommonPrefixes, cp)
				last, lastCP = cp, cp
				c.SkipPast(cp) // for the next fetch, if this batch was full
				continue
			}
			res.Objects = append(res.Objects, o)
			last = o.Key
			c.Advance(o.Key)
		}
	}
	if res.Truncated {
		res.NextAfter = last
	}
	return res, nil
}

// UploadMarker is a position inside one key's uploads: the uploads of Key
// initiated after UploadID (ties broken by id).
type UploadMarker struct {
	Key, UploadID string
}

// FetchUploads returns, ordered by key, initiation time and id, at most limit
// uploads of the cursor's current Range and, if tail is not nil, the uploads
// after tail as well. With the cursor's DelimNext set it may skip past common
// prefixes as FetchObjects may: a key that rolls up needs one upload.
type FetchUploads func(c *ListCursor, tail *UploadMarker, limit int) ([]store.Upload, error)

// ListUploads pages a ListMultipartUploads answer out of fetch. Uploads and
// common prefixes count together towards MaxUploads; a common prefix costs
// one seek past it, as in ListObjects. Errors of fetch come back as they are.
func ListUploads(p store.ListUploadsParams, fetch FetchUploads) (store.ListUploadsResult, error) {
	var res store.ListUploadsResult
	maxUploads := p.MaxUploads
	if maxUploads <= 0 || maxUploads > store.MaxListKeys {
		maxUploads = store.MaxListKeys
	}
	c := NewListCursor(p.Prefix, p.Delimiter, p.KeyMarker)
	// With an upload-id marker, the marker key's later uploads come first.
	var tail *UploadMarker
	if p.KeyMarker != "" && p.UploadIDMarker != "" && Rollup(p.KeyMarker, p.Prefix, p.Delimiter) == "" &&
		strings.HasPrefix(p.KeyMarker, p.Prefix) {
		tail = &UploadMarker{Key: p.KeyMarker, UploadID: p.UploadIDMarker}
	}
	count := 0
	var lastKey, lastID, lastCP string
	for !c.Done && !res.Truncated {
		limit := min(maxUploads-count+1, ListBatch)
		batch, err := fetch(c, tail, limit)
		if err != nil {
			return res, err
		}
		tail = nil
		if len(batch) < limit {
			c.Done = true // the interval holds nothing beyond this batch
		}
		for _, u := range batch {
			if lastCP != "" && strings.HasPrefix(u.Key, lastCP) {
				continue // under the prefix just returned: the fetch did not skip it
			}
			if count == maxUploads {
				res.Truncated = true
				break
			}
			count++
			if cp := Rollup(u.Key, p.Prefix, p.Delimiter); cp != "" {
				res.CommonPrefixes = append(res.CommonPrefixes, cp)
				lastKey, lastID, lastCP = cp, "", cp
				c.SkipPast(cp) // for the next fetch, if this batch was full
				continue
			}
			res.Uploads = append(res.Uploads, u)
			lastKey, lastID = u.Key, u.UploadID
			// Later uploads of the same key may follow in the next batch: resume
			// at this key, after this upload.
			c.Advance(u.Key)
		}
		if !c.Done && !res.Truncated && lastID != "" {
			// The batch may have ended inside a key's uploads: continue after
			// the last one.
			tail = &UploadMarker{Key: lastKey, UploadID: lastID}
		}
	}
	if res.Truncated {
		res.NextKeyMarker, res.NextUploadIDMarker = lastKey, lastID
	}
	return res, nil
}
