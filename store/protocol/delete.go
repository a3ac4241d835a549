package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
)

// deleteBatch bounds the keys, and so the object locks, of one DeleteObjects
// transaction: PostgreSQL's lock table is shared by the whole server, and the
// embedded engine's writer serves everyone.
const deleteBatch = 100

// DeleteObject implements store.ObjectStore; deleting a missing key
// succeeds. On a bucket with versioning it is DeleteObjectVersion without a
// version id (a delete marker). The manifest rows go with the object; blobs
// stay for GC.
func (s *Store) DeleteObject(ctx context.Context, bucket, key string) error {
	if err := s.dialect.Autocommit().BucketExists(ctx, bucket); err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	if err := s.deleteBatch(ctx, bucket, []store.ObjectID{{Key: key}}, make([]store.DeleteVersionResult, 1)); err != nil {
		return fmt.Errorf("delete %s/%s: %w", bucket, key, err)
	}
	return nil
}

// DeleteObjects implements store.ObjectStore: keys are deleted in
// transactions of up to deleteBatch keys, each under its keys' object locks,
// as the bucket's versioning state says. It returns one result per key, in
// order.
func (s *Store) DeleteObjects(ctx context.Context, bucket string, keys []string) ([]store.DeleteResult, error) {
	ids := make([]store.ObjectID, len(keys))
	for i, k := range keys {
		ids[i].Key = k
	}
	res, err := s.DeleteObjectVersions(ctx, bucket, ids)
	if err != nil {
		return nil, fmt.Errorf("delete objects in %s: %w", bucket, err)
	}
	out := make([]store.DeleteResult, len(res))
	for i, r := range res {
		out[i] = store.DeleteResult{Key: r.Key, Err: r.Err}
	}
	return out, nil
}

// DeleteObjectVersion implements store.VersionStore.
func (s *Store) DeleteObjectVersion(ctx context.Context, bucket, key string, opts store.DeleteOptions) (store.DeleteVersionResult, error) {
	fail := func(err error) error { return fmt.Errorf("delete %s/%s: %w", bucket, key, err) }
	if err := store.CheckVersionID(opts.VersionID); err != nil {
		return store.DeleteVersionResult{}, fail(err)
	}
	if err := s.dialect.Autocommit().BucketExists(ctx, bucket); err != nil {
		return store.DeleteVersionResult{}, fail(err)
	}
	var res store.DeleteVersionResult
	err := s.dialect.Write(ctx, []int64{fleet.ObjectLockKey(bucket, key)}, func(tx Tx) error {
		var err error
		res, err = deleteOne(ctx, tx, bucket, key, opts)
		return err
	})
	if err != nil {
		return store.DeleteVersionResult{}, fail(err)
	}
	return res, nil
}

// DeleteObjectVersions implements store.VersionStore: entries are deleted
// in transactions of up to deleteBatch entries, each under its keys' object
// locks. A malformed version id, or a batch that fails, is the entry's Err.
func (s *Store) DeleteObjectVersions(ctx context.Context, bucket string, ids []store.ObjectID) ([]store.DeleteVersionResult, error) {
	if err := s.dialect.Autocommit().BucketExists(ctx, bucket); err != nil {
		return nil, fmt.Errorf("delete objects in %s: %w", bucket, err)
	}
	out := make([]store.DeleteVersionResult, len(ids))
	valid := make([]store.ObjectID, 0, len(ids))
	at := make([]int, 0, len(ids)) // valid[j] is ids[at[j]]
	for i, id := range ids {
		out[i].Key = id.Key
		if err := store.CheckVersionID(id.VersionID); err != nil {
			out[i].Err = fmt.Errorf("delete %s/%s: %w", bucket, id.Key, err)
			continue
		}
		valid, at = append(valid, id), append(at, i)
	}
	res := make([]store.DeleteVersionResult, len(valid))
	for lo := 0; lo < len(valid); lo += deleteBatch {
		hi := min(lo+deleteBatch, len(valid))
		err := s.deleteBatch(ctx, bucket, valid[lo:hi], res[lo:hi])
		for j := lo; j < hi; j++ {
			if err != nil {
				// Per-key errors: the batch failed as a whole, and the request goes on.
				res[j] = store.DeleteVersionResult{Key: valid[j].Key, Err: fmt.Errorf("delete %s/%s: %w", bucket, valid[j].Key, err)}
			}
			out[at[j]] = res[j]
		}
	}
	return out, nil
}

// deleteBatch deletes ids in one transaction under their object locks and
// fills res. Without version ids on a bucket that never had versioning it is
// one statement, as before versioning.
func (s *Store) deleteBatch(ctx context.Context, bucket string, ids []store.ObjectID, res []store.DeleteVersionResult) error {
	locks := make([]int64, len(ids))
	keys := make([]string, 0, len(ids))
	for i, id := range ids {
		locks[i] = fleet.ObjectLockKey(bucket, id.Key)
		if id.VersionID == "" && id.IfMatch == "" {
			keys = append(keys, id.Key)
		}
	}
	return s.dialect.Write(ctx, locks, func(tx Tx) error {
		if len(keys) == len(ids) {
			versioning, err := tx.DeleteUnversioned(ctx, bucket, keys)
			if err != nil {
				return err
			}
			if versioning == "" {
				for i, id := range ids {
					res[i] = store.DeleteVersionResult{Key: id.Key}
				}
				return nil
			}
		}
		for i, id := range ids {
			r, err := deleteOne(ctx, tx, bucket, id.Key, store.DeleteOptions{VersionID: id.VersionID, BypassGovernance: id.BypassGovernance, IfMatch: id.IfMatch})
			if errors.Is(err, store.ErrObjectLocked) || (id.IfMatch != "" && (errors.Is(err, store.ErrPreconditionFailed) || errors.Is(err, store.ErrNoSuchKey))) {
				// Refused before anything of it changed (the retention and
				// the condition are judged first): this entry alone fails.
				r, err = store.DeleteVersionResult{Key: id.Key, VersionID: id.VersionID, Err: err}, nil
			}
			if err != nil {
				return err
			}
			res[i] = r
		}
		return nil
	})
}

// RemoveVersionWithBlobs is fsck's repair of a version whose blobs have no
// bytes (fsck --repair=remove-missing, ADR 026): in one write transaction
// of d under bucket/key's object lock, as DeleteObjectVersion takes it, the
// version versionID of bucket/key (current or noncurrent; "" names the
// current object row, whatever its version id) is removed for good if it
// still references one of blobs ids, directly or through its manifest, and
// it reports whether it removed it. The removal is a DELETE of that version
// id (deleteVersion), so Object Lock decides as for every removal for good
// (checkRemove, by the database's clock in that transaction): a version it
// protects stays, and the error wraps store.ErrObjectLocked;
// bypassGovernance lifts a running GOVERNANCE retention only. When the
// current version goes, the newest remaining version, if an object, becomes
// current, and a delete marker stays the latest. Upload parts are left to
// the store's abort.
func RemoveVersionWithBlobs(ctx context.Context, d Dialect, bucket, key, versionID string, ids []int64, bypassGovernance bool) (bool, error) {
	var removed bool
	err := d.Write(ctx, []int64{fleet.ObjectLockKey(bucket, key)}, func(tx Tx) error {
		removed = false // a retried transaction starts over
		vid, found, err := tx.VersionReferencing(ctx, bucket, key, versionID, ids)
		if err != nil || !found {
			return err // !found: gone, or no longer a version without bytes
		}
		if _, err := deleteVersion(ctx, tx, bucket, key, store.DeleteOptions{VersionID: vid, BypassGovernance: bypassGovernance}); err != nil {
			return err
		}
		// deleteVersion found it: nothing else changes the key's versions
		// while its object lock is held.
		removed = true
		return nil
	})
	if err != nil {
		what := "object " + bucket + "/" + key
		if versionID != "" {
			what = "version " + versionID + " of " + what
		}
		return false, fmt.Errorf("remove %s: %w", what, err)
	}
	return removed, nil
}
