package fleettest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/s3gate/s3gate/fleet/lease"
	"github.com/s3gate/s3gate/gc"
	"github.com/s3gate/s3gate/store/pg"
)

// leaseLog records, by trigger, every change of the gc lease row and every
// blob deletion with the application_name of the session that deleted it
// (each instance's pool is named s3gate-A, -B, -C): the history that
// TestFleet/LeaseRounds checks.
const leaseLog = `
CREATE TABLE lease_log (seq bigserial PRIMARY KEY, holder text, generation bigint, expires_at timestamptz,
	at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION log_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO lease_log (holder, generation, expires_at) VALUES (NEW.Holder, NEW.Generation, NEW.expires_at);
	RETURN NEW;
END $$;
CREATE TRIGGER lease_log AFTER INSERT OR UPDATE ON leases FOR EACH ROW WHEN (NEW.kind = 'gc') EXECUTE FUNCTION log_lease();
CREATE TABLE delete_log (blob_id bigint, app text, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO delete_log (blob_id, app) VALUES (OLD.id, current_setting('application_name'));
	RETURN OLD;
END $$;
CREATE TRIGGER delete_log AFTER DELETE ON blobs FOR EACH ROW EXECUTE FUNCTION log_delete();`

// grant is one generation of the gc lease as the database saw it.
type grant struct {
	Gen        int64
	Holder     string
	Start, End time.Time
}

// leaseRounds: every instance runs its online GC every 100 ms while a client
// loop makes garbage; over the rounds, the gc lease's generations never
// overlap, every instance tried for the lease, and every blob deletion was
// made by the instance that held the lease then, at least the pin window
// after it took it (the wait after (re)taking the lease, ADR 006).
func leaseRounds(t *testing.T, bin string) {
	f := newFleet(t, "pgchunks")
	ctx := context.Background()
	if err := pg.Migrate(ctx, f.dsn); err != nil {
		t.Fatal(err)
	}
	db := f.pool()
	if err := lease.EnsureSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, leaseLog); err != nil {
		t.Fatal(err)
	}
	f.start(bin, "S3GATE_GC_INTERVAL=100ms", "S3GATE_GC_GRACE=1ms")
	// Rounds are at least the pin window long: the default run waits for one
	// finished round and the next grant (two generations, one hand-over).
	rounds := int64(1)
	if soak() {
		rounds = 10
	}
	clients := []*s3.Client{f.insts[0].client(), f.insts[1].client(), f.insts[2].client()} // reused: one connection pool each
	createBucket(t, clients[0], "garbage")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // overwrites: each leaves the previous blob as garbage
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = clients[i%3].PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("garbage"), Key: aws.String(fmt.Sprintf("k%d", i%4)),
				Body: strings.NewReader(fmt.Sprintf("garbage %d %d", i, rand.Int64()))}) // failures only mean less garbage
			time.Sleep(20 * time.Millisecond) // pacing the load, not synchronization
		}
	}()
	deadline := time.Now().Add(time.Duration(rounds)*15*time.Second + 30*time.Second) // hang guard
	for count(t, db, `SELECT count(DISTINCT generation) FROM lease_log WHERE holder = ''`) < rounds ||
		count(t, db, `SELECT count(DISTINCT generation) FROM lease_log`) <= rounds ||
		count(t, db, `SELECT count(*) FROM delete_log`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("too few lease rounds with deletions")
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	// Each instance's runner tried for the lease: it took it or found it busy.
	for _, in := range f.insts {
		if n := leaseTries(t, in); n == 0 {
			t.Errorf("instance %s never tried for the gc lease", in.name)
		}
	}
	grants := grantsOf(t, db)
	for i := 1; i < len(grants); i++ {
		if grants[i].Start.Before(grants[i-1].End) {
			t.Errorf("generation %d (%s) began at %v, before generation %d (%s) ended at %v",
				grants[i].Gen, grants[i].Holder, grants[i].Start, grants[i-1].Gen, grants[i-1].Holder, grants[i-1].End)
		}
	}
	// Every deletion: by the holder of the generation in force, after the pin window.
	name := map[int]string{}
	for _, in := range f.insts {
		name[in.pid()] = "s3gate-" + in.name
	}
	rows, err := db.Query(ctx, `SELECT blob_id, app, at FROM delete_log ORDER BY at`)
	if err != nil {
		t.Fatal(err)
	}
	type deletion struct {
		ID  int64
		App string
		At  time.Time
	}
	dels, err := pgx.CollectRows(rows, pgx.RowToStructByPos[deletion])
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dels {
		var in *grant
		for i := range grants {
			if !d.At.Before(grants[i].Start) && d.At.Before(grants[i].End) {
				in = &grants[i]
			}
		}
		switch {
		case in == nil:
			t.Errorf("blob %d deleted by %s at %v outside every lease generation", d.ID, d.App, d.At)
		case name[holderPID(in.Holder)] != d.App:
			t.Errorf("blob %d deleted by %s during generation %d, held by %s", d.ID, d.App, in.Gen, in.Holder)
		case d.At.Sub(in.Start) < gc.DefaultPinWindow:
			t.Errorf("blob %d deleted %s after generation %d began, within the pin window", d.ID, d.At.Sub(in.Start), in.Gen)
		}
	}
	t.Logf("%d generations, %d deletions", len(grants), len(dels))
}

// grantsOf reads the lease generations from lease_log: each begins with its
// first row and ends with its release (an empty holder) or, if never released, at
// its last expiry.
func grantsOf(t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) []grant {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT generation,
			(array_agg(holder ORDER BY seq) FILTER (WHERE holder <> ''))[1],
			min(at),
			coalesce(min(at) FILTER (WHERE holder = ''), max(expires_at))
		FROM lease_log GROUP BY generation ORDER BY generation`)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[grant])
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// holderPID is the pid in an instance id (host:pid:random).
func holderPID(holder string) int {
	parts := strings.Split(holder, ":")
	if len(parts) < 3 {
		return 0
	}
	var pid int
	_, _ = fmt.Sscanf(parts[len(parts)-2], "%d", &pid) // 0 if not a number: matches no instance
	return pid
}

// leaseTries scrapes an instance's gc lease counters: grants taken plus
// attempts that found the lease held.
func leaseTries(t *testing.T, in *instance) float64 {
	t.Helper()
	resp, err := http.Get("http://" + in.maddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, name := range []string{"s3gate_gc_lease_acquired_total", "s3gate_gc_lease_busy_total"} {
		if mf := mfs[name]; mf != nil && len(mf.GetMetric()) == 1 {
			n += mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return n
}
