package fsck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/pg"
)

// lockedFixture is what TestRepairObjectLock stores on each engine: one
// object above the knee per lock state, on a versioned bucket. A noncurrent
// entry is its key's older version (the lock state is that version's), under
// a current version without a lock that keeps its bytes.
var lockedFixture = []struct {
	key        string
	lock       *store.ObjectLock
	noncurrent bool
}{
	{"free", nil, false},
	{"hold-off", &store.ObjectLock{LegalHold: store.LegalHoldOff}, false},
	{"gov", &store.ObjectLock{Mode: store.LockGovernance}, false},
	{"comp", &store.ObjectLock{Mode: store.LockCompliance}, false},
	{"hold", &store.ObjectLock{LegalHold: store.LegalHoldOn}, false},
	{"gov-hold", &store.ObjectLock{Mode: store.LockGovernance, LegalHold: store.LegalHoldOn}, false},
	{"old-free", nil, true},
	{"old-gov", &store.ObjectLock{Mode: store.LockGovernance}, true},
	{"old-comp", &store.ObjectLock{Mode: store.LockCompliance}, true},
}

// fixtureWhere is how fsck names the fixture's version of key in its lines
// (fsck's where): a noncurrent one by a version id the pattern matches.
func fixtureWhere(key string) string {
	if strings.HasPrefix(key, "old-") {
		return `version \S+ of object b/` + regexp.QuoteMeta(key)
	}
	return "object b/" + regexp.QuoteMeta(key)
}

// lockedEngine is the part of both metadata engines the fixture needs.
type lockedEngine interface {
	SetBucketVersioning(ctx context.Context, bucket, status string) error
	PutObject(ctx context.Context, bucket, key string, body io.Reader, opts store.PutOptions) (store.ObjectInfo, error)
}

// putLocked stores the fixture and returns the blob id of each key's
// version of the fixture.
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
		if o.noncurrent {
			d := data(uint64(200+i), 3*inlineMax)
			if _, err := e.PutObject(ctx, "b", o.key, bytes.NewReader(d), store.PutOptions{Size: int64(len(d))}); err != nil {
				t.Fatalf("put %s again: %v", o.key, err)
			}
		}
	}
	return ids
}

// TestRepairObjectLock: after the blob files of every object were lost (as
// after a restore in the wrong order), --repair=remove-missing removes the
// objects that Object Lock does not protect and leaves, with a REPAIR line
// and exit 1, those under a legal hold or a running retention;
// --bypass-governance then removes the GOVERNANCE ones only. Noncurrent
// versions without bytes are judged alike, and their keys' current versions
// stay. On store/pg and on the embedded default, through the command.
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
			removed: []string{"free", "hold-off", "old-free"}, kept: []string{"gov", "comp", "hold", "gov-hold", "old-gov", "old-comp"},
			stillAffected: []string{"gov", "comp", "hold", "gov-hold", "old-gov", "old-comp"},
			wantOut:       "REPAIR left 6 versions without bytes under Object Lock"},
		{args: []string{"--repair=remove-missing", "--bypass-governance"}, code: 1,
			removed: []string{"gov", "old-gov"}, kept: []string{"comp", "hold", "gov-hold", "old-comp"},
			stillAffected: []string{"comp", "hold", "gov-hold", "old-comp"},
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
				has := func(pattern string) bool { return regexp.MustCompile(pattern).MatchString(out) }
				for _, k := range st.removed {
					if !has("REPAIR removed " + fixtureWhere(k) + ": blob ") {
						t.Errorf("fsck %v did not remove b/%s:\n%s", st.args, k, out)
					}
				}
				for _, k := range st.kept {
					// The line names the version once, then says what keeps it.
					if !has("REPAIR left "+fixtureWhere(k)+" under Object Lock: the version is (retained in (GOVERNANCE|COMPLIANCE) mode until|under a legal hold)") ||
						has("removed "+fixtureWhere(k)+":") {
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
					affected := regexp.MustCompile("AFFECTED object-without-bytes " + fixtureWhere(o.key) + ": ").MatchString(out)
					if want := slices.Contains(st.stillAffected, o.key); affected != want {
						t.Errorf("after fsck %v: b/%s affected %v, want %v:\n%s", st.args, o.key, affected, want, out)
					}
					if o.noncurrent && strings.Contains(out, "AFFECTED object-without-bytes object b/"+o.key+": ") {
						t.Errorf("after fsck %v: the current version of b/%s affected:\n%s", st.args, o.key, out)
					}
				}
			}
		})
	}
}

// TestLockReason: the REPAIR line takes the reason from the store's
// LockedError, however wrapped, and the sentinel's text when there is none.
func TestLockReason(t *testing.T) {
	until := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("version v of b/k: %w", &store.LockedError{LegalHold: true}), "the version is under a legal hold"},
		{fmt.Errorf("version v of b/k: %w", &store.LockedError{Mode: store.LockCompliance, RetainUntil: until}),
			"the version is retained in COMPLIANCE mode until 2030-01-02T03:04:05Z"},
		{fmt.Errorf("version v of b/k: %w", store.ErrObjectLocked), "the version is protected by Object Lock"},
		{fmt.Errorf("version v of b/k: %w", &store.LockedError{}), "the version is protected by Object Lock"},
	} {
		if got := lockReason(c.err); got != c.want {
			t.Errorf("lockReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
