package gc

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Plan is what a collection would reclaim if it ran now: the --dry-run
// report, and the totals of the offline run's progress bars. Counts are
// upper bounds: a blob pinned or re-referenced meanwhile is skipped.
type Plan struct {
	// Blobs and BlobBytes: unreferenced blob rows older than the grace.
	Blobs, BlobBytes int64
	// ExpiredUploads are multipart uploads older than UploadExpiry;
	// UploadBlobs/UploadBlobBytes the blobs that only their parts reference
	// (reclaimed in the same run, after the uploads are aborted).
	ExpiredUploads               int64
	UploadBlobs, UploadBlobBytes int64
	// OrphanLOs: large objects no blob refers to, due by their first sighting.
	OrphanLOs, OrphanLOBytes int64
	// StageFiles: stage files untouched for StageGrace.
	StageFiles, StageBytes int64
	// OrphanFiles: blob files with no blob row, older than the grace.
	OrphanFiles, OrphanFileBytes int64
	// Stages: content staged in PostgreSQL whose stage row was untouched for
	// StageGrace (abandoned puts; their size is not counted).
	Stages int64
}

// TotalBlobs is the number of blob rows the run would delete.
func (p Plan) TotalBlobs() int64 { return p.Blobs + p.UploadBlobs }

// TotalBytes is every byte the run would reclaim.
func (p Plan) TotalBytes() int64 {
	return p.BlobBytes + p.UploadBlobBytes + p.OrphanLOBytes + p.StageBytes + p.OrphanFileBytes
}

// PlanCollection computes what a collection with opts would reclaim now. It
// only reads: it writes no row and no file, not even GC's bookkeeping.
func PlanCollection(ctx context.Context, db Meta, opts Options) (Plan, error) {
	opts = opts.withDefaults()
	var p Plan
	bp, err := db.PlanBlobs(ctx, opts.Grace, opts.UploadExpiry)
	if err != nil {
		return p, fmt.Errorf("gc: plan: %w", err)
	}
	p.Blobs, p.BlobBytes = bp.Blobs, bp.BlobBytes
	p.ExpiredUploads, p.UploadBlobs, p.UploadBlobBytes = bp.ExpiredUploads, bp.UploadBlobs, bp.UploadBlobBytes
	if c, ok := db.(dbContent); ok {
		if p.Stages, err = c.PlanStages(ctx, opts.StageGrace); err != nil {
			return p, fmt.Errorf("gc: plan: %w", err)
		}
		if p.OrphanLOs, p.OrphanLOBytes, err = c.PlanLargeObjects(ctx, opts.Grace); err != nil {
			return p, fmt.Errorf("gc: plan: %w", err)
		}
	}
	if opts.Media == nil {
		return p, nil
	}
	stage, err := staleStageFiles(opts.Media, opts.StageGrace)
	if err != nil {
		return p, fmt.Errorf("gc: plan: %w", err)
	}
	for _, f := range stage {
		p.StageFiles++
		p.StageBytes += f.size
	}
	rowless, err := rowlessFiles(ctx, db, opts.Media, opts.Grace)
	if err != nil {
		return p, fmt.Errorf("gc: plan: %w", err)
	}
	for _, f := range rowless {
		p.OrphanFiles++
		p.OrphanFileBytes += f.size
	}
	return p, nil
}

// Offline collects once, now, for a maintenance window: no lease is taken
// and no pin window is waited out, so on PostgreSQL it must not run while
// gateways serve streams whose pins a backend crash could have dropped in the
// last few seconds. Every deletion is still arbitrated like an online one,
// and expired uploads are aborted under the locks of the engine's upload
// mutations, so a gateway left running loses nothing. (On the embedded
// engine the data directory's lock keeps serve and Offline apart anyway.)
//
// It first computes the Plan; with dryRun it returns it and deletes nothing.
// Progress goes to progress (a bar on a terminal, plain lines otherwise;
// nil: none).
func Offline(ctx context.Context, db Meta, opts Options, dryRun bool, progress io.Writer) (Plan, Stats, error) {
	opts = opts.withDefaults()
	plan, err := PlanCollection(ctx, db, opts)
	if err != nil || dryRun {
		return plan, Stats{}, err
	}
	if err := EnsureSchema(ctx, db); err != nil {
		return plan, Stats{}, err
	}
	st, err := run(ctx, db, opts, plan, progress)
	opts.Metrics.record(st)
	opts.Metrics.finished(err == nil, time.Now())
	return plan, st, err
}

// collect runs one collection without progress.
func collect(ctx context.Context, db Meta, opts Options) (Stats, error) {
	return run(ctx, db, opts.withDefaults(), Plan{}, nil)
}

// run runs the reapers and the sweep in the order that lets one run reclaim
// everything: expired uploads first (their part blobs become candidates),
// then blobs, then crash leftovers. The plan gives the progress bars' totals.
func run(ctx context.Context, db Meta, opts Options, plan Plan, progress io.Writer) (Stats, error) {
	var st Stats
	bar := NewProgress(progress, "expired uploads", plan.ExpiredUploads, "")
	n, err := reapUploads(ctx, db, opts, bar)
	bar.Done()
	st.UploadsAborted = n
	if err != nil {
		return st, err
	}
	if st.PinsReaped, err = ReapPins(ctx, db, opts); err != nil {
		return st, err
	}
	bar = NewProgress(progress, "unreferenced blobs", plan.TotalBlobs(), "")
	err = sweep(ctx, db, opts, &st, bar)
	bar.Done()
	if err != nil {
		return st, err
	}
	if st.InstancesReaped, err = ReapInstances(ctx, db, opts); err != nil {
		return st, err
	}
	bar = NewProgress(progress, "crash leftovers", plan.Stages+plan.OrphanLOs+plan.StageFiles+plan.OrphanFiles, "")
	defer bar.Done()
	if st.StagesReaped, err = ReapStages(ctx, db, opts); err != nil {
		return st, err
	}
	bar.Add(st.StagesReaped)
	if st.LargeObjectsUnlinked, err = ReapLargeObjects(ctx, db, opts); err != nil {
		return st, err
	}
	bar.Add(st.LargeObjectsUnlinked)
	if opts.Media != nil {
		if st.StageFilesRemoved, err = ReapStageFiles(ctx, opts.Media, opts); err != nil {
			return st, err
		}
		bar.Add(st.StageFilesRemoved)
		if st.BlobFilesRemoved, err = ReapBlobFiles(ctx, db, opts.Media, opts); err != nil {
			return st, err
		}
		bar.Add(st.BlobFilesRemoved)
	}
	return st, nil
}
