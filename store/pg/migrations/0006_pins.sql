-- s3gate schema, version 6: row pins (docs/adr/010-row-pins.md).
--
-- A row pin protects a blob for one owner (an instance id) until expires_at,
-- in database time. It is committed in the joint transaction of a put, or in
-- a short statement of a GET in PIN_MODE=rows, and renewed every TTL/3 while
-- its guard lives. The foreign key has no ON DELETE action: a blob with any
-- pin row cannot be deleted, so GC first deletes the blob's *expired* rows,
-- then the blob; an unexpired row makes its DELETE fail (23503) and the blob
-- is skipped. A renewal or an upsert only ever touches an unexpired row
-- (WHERE expires_at > clock_timestamp()): an expired row is never revived.
CREATE TABLE pins (
    blob_id    bigint NOT NULL REFERENCES blobs (id),
    owner      text COLLATE "C" NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (blob_id, owner)
);

-- GC's reaping clause deletes expired rows in bounded batches.
CREATE INDEX pins_expires_at ON pins (expires_at);
