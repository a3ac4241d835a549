package gc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/localfs"
)

// ReapUploads aborts multipart uploads initiated more than UploadExpiry ago,
// one by one, each under the locks that the engine's part uploads, Complete
// and Abort take (so it is serialized with them rather than racing them), and
// re-checked under them. The upload row goes, its parts with it, and their
// blobs become candidates for the next sweep. Locks held past LockTimeout
// leave the upload for next time.
func ReapUploads(ctx context.Context, db Meta, opts Options) (int64, error) {
	return reapUploads(ctx, db, opts.withDefaults(), nil)
}

func reapUploads(ctx context.Context, db Meta, opts Options, bar *Progress) (int64, error) {
	var n int64
	after := ""
	for {
		batch, err := db.ExpiredUploads(ctx, opts.UploadExpiry, after, opts.BatchSize)
		if err != nil {
			return n, fmt.Errorf("gc: %w", err)
		}
		if len(batch) == 0 {
			return n, nil
		}
		for _, u := range batch {
			res, err := db.AbortUpload(ctx, u, opts.UploadExpiry, opts.LockTimeout)
			if err != nil {
				return n, fmt.Errorf("gc: abort expired upload %s: %w", u.ID, err)
			}
			if res == store.GCDone {
				n++
			}
			bar.Add(1)
		}
		after = batch[len(batch)-1].ID
	}
}

// ReapInstances deletes the fleet registrations whose heartbeat is older
// than their TTL, in batches of BatchSize (engines without a registry have
// none). It runs under the lease like the sweep: one sweeper for the fleet.
func ReapInstances(ctx context.Context, db Meta, opts Options) (int64, error) {
	r, ok := db.(registry)
	if !ok {
		return 0, nil
	}
	opts = opts.withDefaults()
	var n int64
	for {
		k, err := r.ReapInstances(ctx, opts.BatchSize)
		n += k
		if err != nil {
			return n, fmt.Errorf("gc: %w", err)
		}
		if k < int64(opts.BatchSize) {
			return n, nil
		}
	}
}

// ReapStages drops content staged in the database (ADR 007) whose stage row
// was untouched for StageGrace: puts that crashed or were abandoned before
// publishing. Each stage goes in its own transaction that first try-locks
// the blob id's pin: a running put pins its id while it stages, so it is
// never reaped, whatever the grace; one that loses its stage anyway fails,
// it never publishes missing bytes. Engines without staged content have none.
func ReapStages(ctx context.Context, db Meta, opts Options) (int64, error) {
	c, ok := db.(dbContent)
	if !ok {
		return 0, nil
	}
	opts = opts.withDefaults()
	ids, err := c.AbandonedStages(ctx, opts.StageGrace)
	if err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	var n int64
	for _, id := range ids {
		res, err := decide(ctx, db, opts, func(tx store.GCTx) (store.GCVerdict, error) {
			if ok, err := tx.TryPin(ctx, id); err != nil || !ok {
				return store.GCPinned, err
			}
			u, ok := tx.(unstager)
			if !ok {
				return 0, errors.New("the engine stages content but cannot unstage it")
			}
			if dropped, err := u.Unstage(ctx, id, opts.StageGrace); err != nil || !dropped {
				return store.GCGone, err
			}
			return store.GCDone, nil
		})
		if err != nil {
			return n, fmt.Errorf("gc: stage of blob %d: %w", id, err)
		}
		if res == store.GCDone {
			n++
		}
	}
	return n, nil
}

// ReapPins deletes expired pin rows, BatchSize per statement. They protect
// nothing any more (a guard is lost before its row expires), and the sweep
// deletes a candidate's own expired rows with it; this reaps the rest.
func ReapPins(ctx context.Context, db Meta, opts Options) (int64, error) {
	r, ok := db.(pinReaper)
	if !ok {
		return 0, nil
	}
	n, err := r.ReapPins(ctx, opts.withDefaults().BatchSize)
	if err != nil {
		return n, fmt.Errorf("gc: %w", err)
	}
	return n, nil
}

// ReapLargeObjects unlinks large objects that nothing owns once they have
// been seen so for the grace period (their grace runs from the first
// sighting, since they carry no creation time). Engines without large
// objects have none to reap.
func ReapLargeObjects(ctx context.Context, db Meta, opts Options) (int64, error) {
	c, ok := db.(dbContent)
	if !ok {
		return 0, nil
	}
	opts = opts.withDefaults()
	n, err := c.ReapLargeObjects(ctx, opts.Grace, opts.LockTimeout, opts.Guard)
	if err != nil {
		return n, fmt.Errorf("gc: %w", err)
	}
	return n, nil
}

// ReapStageFiles removes stage files of media untouched for StageGrace: the
// leftovers of puts that crashed before publishing.
func ReapStageFiles(ctx context.Context, media *localfs.Media, opts Options) (int64, error) {
	opts = opts.withDefaults()
	files, err := staleStageFiles(media, opts.StageGrace)
	if err != nil {
		return 0, fmt.Errorf("gc: %w", err)
	}
	var n int64
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("gc: stage files: %w", err)
		}
		if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("gc: remove stage file: %w", err)
		}
		n++
	}
	return n, nil
}

// file is a crash leftover found on media.
type file struct {
	path string
	id   int64 // blob files only
	size int64
}

// staleStageFiles lists the stage files untouched for grace.
func staleStageFiles(media *localfs.Media, grace time.Duration) ([]file, error) {
	paths, err := media.StageFiles()
	if err != nil {
		return nil, err
	}
	var out []file
	for _, p := range paths {
		if fi, ok, err := stale(p, grace); err != nil {
			return nil, fmt.Errorf("stat stage file: %w", err)
		} else if ok {
			out = append(out, file{path: p, size: fi.Size()})
		}
	}
	return out, nil
}

// rowlessFiles lists the blob files of media whose id has no blob row and
// which are older than grace.
func rowlessFiles(ctx context.Context, db Meta, media *localfs.Media, grace time.Duration) ([]file, error) {
	ids, err := media.BlobIDs(ctx)
	if err != nil {
		return nil, err
	}
	var out []file
	for len(ids) > 0 {
		batch := ids[:min(len(ids), 1000)]
		ids = ids[len(batch):]
		rowless, err := db.Rowless(ctx, batch)
		if err != nil {
			return nil, err
		}
		for _, id := range rowless {
			p := blobFilePath(media, id)
			if fi, ok, err := stale(p, grace); err != nil {
				return nil, fmt.Errorf("stat blob file %d: %w", id, err)
			} else if ok {
				out = append(out, file{path: p, id: id, size: fi.Size()})
			}
		}
	}
	return out, nil
}

// stale stats path and reports whether it exists and is older than grace.
func stale(path string, grace time.Duration) (fs.FileInfo, bool, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil // published, discarded or removed meanwhile
	}
	if err != nil {
		return nil, false, err
	}
	return fi, time.Since(fi.ModTime()) >= grace, nil
}

// ReapBlobFiles removes blob files of media whose id has no blob row and
// which are older than the grace. A put publishes its file inside its write
// transaction, after inserting the row: the row of a put in flight may not
// be visible yet, so absence is proved inside a transaction of the engine
// (ProveRowless), the file is removed while that proof holds, and the
// transaction is always rolled back. Ids are never reused for committed
// rows, so no later put can want the file.
func ReapBlobFiles(ctx context.Context, db Meta, media *localfs.Media, opts Options) (int64, error) {
	opts = opts.withDefaults()
	files, err := rowlessFiles(ctx, db, media, opts.Grace)
	if err != nil {
		return 0, fmt.Errorf("gc: blob files without rows: %w", err)
	}
	var n int64
	for _, f := range files {
		removed := false
		err := db.InTx(ctx, opts.LockTimeout, func(tx store.GCTx) (bool, error) {
			if ok, err := tx.TryPin(ctx, f.id); err != nil || !ok {
				return false, err
			}
			if res, err := tx.ProveRowless(ctx, f.id); err != nil || res != store.GCDone {
				return false, err
			}
			if opts.Guard != nil {
				if err := opts.Guard(ctx); err != nil {
					return false, fmt.Errorf("guard refused the removal: %w", err)
				}
			}
			if err := media.Remove(ctx, f.id); err != nil {
				return false, err
			}
			removed = true
			return false, nil // never commit the proof
		})
		if err != nil {
			return n, fmt.Errorf("gc: blob file %d: %w", f.id, err)
		}
		if removed {
			n++
		}
	}
	return n, nil
}

// blobFilePath mirrors localfs's layout (blobs/<id&0xff>/<id>>8&0xff>/<id>)
// to read a file's age. If the layout ever changes, Stat finds nothing and
// files are kept: the safe direction.
func blobFilePath(m *localfs.Media, id int64) string {
	u := uint64(id)
	return filepath.Join(m.Dir(), "blobs", fmt.Sprintf("%02x", u&0xff), fmt.Sprintf("%02x", u>>8&0xff),
		strconv.FormatInt(id, 10))
}
