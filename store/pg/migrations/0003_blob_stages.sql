-- s3gate schema, version 3: large content is staged outside the publishing
-- transaction (docs/adr/007-staging-outside-the-transaction.md).
--
-- A put above the knee draws a blob id, registers it here and writes its
-- content (chunk rows, or one large object) in short autocommit statements,
-- each of which touches this row and writes only if the row still exists. The
-- joint transaction then deletes the row while it inserts the blob row, so
-- content is always owned by exactly one of: a stage row, a blob row. GC reaps
-- stage rows untouched for its stage grace (puts that crashed or were
-- abandoned), with their content; a reaped put then fails to publish.
CREATE TABLE blob_stages (
    blob_id    bigint PRIMARY KEY,
    lo_oid     oid UNIQUE,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    touched_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Staged chunk rows are committed before their blob row exists, so the
-- foreign key to blobs goes; GC deletes a blob's chunk rows explicitly with
-- its row, and a stage row's with the stage row.
ALTER TABLE blob_chunks DROP CONSTRAINT blob_chunks_blob_id_fkey;
