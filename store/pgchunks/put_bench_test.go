package pgchunks_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/s3gate/s3gate/store/pg"
	"github.com/s3gate/s3gate/store/pg/content"
	"github.com/s3gate/s3gate/store/pg/content/contenttest"
)

// BenchmarkPGChunksPut is contenttest.PutBench on pgchunks, against two raw
// rates of 1 MiB bytea rows (STORAGE EXTERNAL) written by one connection per
// stream, data already in memory, nothing hashed: pipelined (batches of
// contenttest.RawBatch statements in autocommit, one round trip each) and in
// one transaction, one statement after the other (bench/'s bytea-write;
// with pgx on one host, the fastest raw form measured here).
//
//	go test -run '^$' -bench PGChunksPut -benchtime 2x ./store/pgchunks/
func BenchmarkPGChunksPut(b *testing.B) {
	const insert = `INSERT INTO raw_chunks (obj, seq, data) VALUES ($1, $2, $3)`
	contenttest.PutBench(b, pg.LargePGChunks,
		`CREATE TABLE raw_chunks (obj bigint, seq int, data bytea, PRIMARY KEY (obj, seq));
		ALTER TABLE raw_chunks ALTER COLUMN data SET STORAGE EXTERNAL`,
		contenttest.Raw{Name: "raw-bytea-pipelined", Write: func(ctx context.Context, p *pgxpool.Pool, id int64, data []byte) error {
			for g := 0; g < len(data); g += contenttest.RawBatch * content.ChunkSize {
				bt := &pgx.Batch{}
				for off := g; off < min(len(data), g+contenttest.RawBatch*content.ChunkSize); off += content.ChunkSize {
					bt.Queue(insert, id, int32(off/content.ChunkSize), data[off:off+content.ChunkSize])
				}
				if err := p.SendBatch(ctx, bt).Close(); err != nil {
					return err
				}
			}
			return nil
		}},
		contenttest.Raw{Name: "raw-bytea-tx", Write: func(ctx context.Context, p *pgxpool.Pool, id int64, data []byte) error {
			return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
				for off := 0; off < len(data); off += content.ChunkSize {
					if _, err := tx.Exec(ctx, insert, id, int32(off/content.ChunkSize), data[off:off+content.ChunkSize]); err != nil {
						return err
					}
				}
				return nil
			})
		}})
}
