package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/s3gate/s3gate/fleet"
	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/store"
	pgcontent "github.com/s3gate/s3gate/store/pg/content"
)

// PlanBlobs counts the unreferenced blobs older than grace, the uploads
// older than expiry, and the blobs that only those uploads' parts reference.
func (g *GC) PlanBlobs(ctx context.Context, grace, expiry time.Duration) (store.GCPlan, error) {
	var p store.GCPlan
	if err := g.db.QueryRow(ctx, `SELECT count(*), coalesce(sum(b.size), 0)::bigint FROM blobs b
		WHERE b.created_at <= `+olderThan+` AND `+unreferenced+` AND `+unpinned,
		grace.Microseconds()).Scan(&p.Blobs, &p.BlobBytes); err != nil {
		return p, fmt.Errorf("unreferenced blobs: %w", err)
	}
	if err := g.db.QueryRow(ctx, `WITH exp AS (
			SELECT upload_id FROM uploads WHERE initiated <= clock_timestamp() - $2::bigint * interval '1 microsecond')
		SELECT (SELECT count(*) FROM exp), count(b.id), coalesce(sum(b.size), 0)::bigint FROM blobs b
		WHERE b.created_at <= `+olderThan+`
		  AND EXISTS (SELECT 1 FROM upload_parts u JOIN exp USING (upload_id) WHERE u.blob_id = b.id)
		  AND NOT EXISTS (SELECT 1 FROM upload_parts u WHERE u.blob_id = b.id
		                  AND u.upload_id NOT IN (SELECT upload_id FROM exp))
		  AND `+notInObjects,
		grace.Microseconds(), expiry.Microseconds()).Scan(&p.ExpiredUploads, &p.UploadBlobs, &p.UploadBlobBytes); err != nil {
		return p, fmt.Errorf("expired uploads: %w", err)
	}
	return p, nil
}

// PlanStages counts the stage rows untouched for stageGrace.
func (g *GC) PlanStages(ctx context.Context, stageGrace time.Duration) (int64, error) {
	var n int64
	if err := g.db.QueryRow(ctx, `SELECT count(*) FROM blob_stages WHERE touched_at <= `+olderThan,
		stageGrace.Microseconds()).Scan(&n); err != nil {
		return 0, fmt.Errorf("abandoned stages: %w", err)
	}
	return n, nil
}

// AbandonedStages lists the blob ids of stage rows (ADR 007) untouched for
// stageGrace.
func (g *GC) AbandonedStages(ctx context.Context, stageGrace time.Duration) ([]int64, error) {
	ids, err := collect[int64](g.db.Query(ctx, `SELECT blob_id FROM blob_stages
		WHERE touched_at <= `+olderThan+` ORDER BY blob_id`, stageGrace.Microseconds()))
	if err != nil {
		return nil, fmt.Errorf("list abandoned stages: %w", err)
	}
	return ids, nil
}

// Unstage drops the stage row of blob id with its content if it is still
// untouched for stageGrace (a put that wrote a chunk meanwhile keeps it, one
// whose publish claimed the row is never touched).
func (t gcTx) Unstage(ctx context.Context, id int64, stageGrace time.Duration) (bool, error) {
	return pgcontent.Unstage(ctx, t.tx, id, stageGrace)
}

// largeObjectLockKey serializes reapers deciding about one large object.
func largeObjectLockKey(oid uint32) int64 {
	return fleet.LockKey("gc-lo", strconv.FormatUint(uint64(oid), 10))
}

// ReapLargeObjects unlinks large objects that neither a blob nor a stage row
// references once they have been seen so for grace. A put creates its large
// object together with its stage row, and its joint transaction swaps the
// stage row for the blob row, so an object of a put in flight is always
// referenced here, and one that is not can never gain a reference; the
// decision is still re-checked under an advisory lock on the OID, in the
// unlinking transaction, which guard approves before COMMIT. The database is
// assumed to be s3gate's alone: any large object it does not reference is an
// orphan.
func (g *GC) ReapLargeObjects(ctx context.Context, grace, lockTimeout time.Duration, guard func(context.Context) error) (int64, error) {
	orphans, err := collect[uint32](g.db.Query(ctx, `SELECT m.oid FROM pg_largeobject_metadata m WHERE `+orphanLO))
	if err != nil {
		return 0, fmt.Errorf("list orphan large objects: %w", err)
	}
	// Forget sightings of objects that are gone or referenced, record new ones.
	if _, err := g.db.Exec(ctx, `DELETE FROM gc_lo_sightings WHERE lo <> ALL($1::oid[])`, orphans); err != nil {
		return 0, fmt.Errorf("prune sightings: %w", err)
	}
	if _, err := g.db.Exec(ctx, `INSERT INTO gc_lo_sightings (lo) SELECT unnest($1::oid[]) ON CONFLICT DO NOTHING`, orphans); err != nil {
		return 0, fmt.Errorf("record sightings: %w", err)
	}
	due, err := collect[uint32](g.db.Query(ctx, `SELECT lo FROM gc_lo_sightings
		WHERE first_seen <= `+olderThan+` ORDER BY lo`, grace.Microseconds()))
	if err != nil {
		return 0, fmt.Errorf("list due orphans: %w", err)
	}
	var n int64
	for len(due) > 0 {
		batch := due[:min(len(due), maxUnlinksPerTx)]
		due = due[len(batch):]
		var unlinked int64
		err := g.InTx(ctx, lockTimeout, func(gt store.GCTx) (bool, error) {
			tx := gt.(gcTx).tx
			// One lock per OID, in key order (two reapers never deadlock),
			// then unlinked only if it still exists and still nothing owns it.
			keys := make([]int64, len(batch))
			for i, oid := range batch {
				keys[i] = largeObjectLockKey(oid)
			}
			slices.Sort(keys)
			if _, err := tx.Exec(ctx, `SELECT count(pg_advisory_xact_lock(k)) FROM unnest($1::bigint[]) AS k`, keys); err != nil {
				return false, fmt.Errorf("lock large objects: %w", err)
			}
			if err := tx.QueryRow(ctx, `SELECT count(lo_unlink(m.oid)) FROM pg_largeobject_metadata m
				WHERE m.oid = ANY($1::oid[]) AND `+orphanLO, batch).Scan(&unlinked); err != nil {
				return false, fmt.Errorf("unlink large objects: %w", err)
			}
			if _, err := tx.Exec(ctx, `DELETE FROM gc_lo_sightings WHERE lo = ANY($1::oid[])`, batch); err != nil {
				return false, fmt.Errorf("forget sightings: %w", err)
			}
			if guard != nil {
				if err := guard(ctx); err != nil {
					return false, fmt.Errorf("guard refused the unlinks: %w", err)
				}
			}
			return true, nil
		})
		if _, ok := verdictOf(err); ok {
			continue // a lock outlived the timeout: next time
		}
		if err != nil {
			return n, fmt.Errorf("orphan large objects: %w", err)
		}
		n += unlinked
	}
	return n, nil
}

// PlanLargeObjects counts the orphan large objects that ReapLargeObjects
// would unlink now (one not seen yet is seen now, as the reaper would record
// it), and their bytes. It writes nothing.
func (g *GC) PlanLargeObjects(ctx context.Context, grace time.Duration) (n, bytes int64, err error) {
	var haveSightings bool
	if err := g.db.QueryRow(ctx, `SELECT to_regclass('gc_lo_sightings') IS NOT NULL`).Scan(&haveSightings); err != nil {
		return 0, 0, fmt.Errorf("look for sightings: %w", err)
	}
	firstSeen := `clock_timestamp()`
	if haveSightings {
		firstSeen = `coalesce((SELECT s.first_seen FROM gc_lo_sightings s WHERE s.lo = m.oid), clock_timestamp())`
	}
	oids, err := collect[uint32](g.db.Query(ctx, `SELECT m.oid FROM pg_largeobject_metadata m
		WHERE `+orphanLO+` AND `+firstSeen+` <= `+olderThan, grace.Microseconds()))
	if err != nil {
		return 0, 0, fmt.Errorf("orphan large objects: %w", err)
	}
	for _, oid := range oids {
		var size *int64
		// The descriptor lives only in this one-statement transaction; 262144 is INV_READ.
		err := g.db.QueryRow(ctx, `SELECT lo_lseek64(lo_open(m.oid, 262144), 0, 2)
			FROM pg_largeobject_metadata m WHERE m.oid = $1`, oid).Scan(&size)
		if errors.Is(err, pgx.ErrNoRows) || pgCode(err) == "42704" || (err == nil && size == nil) {
			continue // unlinked meanwhile (42704: between the two looks)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("size of large object %d: %w", oid, err)
		}
		n++
		bytes += *size
	}
	return n, bytes, nil
}

// LeaseStore returns the store of fleet-wide leases in this database.
func (g *GC) LeaseStore(ctx context.Context) (lease.Store, error) {
	return lease.NewPGStore(ctx, g.db)
}

// sentinelTimeout bounds each check on the sentinel connection, and its close.
const sentinelTimeout = 2 * time.Second

// SentinelApp is the application_name of a GC run's sentinel session.
const SentinelApp = "s3gate-gc-sentinel"

// Sentinel opens a dedicated connection (not a pool member) whose death
// means that the server reset every session, pins included (ADR 006). check
// proves it alive; closeFn closes it.
func (g *GC) Sentinel(ctx context.Context) (check func(context.Context) error, closeFn func(), err error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg := g.db.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = SentinelApp
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("open sentinel session: %w", err)
	}
	var mu sync.Mutex
	check = func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, sentinelTimeout)
		defer cancel()
		if _, err := conn.Exec(cctx, `SELECT 1`); err != nil {
			return fmt.Errorf("sentinel session lost (server sessions may have been reset): %w", err)
		}
		return nil
	}
	closeFn = func() {
		mu.Lock()
		defer mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), sentinelTimeout)
		defer cancel()
		_ = conn.Close(ctx) // a read-only session; nothing to lose
	}
	return check, closeFn, nil
}
