package protocol

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/throttle"
)

// CleanupTimeout bounds the clean-up after a failed put (unstage, removal of
// a placed file). It runs on a fresh context because the request's may be the
// reason for the failure.
const CleanupTimeout = 5 * time.Second

// Store is the protocol over one metadata dialect and one large-content
// engine: the store.ObjectStore methods on objects and uploads (puts,
// multipart uploads, copies, deletes, GET and HEAD). A metadata engine embeds
// it.
type Store struct {
	dialect     Dialect
	engine      string
	content     Content
	inlineMax   int
	pins        fleet.Pinner
	readPins    fleet.Pinner // what GETs pin with: ReadPins, else pins
	rowPins     RowPins      // nil: no pin rows in joint transactions
	pinsLosable bool
	gov         *throttle.BandwidthGovernor
	// testHookPinned, if set (tests), runs in the pin-first put between the
	// pin's commit and the placing of the file.
	testHookPinned func(blobID int64)
}

// Config is what a metadata engine gives the protocol beside its dialect.
type Config struct {
	// Engine names the engine in errors ("pg", "embedded").
	Engine string
	// Content receives the content above InlineMax bytes.
	Content Content
	// InlineMax is the inline knee: smaller content goes in the blob row; 0
	// means store.DefaultInlineMax, negative stores nothing inline.
	InlineMax int
	// Pins protects content against GC: the blobs a GET streams, and the
	// fresh blob id of content staged under one for as long as its put runs,
	// so that GC's stage reaper leaves it alone however slow the client (ADR
	// 007). Nil: no pinning (tools and tests that run without GC).
	Pins fleet.Pinner
	// PinsLosable says the pins can be lost (a pin session on PostgreSQL):
	// then answers that stream nothing (HEAD, 304, 412, 416) prove that the
	// content they describe can be protected, and streams check their pin
	// around every read even without a governor. In-process pins are never
	// lost.
	PinsLosable bool
	// ReadPins, if set, is what GETs pin streamed blobs with instead of
	// Pins: row pins in PIN_MODE=rows, which cannot pin a staged id (it has
	// no blob row yet), so Pins keeps protecting staged content (nil: only
	// the stage grace does, ADR 007).
	ReadPins fleet.Pinner
	// RowPins, if set, makes every put that publishes a new reference to a
	// blob (PutObject, UploadPart, UploadPartCopy, CopyObject, Complete)
	// commit a pin row of it in its joint transaction (ADR 010).
	RowPins RowPins
	// Governor paces GET streams; nil means unpaced.
	Governor *throttle.BandwidthGovernor
	// TestHookPinned, if set (tests only), runs in a pin-first put (files
	// with row pins) after its pin committed and before its file is placed.
	TestHookPinned func(blobID int64)
}

// NewStore returns the protocol over d.
func NewStore(d Dialect, cfg Config) *Store {
	if cfg.InlineMax == 0 {
		cfg.InlineMax = store.DefaultInlineMax
	}
	read := cfg.ReadPins
	if read == nil {
		read = cfg.Pins
	}
	return &Store{dialect: d, engine: cfg.Engine, content: cfg.Content, inlineMax: max(cfg.InlineMax, 0),
		pins: cfg.Pins, readPins: read, rowPins: cfg.RowPins, pinsLosable: cfg.PinsLosable, gov: cfg.Governor,
		testHookPinned: cfg.TestHookPinned}
}

// publishFunc writes the rows that reference the new blob (object row,
// upload part row) inside the joint transaction.
type publishFunc func(ctx context.Context, tx Tx, blobID int64, d store.Digests) error

// PutObject implements store.ObjectStore.
func (s *Store) PutObject(ctx context.Context, bucket, key string, body io.Reader, opts store.PutOptions) (store.ObjectInfo, error) {
	info := store.ObjectInfo{Bucket: bucket, Key: key, Meta: opts.Meta}
	obj := &Prefetch{Bucket: bucket, Key: key}
	err := s.stagedPut(ctx, body, opts, []int64{fleet.ObjectLockKey(bucket, key)}, obj, func(ctx context.Context, tx Tx, id int64, d store.Digests) error {
		info.Size = d.Size
		info.ETag = hex.EncodeToString(d.MD5[:])
		info.Checksum = d.Checksum
		w, err := WriteObject(ctx, tx, ObjectRow{Bucket: bucket, Key: key, BlobID: &id, Size: info.Size,
			ETag: info.ETag, Meta: opts.Meta, Checksum: info.Checksum}, opts)
		info.LastModified, info.VersionID = w.LastModified, w.VersionID
		return err
	})
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("put %s/%s: %w", bucket, key, err)
	}
	return info, nil
}

// UploadPart implements store.ObjectStore: a staged put whose blob is
// referenced by a part row, written under the upload's lock. When the upload
// has a checksum algorithm and the request names none, that algorithm is
// computed for the part so that Complete can combine it.
func (s *Store) UploadPart(ctx context.Context, bucket, key, uploadID string, partNumber int, body io.Reader, opts store.PutOptions) (store.PartInfo, error) {
	u, err := LoadUpload(ctx, s.dialect.Autocommit(), bucket, key, uploadID, false)
	if err != nil {
		return store.PartInfo{}, err
	}
	if opts, err = PartPutOptions(u, opts); err != nil {
		return store.PartInfo{}, fmt.Errorf("upload part %d of %q: %w", partNumber, uploadID, err)
	}
	pi := store.PartInfo{Number: partNumber}
	err = s.stagedPut(ctx, body, opts, []int64{fleet.UploadLockKey(uploadID)}, nil, func(ctx context.Context, tx Tx, id int64, d store.Digests) error {
		pi.Size = d.Size
		pi.ETag = hex.EncodeToString(d.MD5[:])
		pi.Checksum = d.Checksum
		return tx.PutPart(ctx, uploadID, &pi, id)
	})
	if err != nil {
		return store.PartInfo{}, fmt.Errorf("upload part %d of %q: %w", partNumber, uploadID, err)
	}
	return pi, nil
}

// Written is what WriteObject wrote.
type Written struct {
	LastModified time.Time
	VersionID    string
	// demoted is the seq of the noncurrent version the previous current
	// object became, 0 if it became none.
	demoted int64
}

// WriteObject writes the object row as the key's new current version, after
// checking the conditional-write options against the current row. The
// bucket's versioning state decides what happens to the previous current
// object: overwritten in place (no versioning; suspended with a null
// current), or demoted to a noncurrent version with its manifest (enabled;
// suspended with a non-null current); a suspended bucket's write is the null
// version, which replaces a noncurrent null version for good. The caller
// holds the object's lock and writes the new manifest afterwards.
func WriteObject(ctx context.Context, tx Tx, o ObjectRow, opts store.PutOptions) (Written, error) {
	cur, err := tx.CurrentObject(ctx, o.Bucket, o.Key)
	if err != nil {
		return Written{}, err
	}
	return writeOver(ctx, tx, cur, o, opts)
}

// demotes reports whether a write over c keeps c as a noncurrent version.
func (c Current) demotes() bool {
	return c.Exists && c.Versioning != "" && (c.Versioning == store.VersioningEnabled || c.VersionID != store.NullVersion)
}

// writeOver is WriteObject over the current row cur, read in tx.
func writeOver(ctx context.Context, tx Tx, cur Current, o ObjectRow, opts store.PutOptions) (Written, error) {
	if err := CheckWriteConditions(opts, cur.Exists, cur.ETag); err != nil {
		if !cur.Exists {
			// A small put checks no bucket before (the object row's foreign
			// key does): a missing bucket answers before the condition.
			if berr := tx.BucketExists(ctx, o.Bucket); berr != nil {
				return Written{}, berr
			}
		}
		return Written{}, err
	}
	var w Written
	var err error
	switch {
	case cur.demotes():
		if w.demoted, err = tx.DemoteCurrent(ctx, o.Bucket, o.Key); err != nil {
			return Written{}, err
		}
	case cur.PartCount > 0:
		if err := tx.DropManifest(ctx, o.Bucket, o.Key); err != nil {
			return Written{}, err
		}
	}
	o.VersionID = store.NullVersion
	switch cur.Versioning {
	case store.VersioningEnabled:
		o.VersionID = store.NewVersionID()
	case store.VersioningSuspended:
		if err := checkRemove(ctx, tx, o.Bucket, o.Key, store.NullVersion, false); err != nil {
			return Written{}, err // the null version goes (a bucket with Object Lock is never suspended)
		}
		if !cur.Exists || cur.VersionID != store.NullVersion {
			// A key has one null version at most: a noncurrent one goes.
			if _, err := tx.DropVersion(ctx, o.Bucket, o.Key, store.NullVersion); err != nil {
				return Written{}, err
			}
		}
	}
	if w.LastModified, err = tx.PutObjectRow(ctx, o); err != nil {
		return Written{}, err
	}
	if err := resolveLock(ctx, tx, o, w.LastModified); err != nil {
		return Written{}, err
	}
	w.VersionID = o.VersionID
	return w, nil
}

// stagedPut is the put path of PutObject, UploadPart and the byte-copy form
// of UploadPartCopy (design §2): hash the body while staging it (in memory up
// to the knee, else into the large engine's stage, outside any transaction),
// verify every digest (Body.Finish), then publish blob and referencing rows
// in one short joint transaction under the locks of keys. A bad digest, a
// failing body or any error after BEGIN leaves nothing: no rows, no staged
// content, no file.
//
// obj, if set, is the object whose row publish writes with WriteObject: its
// bucket is checked before large content is staged (small content needs no
// check: the object row's foreign key answers NoSuchBucket), and a dialect
// that can (Prefetcher) sends the small put's first statements with BEGIN.
func (s *Store) stagedPut(ctx context.Context, r io.Reader, opts store.PutOptions, keys []int64, obj *Prefetch, publish publishFunc) error {
	body := store.NewBody(r, opts)
	head, fits, err := store.ReadKnee(body, s.inlineMax)
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if !fits {
		if obj != nil {
			if err := s.dialect.Autocommit().BucketExists(ctx, obj.Bucket); err != nil {
				return err
			}
		}
		return s.stagedPutLarge(ctx, body, io.MultiReader(bytes.NewReader(head), body), keys, publish)
	}
	d, err := body.Finish()
	if err != nil {
		return err
	}
	blob := Blob{Digests: d, Tier: store.TierInline, Inline: head}
	write := s.dialect.Write
	if p, ok := s.dialect.(Prefetcher); ok && obj != nil {
		write = func(ctx context.Context, keys []int64, fn func(Tx) error) error {
			return p.WritePrefetched(ctx, keys, Prefetch{Blob: &blob, Bucket: obj.Bucket, Key: obj.Key}, fn)
		}
	}
	jp := s.jointPins()
	err = write(ctx, keys, func(tx Tx) error {
		id, _, err := tx.UpsertBlob(ctx, blob)
		if err != nil {
			return err
		}
		if err := publish(ctx, tx, id, d); err != nil {
			return err
		}
		return jp.pin(ctx, tx, id)
	})
	if err != nil {
		return err
	}
	jp.adopt()() // the put is done: the row lives out its TTL
	return nil
}

// stagedPutLarge stages the content outside any transaction, so that a slow
// client holds no transaction and no connection while it sends its body, and
// publishes it in the joint transaction: claim the stage, upsert the blob row
// (on dedup the staged content is dropped), place the content under a new
// row (a file is renamed into place before COMMIT), write the referencing
// rows. Every failure unstages and removes what it placed; a crash leaves
// staged content (or an unreferenced file) for GC.
func (s *Store) stagedPutLarge(ctx context.Context, body *store.Body, r io.Reader, keys []int64, publish publishFunc) error {
	id, fresh, err := s.content.FreshID(ctx)
	if err != nil {
		return err
	}
	if fresh && s.pins != nil {
		// Released after the publish or the unstage, never before.
		pin, err := s.pins.Acquire(ctx, id)
		if err != nil {
			return fmt.Errorf("pin staged blob %d: %w", id, PinErr(err))
		}
		defer pin.Release()
	}
	st, err := s.content.Stage(ctx, id, r)
	if err != nil {
		return s.abandon(ctx, st, fmt.Errorf("stage content: %w", err))
	}
	d, err := body.Finish()
	if err != nil {
		return s.abandon(ctx, st, err)
	}
	release, err := s.content.Slot(ctx)
	if err != nil {
		return s.abandon(ctx, st, err)
	}
	defer release()
	if !fresh && s.rowPins != nil {
		return s.stagedPutPinFirst(ctx, st, d, keys, publish)
	}
	jp := s.jointPins()
	err = s.dialect.Write(ctx, keys, func(tx Tx) error {
		lo, err := st.Claim(ctx, tx)
		if err != nil {
			return err
		}
		got, inserted, err := tx.UpsertBlob(ctx, Blob{ID: id, Digests: d, Tier: s.content.Tier(), LargeObject: lo})
		if err != nil {
			return err
		}
		err = st.Place(ctx, tx, got, inserted)
		if err == nil {
			err = publish(ctx, tx, got, d)
		}
		if err == nil {
			err = jp.pin(ctx, tx, got)
		}
		if err != nil {
			// Before the rollback, while the new row holds the id alone: once
			// it is rolled back, an engine that hands the id out again could
			// give it to another put, whose file this would remove.
			return s.unplace(ctx, st, err)
		}
		return nil
	})
	if err != nil {
		return s.abandon(ctx, st, err)
	}
	jp.adopt()()
	return nil
}

// abandon cleans up after a large put failed with err: it drops what is still
// staged (a COMMIT that failed but took effect claimed it, so nothing
// published is dropped). After a failed COMMIT, which may have committed, it
// looks the blob row up, and removes content placed under it only if the row
// certainly does not exist (an orphan for GC is harmless; a row without its
// content is not).
func (s *Store) abandon(ctx context.Context, st Staged, err error) error {
	var ce *CommitError
	commitLost := errors.As(err, &ce)
	rctx, cancel := cleanupContext(ctx)
	defer cancel()
	err = errors.Join(err, st.Unstage(rctx))
	if id := st.Placed(); id != 0 && commitLost {
		if exists, lerr := s.dialect.Autocommit().BlobExists(rctx, id); lerr == nil && !exists {
			return s.unplace(rctx, st, err)
		}
	}
	return err
}

// unplace removes the content placed for a put that failed with err.
func (s *Store) unplace(ctx context.Context, st Staged, err error) error {
	id := st.Placed()
	if id == 0 {
		return err
	}
	rctx, cancel := cleanupContext(ctx)
	defer cancel()
	if rmErr := st.Unplace(rctx, id); rmErr != nil {
		return errors.Join(err, fmt.Errorf("remove unpublished blob %d: %w", id, rmErr))
	}
	return err
}

// cleanupContext is a fresh context for a clean-up: the request's may be the
// reason for the failure.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
}
