package fsck

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/internal/pgtest"
	"github.com/s3gate/s3gate/store"
	"github.com/s3gate/s3gate/store/embedded"
	"github.com/s3gate/s3gate/store/localfs"
	"github.com/s3gate/s3gate/store/pg"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const inlineMax = 1024

type env struct {
	eng   *pg.Engine
	pool  *pgxpool.Pool
	media *localfs.Media
	dsn   string
}

func newEnv(t *testing.T, mode string) *env {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	cfg := pg.Config{DatabaseURL: dsn, InlineMax: inlineMax, Large: mode}
	var media *localfs.Media
	if mode == pg.LargeLocal {
		var err error
		if media, err = localfs.Open(t.TempDir(), false); err != nil {
			t.Fatal(err)
		}
		cfg.Media = media
	}
	eng, err := pg.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	if err := eng.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	return &env{eng: eng, pool: eng.Pool(), media: media, dsn: dsn}
}

func data(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// fill stores an inline object, a large one of 2.5 chunks and a multipart
// object, and returns the blob id of "large".
func (v *env) fill(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	objs := map[string][]byte{"small": data(1, 500), "large": data(2, 5<<19), "empty": nil}
	for k, d := range objs {
		if _, err := v.eng.PutObject(ctx, "b", k, bytes.NewReader(d), store.PutOptions{Size: int64(len(d))}); err != nil {
			t.Fatal(err)
		}
	}
	up, err := v.eng.CreateMultipartUpload(ctx, "b", "mp", store.ObjectMeta{}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var parts []store.CompletePart
	for i, d := range [][]byte{data(3, store.MinPartSize), data(4, 2000)} {
		p, err := v.eng.UploadPart(ctx, "b", "mp", up.UploadID, i+1, bytes.NewReader(d), store.PutOptions{Size: int64(len(d))})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, store.CompletePart{Number: i + 1, ETag: p.ETag})
	}
	if _, err := v.eng.CompleteMultipartUpload(ctx, "b", "mp", up.UploadID, parts, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := v.pool.QueryRow(ctx, `SELECT blob_id FROM objects WHERE bucket = 'b' AND key = 'large'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func (v *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := v.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (v *env) oid(t *testing.T, id int64) uint32 {
	t.Helper()
	var oid uint32
	if err := v.pool.QueryRow(context.Background(), `SELECT lo_oid FROM blobs WHERE id = $1`, id).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	return oid
}

// blobFile mirrors localfs's layout (blobs/<id&0xff>/<id>>8&0xff>/<id>).
func (v *env) blobFile(id int64) string {
	u := uint64(id)
	return filepath.Join(v.media.Dir(), "blobs", fmt.Sprintf("%02x", u&0xff), fmt.Sprintf("%02x", u>>8&0xff), fmt.Sprint(id))
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		damage  func(t *testing.T, v *env, id int64) // nil: clean
		want    string                               // problem kind
		inBlob  bool                                 // the problem names the damaged blob
		skipFor string
	}{
		{name: "clean pglo", mode: pg.LargePGLO},
		{name: "clean pgchunks", mode: pg.LargePGChunks},
		{name: "clean local", mode: pg.LargeLocal},
		{"pgchunks corrupted byte", pg.LargePGChunks, func(t *testing.T, v *env, id int64) {
			v.exec(t, `UPDATE blob_chunks SET data = set_byte(data, 77, get_byte(data, 77) # 1) WHERE blob_id = $1 AND seq = 1`, id)
		}, KindHashMismatch, true, ""},
		{"pgchunks missing middle chunk", pg.LargePGChunks, func(t *testing.T, v *env, id int64) {
			v.exec(t, `DELETE FROM blob_chunks WHERE blob_id = $1 AND seq = 1`, id)
		}, KindMissingContent, true, ""},
		{"pgchunks missing last chunk", pg.LargePGChunks, func(t *testing.T, v *env, id int64) {
			v.exec(t, `DELETE FROM blob_chunks WHERE blob_id = $1 AND seq = 2`, id)
		}, KindMissingContent, true, ""},
		{"pgchunks short chunk", pg.LargePGChunks, func(t *testing.T, v *env, id int64) {
			v.exec(t, `UPDATE blob_chunks SET data = substring(data FROM 1 FOR 100) WHERE blob_id = $1 AND seq = 0`, id)
		}, KindSizeMismatch, true, ""},
		{"pglo corrupted byte", pg.LargePGLO, func(t *testing.T, v *env, id int64) {
			v.exec(t, `SELECT lo_put($1, 1500000, set_byte(lo_get($1, 1500000, 1), 0, get_byte(lo_get($1, 1500000, 1), 0) # 1))`, v.oid(t, id))
		}, KindHashMismatch, true, ""},
		{"pglo missing large object", pg.LargePGLO, func(t *testing.T, v *env, id int64) {
			v.exec(t, `SELECT lo_unlink($1)`, v.oid(t, id))
		}, KindMissingContent, true, ""},
		{"pglo extra bytes", pg.LargePGLO, func(t *testing.T, v *env, id int64) {
			v.exec(t, `SELECT lo_put($1, 5 << 19, '\x00'::bytea)`, v.oid(t, id))
		}, KindSizeMismatch, true, ""},
		{"local flipped byte", pg.LargeLocal, func(t *testing.T, v *env, id int64) {
			flipByte(t, v.blobFile(id), 2_000_000)
		}, KindHashMismatch, true, ""},
		{"local missing file", pg.LargeLocal, func(t *testing.T, v *env, id int64) {
			if err := os.Remove(v.blobFile(id)); err != nil {
				t.Fatal(err)
			}
		}, KindMissingContent, true, ""},
		{"local truncated file", pg.LargeLocal, func(t *testing.T, v *env, id int64) {
			if err := os.Truncate(v.blobFile(id), 1000); err != nil {
				t.Fatal(err)
			}
		}, KindSizeMismatch, true, ""},
		{"inline corrupted byte", pg.LargePGChunks, func(t *testing.T, v *env, _ int64) {
			v.exec(t, `UPDATE blobs SET inline_data = set_byte(inline_data, 3, get_byte(inline_data, 3) # 1)
				WHERE id = (SELECT blob_id FROM objects WHERE bucket = 'b' AND key = 'small')`)
		}, KindHashMismatch, false, ""},
		{"reference without blob row", pg.LargePGChunks, func(t *testing.T, v *env, id int64) {
			// Only a damaged database can hold this: the foreign key is bypassed.
			ctx := context.Background()
			tx, err := v.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			for _, q := range []string{`SET LOCAL session_replication_role = replica`, `DELETE FROM blob_chunks WHERE blob_id = $1`, `DELETE FROM blobs WHERE id = $1`} {
				var args []any
				if strings.Contains(q, "$1") {
					args = []any{id}
				}
				if _, err := tx.Exec(ctx, q, args...); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}, KindMissingBlob, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t, tc.mode)
			id := v.fill(t)
			if tc.damage != nil {
				tc.damage(t, v, id)
			}
			r, err := Check(context.Background(), pg.NewGC(v.pool), Options{Media: v.media})
			if err != nil {
				t.Fatal(err)
			}
			if tc.damage == nil {
				if !r.OK() || r.BlobsChecked != 5 || r.BytesHashed != 500+5<<19+store.MinPartSize+2000 {
					t.Fatalf("clean store: %+v", r)
				}
				return
			}
			if len(r.Problems) != 1 {
				t.Fatalf("want exactly one problem, got %+v", r.Problems)
			}
			p := r.Problems[0]
			if p.Kind != tc.want || (tc.inBlob && p.BlobID != id) {
				t.Fatalf("problem %v, want %s on blob %d", p, tc.want, id)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	v := newEnv(t, pg.LargeLocal)
	id := v.fill(t)
	base := []string{"S3GATE_DATABASE_URL=" + v.dsn, "S3GATE_LARGE_ENGINE=local", "S3GATE_DATA_DIR=" + v.media.Dir()}
	run := func(environ []string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := command(context.Background(), args, environ, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, out, errOut := run(base); code != 0 || !strings.Contains(out, "fsck: clean; 5 blobs checked") {
		t.Fatalf("clean: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := run([]string{"S3GATE_DATA_DIR=" + t.TempDir()}); code != 2 || !strings.Contains(errOut, "no embedded store in") {
		t.Fatalf("embedded: exit %d: %s", code, errOut)
	}
	if code, _, _ := run(base, "--nonsense"); code != 2 {
		t.Fatalf("bad flag: exit %d", code)
	}
	flipByte(t, v.blobFile(id), 10)
	code, out, errOut := run(base)
	if code != 1 || !strings.Contains(out, "PROBLEM hash-mismatch blob") || !strings.Contains(out, "fsck: 1 problems") {
		t.Fatalf("damaged: exit %d\n%s%s", code, out, errOut)
	}
}

// TestCommandEmbedded: fsck on the embedded default (no database URL: the
// data directory) hashes every blob, finds a flipped byte in a blob file,
// and refuses a data directory that a running engine holds.
func TestCommandEmbedded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, err := embedded.Open(ctx, embedded.Config{Dir: dir, InlineMax: inlineMax})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.CreateBucket(ctx, "b", ""); err != nil {
		t.Fatal(err)
	}
	for k, d := range map[string][]byte{"small": data(1, 500), "large": data(2, 5<<19), "empty": nil} {
		if _, err := e.PutObject(ctx, "b", k, bytes.NewReader(d), store.PutOptions{Size: int64(len(d))}); err != nil {
			t.Fatal(err)
		}
	}
	var id int64
	if err := e.DB().QueryRowContext(ctx, `SELECT blob_id FROM objects WHERE bucket = 'b' AND key = 'large'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	environ := []string{"S3GATE_DATA_DIR=" + dir, fmt.Sprintf("S3GATE_INLINE_MAX=%d", inlineMax)}
	run := func() (int, string, string) {
		var out, errOut bytes.Buffer
		code := command(ctx, nil, environ, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := run(); code != 1 || !strings.Contains(errOut, dir) || !strings.Contains(errOut, "in use") {
		t.Fatalf("while the engine is open: exit %d: %s", code, errOut)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := run(); code != 0 || !strings.Contains(out, "fsck: clean; 3 blobs checked") {
		t.Fatalf("clean: exit %d\n%s%s", code, out, errOut)
	}
	v := &env{media: openMedia(t, dir)}
	flipByte(t, v.blobFile(id), 1_000_000)
	code, out, errOut := run()
	if code != 1 || !strings.Contains(out, fmt.Sprintf("PROBLEM hash-mismatch blob %d (local)", id)) || !strings.Contains(out, "fsck: 1 problems") {
		t.Fatalf("damaged: exit %d\n%s%s", code, out, errOut)
	}
}

func openMedia(t *testing.T, dir string) *localfs.Media {
	t.Helper()
	m, err := localfs.Open(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
