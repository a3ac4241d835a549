-- s3gate embedded schema, version 1: the same tables as the PostgreSQL engine,
-- in SQLite. Text compares with the BINARY collation (memcmp), so keys sort in
-- byte order as S3 requires. Times are INTEGER microseconds since the Unix
-- epoch (UTC), JSON documents are TEXT.

CREATE TABLE buckets (
    name       TEXT PRIMARY KEY,
    region     TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- One row per distinct content (sha256). AUTOINCREMENT: ids of deleted blobs
-- are never handed out again, because local files are named by blob id.
CREATE TABLE blobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    sha256      BLOB NOT NULL UNIQUE CHECK (length(sha256) = 32),
    size        INTEGER NOT NULL CHECK (size >= 0),
    tier        TEXT NOT NULL CHECK (tier IN ('inline', 'local')),
    inline_data BLOB,
    created_at  INTEGER NOT NULL,
    CHECK ((tier = 'inline') = (inline_data IS NOT NULL))
);

-- An object is either one blob (blob_id) or a manifest of part blobs
-- (part_count > 0, rows in object_parts).
CREATE TABLE objects (
    bucket        TEXT NOT NULL REFERENCES buckets (name),
    key           TEXT NOT NULL,
    blob_id       INTEGER REFERENCES blobs (id),
    size          INTEGER NOT NULL CHECK (size >= 0),
    etag          TEXT NOT NULL,
    meta          TEXT NOT NULL DEFAULT '{}',
    checksum      TEXT,
    part_count    INTEGER NOT NULL DEFAULT 0,
    last_modified INTEGER NOT NULL,
    PRIMARY KEY (bucket, key),
    CHECK ((blob_id IS NULL) = (part_count > 0))
) WITHOUT ROWID;
CREATE INDEX objects_blob_id ON objects (blob_id) WHERE blob_id IS NOT NULL;

-- start_offset is the part's first byte within the object, so that a Range
-- finds its parts without a running sum.
CREATE TABLE object_parts (
    bucket       TEXT NOT NULL,
    key          TEXT NOT NULL,
    part_number  INTEGER NOT NULL,
    blob_id      INTEGER NOT NULL REFERENCES blobs (id),
    size         INTEGER NOT NULL CHECK (size >= 0),
    start_offset INTEGER NOT NULL CHECK (start_offset >= 0),
    etag         TEXT NOT NULL,
    checksum     TEXT,
    PRIMARY KEY (bucket, key, part_number),
    FOREIGN KEY (bucket, key) REFERENCES objects (bucket, key) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX object_parts_blob_id ON object_parts (blob_id);

CREATE TABLE uploads (
    upload_id     TEXT PRIMARY KEY,
    bucket        TEXT NOT NULL REFERENCES buckets (name),
    key           TEXT NOT NULL,
    meta          TEXT NOT NULL DEFAULT '{}',
    checksum_alg  TEXT NOT NULL DEFAULT '',
    checksum_type TEXT NOT NULL DEFAULT '',
    initiated     INTEGER NOT NULL
);
CREATE INDEX uploads_listing ON uploads (bucket, key, initiated, upload_id);

CREATE TABLE upload_parts (
    upload_id     TEXT NOT NULL REFERENCES uploads (upload_id) ON DELETE CASCADE,
    part_number   INTEGER NOT NULL,
    blob_id       INTEGER NOT NULL REFERENCES blobs (id),
    size          INTEGER NOT NULL CHECK (size >= 0),
    etag          TEXT NOT NULL,
    checksum      TEXT,
    last_modified INTEGER NOT NULL,
    PRIMARY KEY (upload_id, part_number)
) WITHOUT ROWID;
CREATE INDEX upload_parts_blob_id ON upload_parts (blob_id);
