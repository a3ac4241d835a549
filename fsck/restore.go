package fsck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
)

// After a restore of `large = local`, the database and the data directory
// come from copies of different times (docs/operations.md): objects whose
// blob files are missing, and blob files that no row names. Check reports
// both; Repair makes the store consistent, but only the repairs asked for.

// Kinds of Problem of a restore.
const (
	// KindObjectWithoutBytes: an object or upload part references a blob
	// whose content is missing (Report.Affected; the blob's own problem is
	// missing-content).
	KindObjectWithoutBytes = "object-without-bytes"
	// KindOrphanFile: a blob file whose id has no blob row (Options.Orphans).
	KindOrphanFile = "orphan-file"
)

// Repairs that Repair can make (fsck --repair=a,b).
const (
	// RepairRemoveMissing deletes the objects and noncurrent versions that
	// reference blobs whose bytes are missing, and then those blobs' rows.
	RepairRemoveMissing = "remove-missing"
	// RepairRemoveOrphans removes orphan blob files older than the GC grace,
	// as GC would (which does it anyway, in time).
	RepairRemoveOrphans = "remove-orphans"
)

// referrers is what the restore findings and repairs need of a metadata
// engine (store/pg, store/embedded).
type referrers interface {
	BlobReferrers(ctx context.Context, ids []int64) ([]store.BlobRef, error)
	// RemoveVersionWithBlobs removes a version (versionID "": the current
	// one) that still references one of ids; it refuses, with an error
	// wrapping store.ErrObjectLocked (a *store.LockedError that says why), a
	// version that Object Lock protects.
	RemoveVersionWithBlobs(ctx context.Context, bucket, key, versionID string, ids []int64, bypassGovernance bool) (bool, error)
	RemoveBlobRow(ctx context.Context, id int64) (bool, error)
}

var (
	_ referrers = (*pg.GC)(nil)
	_ referrers = (*embedded.GC)(nil)
)

// missingContent returns the ids of the blobs whose content is missing.
func missingContent(r Report) []int64 {
	var ids []int64
	for _, p := range r.Problems {
		if p.Kind == KindMissingContent && p.BlobID != 0 {
			ids = append(ids, p.BlobID)
		}
	}
	return ids
}

// restoreFindings adds the objects without bytes and, with opts.Orphans,
// the orphan files to r.
func restoreFindings(ctx context.Context, db Meta, opts Options, r *Report) error {
	if ids := missingContent(*r); len(ids) > 0 {
		if rf, ok := db.(referrers); ok {
			refs, err := rf.BlobReferrers(ctx, ids)
			if err != nil {
				return err
			}
			for _, ref := range refs {
				r.Affected = append(r.Affected, Problem{Kind: KindObjectWithoutBytes, Where: where(ref),
					Detail: fmt.Sprintf("blob %d has no bytes", ref.BlobID)})
			}
		}
	}
	if !opts.Orphans || opts.Media == nil {
		return nil
	}
	rl, ok := db.(interface {
		Rowless(ctx context.Context, ids []int64) ([]int64, error)
	})
	if !ok {
		return nil
	}
	ids, err := opts.Media.BlobIDs(ctx)
	if err != nil {
		return fmt.Errorf("blob files: %w", err)
	}
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 1000)]
		ids = ids[len(batch):]
		orphans, err := rl.Rowless(ctx, batch)
		if err != nil {
			return err
		}
		for _, id := range orphans {
			r.Problems = append(r.Problems, Problem{Kind: KindOrphanFile, BlobID: id, Tier: store.TierLocal,
				Detail: "blob file without a blob row (GC removes it after its grace)"})
		}
	}
	return nil
}

func where(ref store.BlobRef) string {
	switch {
	case ref.VersionID != "" && ref.Part > 0:
		return fmt.Sprintf("version %s of object %s/%s part %d", ref.VersionID, ref.Bucket, ref.Key, ref.Part)
	case ref.VersionID != "":
		return fmt.Sprintf("version %s of object %s/%s", ref.VersionID, ref.Bucket, ref.Key)
	case ref.UploadID != "":
		return fmt.Sprintf("upload %s part %d (%s/%s)", ref.UploadID, ref.Part, ref.Bucket, ref.Key)
	case ref.Part > 0:
		return fmt.Sprintf("object %s/%s part %d", ref.Bucket, ref.Key, ref.Part)
	}
	return fmt.Sprintf("object %s/%s", ref.Bucket, ref.Key)
}

// lockReason is why Object Lock keeps the version of err, which wraps
// store.ErrObjectLocked: the retention or legal hold alone, since the
// REPAIR line names the version already. An error without a
// store.LockedError names no reason, and the sentinel's text stands in.
func lockReason(err error) string {
	var le *store.LockedError
	if errors.As(err, &le) && le.Reason() != "" {
		return le.Reason()
	}
	return store.ErrObjectLocked.Error()
}

// ParseRepairs parses the value of --repair: a comma-separated list of
// RepairRemoveMissing and RepairRemoveOrphans.
func ParseRepairs(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, v := range strings.Split(s, ",") {
		switch v = strings.TrimSpace(v); v {
		case RepairRemoveMissing, RepairRemoveOrphans:
			out[v] = true
		case "":
		default:
			return nil, fmt.Errorf("unknown repair %q (want %s, %s or both, comma-separated)", v, RepairRemoveMissing, RepairRemoveOrphans)
		}
	}
	return out, nil
}

// RepairOptions are the settings of Repair.
type RepairOptions struct {
	// Grace is GC's: orphan files younger than it may be a put in flight
	// and stay.
	Grace time.Duration
	// BypassGovernance lets RepairRemoveMissing remove a version under a
	// running GOVERNANCE retention (fsck --bypass-governance), as a DELETE
	// with x-amz-bypass-governance-retention would. A COMPLIANCE retention
	// and a legal hold keep their version whatever it says.
	BypassGovernance bool
}

// Repair makes the repairs asked for from the findings of r and returns one
// line per thing it changed or left. A version that Object Lock protects is
// never removed by it (ADR 016: the rule of every removal for good decides);
// it stays, with its finding, and a line says why.
func Repair(ctx context.Context, db gc.Meta, media *localfs.Media, r Report, repairs map[string]bool, opts RepairOptions) ([]string, error) {
	var done []string
	if repairs[RepairRemoveMissing] {
		rf, ok := db.(referrers)
		if !ok {
			return nil, fmt.Errorf("--repair=%s: the metadata engine %T has no repairs", RepairRemoveMissing, db)
		}
		ids := missingContent(r)
		if len(ids) > 0 {
			refs, err := rf.BlobReferrers(ctx, ids)
			if err != nil {
				return done, err
			}
			// A version is judged once, however many of its parts lack bytes:
			// by bucket/key and its version id ("" for the current row).
			judged := map[store.BlobRef]bool{}
			locked := 0
			for _, ref := range refs {
				if ref.UploadID != "" {
					done = append(done, fmt.Sprintf("left %s: abort the upload (or let UPLOAD_EXPIRY reap it)", where(ref)))
					continue
				}
				ver := store.BlobRef{Bucket: ref.Bucket, Key: ref.Key, VersionID: ref.VersionID}
				if judged[ver] {
					continue
				}
				judged[ver] = true
				what := where(ver)
				// The store's removal of a version for good decides, Object
				// Lock's rule with it; a noncurrent version goes as a DELETE
				// with its versionId would remove it.
				ok, err := rf.RemoveVersionWithBlobs(ctx, ref.Bucket, ref.Key, ref.VersionID, ids, opts.BypassGovernance)
				if errors.Is(err, store.ErrObjectLocked) {
					locked++
					done = append(done, fmt.Sprintf("left %s under Object Lock: %s", what, lockReason(err)))
					continue
				}
				if err != nil {
					return done, err
				}
				if ok {
					done = append(done, fmt.Sprintf("removed %s: blob %d has no bytes", what, ref.BlobID))
				}
			}
			if locked > 0 {
				done = append(done, fmt.Sprintf("left %d versions without bytes under Object Lock: they stay until their retention ends or their legal hold is released "+
					"(--bypass-governance lifts a GOVERNANCE retention; nothing lifts COMPLIANCE or a legal hold)", locked))
			}
		}
		for _, id := range ids {
			ok, err := rf.RemoveBlobRow(ctx, id)
			if err != nil {
				return done, err
			}
			if ok {
				done = append(done, fmt.Sprintf("removed blob row %d (no bytes, no reference)", id))
			} else {
				done = append(done, fmt.Sprintf("left blob row %d: still referenced or pinned", id))
			}
		}
	}
	if repairs[RepairRemoveOrphans] && media != nil {
		n, err := gc.ReapBlobFiles(ctx, db, media, gc.Options{Grace: opts.Grace})
		if err != nil {
			return done, err
		}
		done = append(done, fmt.Sprintf("removed %d orphan blob files older than %s", n, opts.Grace))
	}
	return done, nil
}
