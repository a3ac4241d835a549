package fsck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/pg"
)

// lockedFixture is what TestRepairObjectLock stores on each engine: one
// object above the knee per lock state, on a versioned bucket.
var lockedFixture = []struct {
	key  string
	lock *store.ObjectLock
}{
	{"free", nil},
	{"hold-off", &store.ObjectLock{LegalHold: store.LegalHoldOff}},
	{"gov", &store.ObjectLock{Mode: store.LockGovernance}},
	{"comp", &store.ObjectLock{Mode: store.LockCompliance}},
	{"hold", &store.ObjectLock{LegalHold: store.LegalHoldOn}},
	{"gov-hold", &store.ObjectLock{Mode: store.LockGovernance, LegalHold: store.LegalHoldOn}},
}

// lockedEngine is the part of both metadata engines the fixture needs.
type lockedEngine interface {
	SetBucketVersioning(ctx context.Context, bucket, status string) error
	PutObject(ctx context.Context, bucket, key string, body io.Reader, opts store.PutOptions) (store.ObjectInfo, error)
}

// putLocked stores the fixture and returns the blob id of each key.
func putLocked(t *testing.T, e lockedEngine, blobID func(key string) int64) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	if err := e.SetBucketVersioning(ctx, "b", store.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UTC()
	ids := map[string]int64{}
	for i, o := range lockedFixture {
		var meta store.ObjectMeta
		if o.lock != nil {
			l := *o.lock
			if l.Mode != "" {
				l.RetainUntil = &until
			}
			meta.Lock = &l
		}
		d := data(uint64(100+i), 3*inlineMax)
		if _, err := e.PutObject(ctx, "b", o.key, bytes.NewReader(d), store.PutOptions{Size: int64(len(d)), Meta: meta}); err != nil {
			t.Fatalf("put %s: %v", o.key, err)
		}
		ids[o.key] = blobID(o.key)
	}
	return ids
}

// TestRepairObjectLock: after the blob files of every object were lost (as
// after a restore in the wrong order), --repair=remove-missing removes the
// objects that Object Lock does not protect and leaves, with a REPAIR line
// and exit 1, those under a legal hold or a running retention;
// --bypass-governance then removes the GOVERNANCE one only. On store/pg and
// on the embedded default, through the command.
func TestRepairObjectLock(t *testing.T) {
	ctx := context.Background()
	engines := []struct {
		name string
		// setup stores the fixture and returns the command's settings.
		setup func(t *testing.T) (environ []string, ids map[string]int64, blobFile func(int64) string)
	}{
		{"pg", func(t *testing.T) ([]string, map[string]int64, func(int64) string) {
			v := newEnv(t, pg.LargeLocal)
			ids := putLocked(t, v.eng, func(key string) int64 {
				var id int64
				if err := v.pool.QueryRow(ctx, `SELECT blob_id FROM objects WHERE bucket = 'b' AND key = $1`, key).Scan(&id); err != nil {
					t.Fatal(err)
				}
				return id
			})
			return []string{"S3GATE_DATABASE_URL=" + v.dsn, "S3GATE_LARGE_ENGINE=local", "S3GATE_DATA_DIR=" + v.media.Dir()}, ids, v.blobFile
		}},
		{"embedded", func(t *testing.T) ([]string, map[string]int64, func(int64) string) {
			dir := t.TempDir()
			e, err := embedded.Open(ctx, embedded.Config{Dir: dir, InlineMax: inlineMax})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.CreateBucket(ctx, "b", ""); err != nil {
				t.Fatal(err)
			}
			ids := putLocked(t, e, func(key string) int64 {
				var id int64
				if err := e.DB().QueryRowContext(ctx, `SELECT blob_id FROM objects WHERE bucket = 'b' AND key = ?`, key).Scan(&id); err != nil {
					t.Fatal(err)
				}
				return id
			})
			if err := e.Close(); err != nil { // fsck needs the data directory to itself
				t.Fatal(err)
			}
			v := &env{media: openMedia(t, dir)}
			return []string{"S3GATE_DATA_DIR=" + dir, fmt.Sprintf("S3GATE_INLINE_MAX=%d", inlineMax)}, ids, v.blobFile
		}},
	}
	// Each step runs on the store the steps before it left.
	steps := []struct {
		args            []string
		code            int
		removed, kept   []string // objects the step removes, objects it reports left under Object Lock
		stillAffected   []string // objects a plain check still finds without bytes afterwards
		wantOut, notOut string
	}{
		{args: []string{"--bypass-governance"}, code: 2},
		{args: []string{"--repair=remove-missing"}, code: 1,
			removed: []string{"free", "hold-off"}, kept: []string{"gov", "comp", "hold", "gov-hold"},
			stillAffected: []string{"gov", "comp", "hold", "gov-hold"},
			wantOut:       "REPAIR left 4 objects without bytes under Object Lock"},
		{args: []string{"--repair=remove-missing", "--bypass-governance"}, code: 1,
			removed: []string{"gov"}, kept: []string{"comp", "hold", "gov-hold"},
			stillAffected: []string{"comp", "hold", "gov-hold"},
			wantOut:       "retained in COMPLIANCE mode until", notOut: "left object b/gov under"},
	}
	for _, eng := range engines {
		t.Run(eng.name, func(t *testing.T) {
			environ, ids, blobFile := eng.setup(t)
			for _, id := range ids {
				if err := os.Remove(blobFile(id)); err != nil {
					t.Fatal(err)
				}
			}
			run := func(args ...string) (int, string) {
				var out, errOut bytes.Buffer
				code := command(ctx, args, environ, &out, &errOut)
				return code, out.String() + errOut.String()
			}
			for _, st := range steps {
				code, out := run(st.args...)
				if code != st.code {
					t.Fatalf("fsck %v: exit %d, want %d\n%s", st.args, code, st.code, out)
				}
				for _, k := range st.removed {
					if !strings.Contains(out, "REPAIR removed object b/"+k+":") {
						t.Errorf("fsck %v did not remove b/%s:\n%s", st.args, k, out)
					}
				}
				for _, k := range st.kept {
					if !strings.Contains(out, "REPAIR left object b/"+k+" under Object Lock") || strings.Contains(out, "removed object b/"+k+":") {
						t.Errorf("fsck %v did not leave b/%s under Object Lock:\n%s", st.args, k, out)
					}
				}
				if !strings.Contains(out, st.wantOut) || (st.notOut != "" && strings.Contains(out, st.notOut)) {
					t.Errorf("fsck %v: output without %q (or with %q):\n%s", st.args, st.wantOut, st.notOut, out)
				}
				if st.stillAffected == nil {
					continue
				}
				code, out = run()
				if code != 1 {
					t.Fatalf("fsck after %v: exit %d, want 1\n%s", st.args, code, out)
				}
				for _, o := range lockedFixture {
					affected := strings.Contains(out, "AFFECTED object-without-bytes object b/"+o.key+": ")
					if want := slices.Contains(st.stillAffected, o.key); affected != want {
						t.Errorf("after fsck %v: b/%s affected %v, want %v:\n%s", st.args, o.key, affected, want, out)
					}
				}
			}
		})
	}
}
