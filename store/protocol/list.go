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
		if res.Objects == nil {
			// One allocation for the page, not a growing copy of its
			// entries: most pages are their first batch.
			res.Objects = make([]store.ObjectInfo, 0, min(len(batch), maxKeys))
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

// Marker is a position inside one key's entries (its uploads, its
// versions): the entries of Key that follow the one named ID.
type Marker struct {
	Key, ID string
}

// FetchUploads returns, ordered by key, initiation time and id, at most limit
// uploads of the cursor's current Range and, if tail is not nil, the uploads
// after tail as well. With the cursor's DelimNext set it may skip past common
// prefixes as FetchObjects may: a key that rolls up needs one upload.
type FetchUploads func(c *ListCursor, tail *Marker, limit int) ([]store.Upload, error)

// ListUploads pages a ListMultipartUploads answer out of fetch. Uploads and
// common prefixes count together towards MaxUploads; a common prefix costs
// one seek past it, as in ListObjects. Errors of fetch come back as they are.
func ListUploads(p store.ListUploadsParams, fetch FetchUploads) (store.ListUploadsResult, error) {
	pg, err := listKeyed(p.Prefix, p.Delimiter, p.KeyMarker, p.UploadIDMarker, p.MaxUploads, fetch,
		func(u store.Upload) (string, string) { return u.Key, u.UploadID }, nil)
	return store.ListUploadsResult{Uploads: pg.entries, CommonPrefixes: pg.prefixes, Truncated: pg.truncated,
		NextKeyMarker: pg.nextKey, NextUploadIDMarker: pg.nextID}, err
}

// keyedPage is one page of entries listed by key and, within a key, in an
// order of their own: uploads or versions.
type keyedPage[T any] struct {
	entries         []T
	prefixes        []string
	truncated       bool
	nextKey, nextID string
}

// listKeyed pages entries out of fetch: entries and common prefixes count
// together towards maxKeys; a common prefix costs one seek past it; a key
// marker with an id marker resumes inside the marker key (fetch's tail),
// and so does every fetch after one that ended inside a key. ident names an
// entry's key and id; first, if not nil, is told of each entry whether it
// comes first of its key (an entry after a tail never does). Errors of fetch
// come back as they are.
func listKeyed[T any](prefix, delim, keyMarker, idMarker string, maxKeys int,
	fetch func(c *ListCursor, tail *Marker, limit int) ([]T, error), ident func(T) (string, string), first func(*T, bool)) (keyedPage[T], error) {
	var res keyedPage[T]
	if maxKeys <= 0 || maxKeys > store.MaxListKeys {
		maxKeys = store.MaxListKeys
	}
	c := NewListCursor(prefix, delim, keyMarker)
	// With an id marker, the marker key's later entries come first.
	var tail *Marker
	if keyMarker != "" && idMarker != "" && Rollup(keyMarker, prefix, delim) == "" && strings.HasPrefix(keyMarker, prefix) {
		tail = &Marker{Key: keyMarker, ID: idMarker}
	}
	count := 0
	var lastKey, lastID, lastCP string
	for !c.Done && !res.truncated {
		limit := min(maxKeys-count+1, ListBatch)
		batch, err := fetch(c, tail, limit)
		if err != nil {
			return res, err
		}
		prevKey := "" // no key is empty
		if tail != nil {
			prevKey = tail.Key
		}
		tail = nil
		if len(batch) < limit {
			c.Done = true // the interval holds nothing beyond this batch
		}
		for _, e := range batch {
			key, id := ident(e)
			if first != nil {
				first(&e, key != prevKey)
			}
			prevKey = key
			if lastCP != "" && strings.HasPrefix(key, lastCP) {
				continue // under the prefix just returned: the fetch did not skip it
			}
			if count == maxKeys {
				res.truncated = true
				break
			}
			count++
			if cp := Rollup(key, prefix, delim); cp != "" {
				res.prefixes = append(res.prefixes, cp)
				lastKey, lastID, lastCP = cp, "", cp
				c.SkipPast(cp) // for the next fetch, if this batch was full
				continue
			}
			res.entries = append(res.entries, e)
			lastKey, lastID = key, id
			// Later entries of the same key may follow in the next batch:
			// resume at this key, after this entry.
			c.Advance(key)
		}
		if !c.Done && !res.truncated && lastID != "" {
			// The batch may have ended inside a key's entries: continue
			// after the last one.
			tail = &Marker{Key: lastKey, ID: lastID}
		}
	}
	if res.truncated {
		res.nextKey, res.nextID = lastKey, lastID
	}
	return res, nil
}
