package pglo_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store/pg"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/pg/content/contenttest"
)

// BenchmarkPGLOPut is contenttest.PutBench on pglo, against two raw rates of
// large objects written by one connection per stream, data already in
// memory, nothing hashed: lo_from_bytea of the first MiB and 1 MiB lo_put
// calls pipelined (batches of contenttest.RawBatch in autocommit, one round
// trip each), and the LO API in one transaction (lo_create, lo_open, 1 MiB
// lowrite calls: bench/'s pglo-write).
//
//	go test -run '^$' -bench PGLOPut -benchtime 2x ./store/pglo/
func BenchmarkPGLOPut(b *testing.B) {
	contenttest.PutBench(b, pg.LargePGLO, "",
		contenttest.Raw{Name: "raw-lo-pipelined", Write: func(ctx context.Context, p *pgxpool.Pool, _ int64, data []byte) error {
			var oid uint32
			if err := p.QueryRow(ctx, `SELECT lo_from_bytea(0, $1)`, data[:content.ChunkSize]).Scan(&oid); err != nil {
				return err
			}
			for g := content.ChunkSize; g < len(data); g += contenttest.RawBatch * content.ChunkSize {
				bt := &pgx.Batch{}
				for off := g; off < min(len(data), g+contenttest.RawBatch*content.ChunkSize); off += content.ChunkSize {
					bt.Queue(`SELECT lo_put($1, $2, $3)`, oid, int64(off), data[off:off+content.ChunkSize])
				}
				if err := p.SendBatch(ctx, bt).Close(); err != nil {
					return err
				}
			}
			return nil
		}},
		contenttest.Raw{Name: "raw-lo-tx", Write: func(ctx context.Context, p *pgxpool.Pool, _ int64, data []byte) error {
			return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
				los := tx.LargeObjects()
				oid, err := los.Create(ctx, 0)
				if err != nil {
					return err
				}
				lo, err := los.Open(ctx, oid, pgx.LargeObjectModeWrite)
				if err != nil {
					return err
				}
				for off := 0; off < len(data); off += content.ChunkSize {
					if _, err := lo.Write(data[off : off+content.ChunkSize]); err != nil {
						return err
					}
				}
				return lo.Close()
			})
		}})
}
