package pgops

import (
	"path/filepath"
	"testing"

	"github.com/s3gate/s3gate/config"
	"github.com/s3gate/s3gate/internal/pgtest"
)

// TestDumpRestore dumps a live gateway's database with pg_dump -Fc (large
// objects are in a whole-database dump by default) and restores it with
// pg_restore into a new database: a gateway started there reads every
// object of every size class, on pgchunks and on pglo, byte-exact, and fsck
// finds the store clean.
func TestDumpRestore(t *testing.T) {
	src := pgtest.DSN(t)
	chunks := sizeClasses("chunks/", 1)
	lo := sizeClasses("lo/", 100)
	// One database holds both engines' content: a gateway reads a blob with
	// the engine of its tier, whatever engine it writes with.
	t.Run("write pgchunks", func(t *testing.T) {
		c := client(start(t, config.EnginePGChunks, src))
		createBucket(t, c, "bkt")
		putAll(t, c, "bkt", chunks)
	})
	live := client(start(t, config.EnginePGLO, src))
	putAll(t, live, "bkt", lo)
	var los int
	if err := connect(t, src).QueryRow(ctxT(t), `SELECT count(*) FROM pg_largeobject_metadata`).Scan(&los); err != nil || los == 0 {
		t.Fatalf("large objects in the source: %d, %v; want some", los, err)
	}

	dump := filepath.Join(t.TempDir(), "s3gate.dump")
	tool(t, "pg_dump", "-Fc", "-f", dump, "-d", src) // the pglo gateway is still serving
	dst := pgtest.DSN(t)
	tool(t, "pg_restore", "--no-owner", "--exit-on-error", "-d", dst, dump)

	var restored int
	if err := connect(t, dst).QueryRow(ctxT(t), `SELECT count(*) FROM pg_largeobject_metadata`).Scan(&restored); err != nil || restored != los {
		t.Fatalf("large objects restored: %d, %v; want %d", restored, err, los)
	}
	c := client(start(t, config.EnginePGChunks, dst))
	expectExactly(t, c, "bkt", append(chunks, lo...))
	fsckClean(t, dst)
}
