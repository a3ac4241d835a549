package protocol

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// The versioning rules (ADR 014). The table of current objects holds every
// key's latest version when it is an object; every other version (noncurrent
// ones, and all delete markers) is a noncurrent version row, ordered within
// its key by a sequence number. A version is removed for good only in
// deleteOne, so that a retention check can be added in one place.

// SetBucketVersioning is store.VersionStore's SetBucketVersioning over the
// engine's bucket configurations (store.BucketConfigVersioning): one
// statement, visible at once to every write, which reads it in the statement
// that locks the current row.
func SetBucketVersioning(ctx context.Context, c store.BucketConfigStore, bucket, status string) error {
	if status != store.VersioningEnabled && status != store.VersioningSuspended {
		return fmt.Errorf("set versioning of %q: %w: versioning status %q", bucket, store.ErrInvalidArgument, status)
	}
	if err := c.PutBucketConfig(ctx, bucket, store.BucketConfigVersioning, status); err != nil {
		return fmt.Errorf("set versioning of %q: %w", bucket, err)
	}
	return nil
}

// BucketVersioning is store.VersionStore's BucketVersioning over the
// engine's bucket configurations.
func BucketVersioning(ctx context.Context, c store.BucketConfigStore, bucket string) (string, error) {
	cfgs, err := c.BucketConfigs(ctx, bucket)
	if err != nil {
		return "", fmt.Errorf("versioning of %q: %w", bucket, err)
	}
	return cfgs[store.BucketConfigVersioning], nil
}

// checkDelete applies DeleteOptions' conditions to the version a delete
// would remove (exists false: there is none).
func checkDelete(opts store.DeleteOptions, exists bool, etag string, lm time.Time) error {
	if opts.IfMatch == "" && opts.IfMatchLastModified == nil {
		return nil
	}
	switch {
	case !exists:
		return fmt.Errorf("%w: no such version to delete", store.ErrPreconditionFailed)
	case opts.IfMatch != "" && opts.IfMatch != "*" && strings.Trim(opts.IfMatch, `"`) != etag:
		return fmt.Errorf("%w: If-Match %s does not match", store.ErrPreconditionFailed, opts.IfMatch)
	case opts.IfMatchLastModified != nil && !opts.IfMatchLastModified.Equal(lm):
		return fmt.Errorf("%w: the version was modified at %s", store.ErrPreconditionFailed, lm.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// deleteOne deletes one key or version in tx, under the key's object lock:
// a version id removes that version for good (and promotes the next newest
// when the latest went); without one, a bucket that never had versioning
// removes the object, an enabled one adds a delete marker over it, a
// suspended one replaces the null version with a null delete marker.
func deleteOne(ctx context.Context, tx Tx, bucket, key string, opts store.DeleteOptions) (store.DeleteVersionResult, error) {
	res := store.DeleteVersionResult{Key: key}
	if opts.VersionID != "" {
		return deleteVersion(ctx, tx, bucket, key, opts)
	}
	cur, err := tx.CurrentObject(ctx, bucket, key)
	if err != nil {
		return res, err
	}
	if err := checkDelete(opts, cur.Exists, cur.ETag, cur.LastModified); err != nil {
		return res, err
	}
	if cur.Versioning == "" {
		if cur.Exists {
			err = tx.DeleteObjects(ctx, bucket, []string{key})
		}
		return res, err
	}
	if cur.demotes() {
		if _, err := tx.DemoteCurrent(ctx, bucket, key); err != nil {
			return res, err
		}
	}
	if cur.Exists {
		if err := tx.DeleteObjects(ctx, bucket, []string{key}); err != nil {
			return res, err
		}
	}
	res.VersionID = store.NewVersionID()
	if cur.Versioning == store.VersioningSuspended {
		res.VersionID = store.NullVersion
		if !cur.Exists || cur.VersionID != store.NullVersion {
			if _, err := tx.DropVersion(ctx, bucket, key, store.NullVersion); err != nil {
				return res, err
			}
		}
	}
	res.DeleteMarker = true
	_, err = tx.PutMarker(ctx, bucket, key, res.VersionID)
	return res, err
}

// deleteVersion removes the version opts.VersionID for good; one that does
// not exist is a success. When the key is left without a current object its
// newest remaining version, if an object, becomes current.
func deleteVersion(ctx context.Context, tx Tx, bucket, key string, opts store.DeleteOptions) (store.DeleteVersionResult, error) {
	res := store.DeleteVersionResult{Key: key, VersionID: opts.VersionID}
	v, err := tx.FindVersion(ctx, bucket, key, opts.VersionID)
	if err != nil {
		return res, err
	}
	if err := checkDelete(opts, v.Found, v.ETag, v.LastModified); err != nil || !v.Found {
		return res, err
	}
	res.DeleteMarker = v.DeleteMarker
	if v.Current {
		err = tx.DeleteObjects(ctx, bucket, []string{key})
	} else {
		_, err = tx.DropVersion(ctx, bucket, key, opts.VersionID)
	}
	if err != nil {
		return res, err
	}
	if v.Current || !v.HasCurrent {
		_, err = tx.PromoteNewest(ctx, bucket, key)
	}
	return res, err
}

// ReplaceObjectMeta implements store.VersionStore: under the object's lock,
// the version's metadata is replaced while its ETag is etag ("" skips the
// check); its content, version id and last-modified time stay.
func (s *Store) ReplaceObjectMeta(ctx context.Context, bucket, key, versionID, etag string, meta store.ObjectMeta) (store.ObjectInfo, error) {
	var info store.ObjectInfo
	err := s.dialect.Write(ctx, []int64{fleet.ObjectLockKey(bucket, key)}, func(tx Tx) error {
		r, err := resolve(ctx, tx, bucket, key, versionID, false)
		if err != nil {
			return err
		}
		if etag != "" && r.Info.ETag != etag {
			return fmt.Errorf("%w: the object changed (ETag %s, expected %s)", store.ErrPreconditionFailed, r.Info.ETag, etag)
		}
		if err := tx.ReplaceMeta(ctx, bucket, key, r.Seq, meta); err != nil {
			return err
		}
		info = r.Info
		info.Meta = meta
		return nil
	})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("replace metadata of %s/%s: %w", bucket, key, err)
	}
	return info, nil
}

// VersionMarker is a position inside one key's versions: the versions of Key
// older than VersionID.
type VersionMarker struct {
	Key, VersionID string
}

// FetchVersions returns, ordered by key and newest first within a key, at
// most limit versions of the cursor's current Range and, if tail is not nil,
// the versions of tail's key older than its version first (VersionID and
// DeleteMarker set; IsLatest is ListVersions'). With the cursor's DelimNext
// set it may skip past common prefixes as FetchObjects may.
type FetchVersions func(c *ListCursor, tail *VersionMarker, limit int) ([]store.ObjectInfo, error)

// ListVersions pages a ListObjectVersions answer out of fetch, as
// ListUploads pages uploads: versions and common prefixes count together
// towards MaxKeys; a common prefix costs one seek past it. A version is the
// latest of its key when it comes first of its key, which a fetch that
// starts at a key (not inside one) sees. Errors of fetch come back as they
// are.
func ListVersions(p store.ListVersionsParams, fetch FetchVersions) (store.ListVersionsResult, error) {
	var res store.ListVersionsResult
	maxKeys := p.MaxKeys
	if maxKeys <= 0 || maxKeys > store.MaxListKeys {
		maxKeys = store.MaxListKeys
	}
	c := NewListCursor(p.Prefix, p.Delimiter, p.KeyMarker)
	var tail *VersionMarker
	if p.KeyMarker != "" && p.VersionIDMarker != "" && Rollup(p.KeyMarker, p.Prefix, p.Delimiter) == "" &&
		strings.HasPrefix(p.KeyMarker, p.Prefix) {
		tail = &VersionMarker{Key: p.KeyMarker, VersionID: p.VersionIDMarker}
	}
	count := 0
	var lastKey, lastID, lastCP string
	for !c.Done && !res.Truncated {
		limit := min(maxKeys-count+1, ListBatch)
		batch, err := fetch(c, tail, limit)
		if err != nil {
			return res, err
		}
		prevKey := "" // no key is empty
		if tail != nil {
			prevKey = tail.Key // a version after a marker is never the latest
		}
		tail = nil
		if len(batch) < limit {
			c.Done = true // the interval holds nothing beyond this batch
		}
		for _, v := range batch {
			v.IsLatest, prevKey = v.Key != prevKey, v.Key
			if lastCP != "" && strings.HasPrefix(v.Key, lastCP) {
				continue // under the prefix just returned: the fetch did not skip it
			}
			if count == maxKeys {
				res.Truncated = true
				break
			}
			count++
			if cp := Rollup(v.Key, p.Prefix, p.Delimiter); cp != "" {
				res.CommonPrefixes = append(res.CommonPrefixes, cp)
				lastKey, lastID, lastCP = cp, "", cp
				c.SkipPast(cp) // for the next fetch, if this batch was full
				continue
			}
			res.Versions = append(res.Versions, v)
			lastKey, lastID = v.Key, v.VersionID
			c.Advance(v.Key) // older versions of the key follow as the tail
		}
		if !c.Done && !res.Truncated && lastID != "" {
			tail = &VersionMarker{Key: lastKey, VersionID: lastID}
		}
	}
	if res.Truncated {
		res.NextKeyMarker, res.NextVersionIDMarker = lastKey, lastID
	}
	return res, nil
}
