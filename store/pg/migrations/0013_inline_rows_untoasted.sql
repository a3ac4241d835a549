-- s3gate schema, version 13: small inline content stays in the blobs heap row
-- (docs/adr/021-inline-rows-untoasted.md). With the default target (~2 KB) a
-- 4 KiB inline blob was first run through pglz (incompressible content: the
-- attempt is wasted) and then moved out of line into three TOAST chunks: six
-- more WAL records and ten more buffer touches per put, and a TOAST index
-- probe per GET. With the largest target a row that fits a page (up to about
-- 8 KB) is stored as it is; larger inline content is still compressed or moved
-- out of line as before. Only new rows are affected; no rewrite. Setting a
-- reloption is idempotent.
ALTER TABLE blobs SET (toast_tuple_target = 8160);
