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
	cfgs, err := c.BucketConfigs(ctx, bucket)
	if err != nil {
		return fmt.Errorf("set versioning of %q: %w", bucket, err)
	}
	if err := CheckVersioningChange(cfgs[store.BucketConfigObjectLock], status); err != nil {
		return fmt.Errorf("set versioning of %q: %w", bucket, err)
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
// would remove (exists false: there is none, which is missing).
func checkDelete(opts store.DeleteOptions, exists bool, etag string, lm time.Time, missing error) error {
	if opts.IfMatch == "" && opts.IfMatchLastModified == nil {
		return nil
	}
	switch {
	case !exists:
		return fmt.Errorf("%w: no such version to delete", missing)
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
	if err := checkDelete(opts, cur.Exists, cur.ETag, cur.LastModified, store.ErrNoSuchKey); err != nil {
		return res, err
	}
	if cur.Versioning == "" {
		if cur.Exists {
			err = tx.DeleteObjects(ctx, bucket, []string{key})
		}
		return res, err
	}
	if cur.Versioning == store.VersioningSuspended {
		if err := checkRemove(ctx, tx, bucket, key, store.NullVersion, false); err != nil {
			return res, err // the null version goes (a bucket with Object Lock is never suspended)
		}
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
	if err := checkDelete(opts, v.Found, v.ETag, v.LastModified, store.ErrPreconditionFailed); err != nil || !v.Found {
		return res, err
	}
	if err := checkRemove(ctx, tx, bucket, key, opts.VersionID, opts.BypassGovernance); err != nil {
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
		meta.Lock = r.Info.Meta.Lock // changed only by PutObjectLock, under its rules
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

// FetchVersions returns, ordered by key and newest first within a key, at
// most limit versions of the cursor's current Range and, if tail is not nil,
// first the versions of tail's key older than its version tail.ID
// (VersionID and DeleteMarker set; IsLatest is ListVersions'). With the
// cursor's DelimNext set it may skip past common prefixes as FetchObjects
// may.
type FetchVersions func(c *ListCursor, tail *Marker, limit int) ([]store.ObjectInfo, error)

// ListVersions pages a ListObjectVersions answer out of fetch, as
// ListUploads pages uploads. A version is the latest of its key when it
// comes first of its key, which a fetch that starts at a key (not inside
// one) sees. Errors of fetch come back as they are.
func ListVersions(p store.ListVersionsParams, fetch FetchVersions) (store.ListVersionsResult, error) {
	pg, err := listKeyed(p.Prefix, p.Delimiter, p.KeyMarker, p.VersionIDMarker, p.MaxKeys, fetch,
		func(o store.ObjectInfo) (string, string) { return o.Key, o.VersionID },
		func(o *store.ObjectInfo, first bool) { o.IsLatest = first })
	return store.ListVersionsResult{Versions: pg.entries, CommonPrefixes: pg.prefixes, Truncated: pg.truncated,
		NextKeyMarker: pg.nextKey, NextVersionIDMarker: pg.nextID}, err
}
