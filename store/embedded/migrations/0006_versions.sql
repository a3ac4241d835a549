-- s3gate embedded schema, version 6: object versions (ADR 014), as on the
-- PostgreSQL engine. objects stays the table of current versions;
-- object_versions holds noncurrent versions and all delete markers; seq
-- (AUTOINCREMENT: never reused, always increasing) orders a key's versions.
ALTER TABLE objects ADD COLUMN version_id TEXT NOT NULL DEFAULT 'null';

-- No cascade from buckets: a bucket with versions is not empty.
CREATE TABLE object_versions (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    bucket        TEXT NOT NULL REFERENCES buckets (name),
    key           TEXT NOT NULL,
    version_id    TEXT NOT NULL,
    delete_marker INTEGER NOT NULL DEFAULT 0 CHECK (delete_marker IN (0, 1)),
    blob_id       INTEGER REFERENCES blobs (id),
    size          INTEGER NOT NULL DEFAULT 0 CHECK (size >= 0),
    etag          TEXT NOT NULL DEFAULT '',
    meta          TEXT NOT NULL DEFAULT '{}',
    checksum      TEXT,
    part_count    INTEGER NOT NULL DEFAULT 0,
    last_modified INTEGER NOT NULL,
    UNIQUE (bucket, key, version_id),
    CHECK (CASE WHEN delete_marker THEN blob_id IS NULL AND part_count = 0
                ELSE (blob_id IS NULL) = (part_count > 0) END)
);
-- Key order, newest first within a key: listings and promotion read it.
CREATE INDEX object_versions_listing ON object_versions (bucket, key, seq DESC);
CREATE INDEX object_versions_blob_id ON object_versions (blob_id) WHERE blob_id IS NOT NULL;

-- The manifest of a noncurrent multipart version.
CREATE TABLE version_parts (
    seq          INTEGER NOT NULL REFERENCES object_versions (seq) ON DELETE CASCADE,
    part_number  INTEGER NOT NULL,
    blob_id      INTEGER NOT NULL REFERENCES blobs (id),
    size         INTEGER NOT NULL CHECK (size >= 0),
    start_offset INTEGER NOT NULL CHECK (start_offset >= 0),
    etag         TEXT NOT NULL,
    checksum     TEXT,
    PRIMARY KEY (seq, part_number)
) WITHOUT ROWID;
CREATE INDEX version_parts_blob_id ON version_parts (blob_id);
