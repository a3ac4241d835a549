-- s3gate schema, version 1: buckets, content-addressed blobs, objects,
-- multipart uploads. Keys use COLLATE "C" so that listing order is byte order,
-- as S3 requires, whatever the database's default collation.

CREATE TABLE buckets (
    name       text COLLATE "C" PRIMARY KEY,
    region     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Blob ids come from a sequence and are never reused: local files and chunk
-- rows are keyed by blob id, and the id is drawn before the content is written.
CREATE SEQUENCE blob_ids AS bigint;

-- One row per distinct content (sha256). Every row that references a blob has
-- a foreign key to it, so that a later GC can delete a blob with a plain
-- DELETE and let the FK check arbitrate (it sees committed references and waits
-- for in-flight ones that hold FOR KEY SHARE).
CREATE TABLE blobs (
    id          bigint PRIMARY KEY DEFAULT nextval('blob_ids'),
    sha256      bytea NOT NULL UNIQUE CHECK (length(sha256) = 32),
    size        bigint NOT NULL CHECK (size >= 0),
    tier        text NOT NULL CHECK (tier IN ('inline', 'pglo', 'pgchunks', 'local')),
    inline_data bytea,
    lo_oid      oid,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((tier = 'inline') = (inline_data IS NOT NULL)),
    CHECK ((tier = 'pglo') = (lo_oid IS NOT NULL))
);
ALTER SEQUENCE blob_ids OWNED BY blobs.id;

-- Content of 'pgchunks' blobs: 1 MiB rows, uncompressed (content is usually
-- already compressed, and EXTERNAL lets substring() read a slice). The FK is
-- deferred because the chunks are written before the blob row (the sha256 is
-- known only at the end of the body); deleting a blob deletes its chunks.
CREATE TABLE blob_chunks (
    blob_id bigint NOT NULL REFERENCES blobs (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    seq     int NOT NULL CHECK (seq >= 0),
    data    bytea NOT NULL,
    PRIMARY KEY (blob_id, seq)
);
ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

-- An object is either one blob (blob_id) or a manifest of part blobs
-- (part_count > 0, rows in object_parts).
CREATE TABLE objects (
    bucket        text COLLATE "C" NOT NULL REFERENCES buckets (name),
    key           text COLLATE "C" NOT NULL,
    blob_id       bigint REFERENCES blobs (id),
    size          bigint NOT NULL CHECK (size >= 0),
    etag          text NOT NULL,
    meta          jsonb NOT NULL DEFAULT '{}',
    checksum      jsonb,
    part_count    int NOT NULL DEFAULT 0,
    last_modified timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (bucket, key),
    CHECK ((blob_id IS NULL) = (part_count > 0))
);
CREATE INDEX objects_blob_id ON objects (blob_id) WHERE blob_id IS NOT NULL;

-- start_offset is the part's first byte within the object, so that a Range
-- finds its parts with an index range instead of a running sum.
CREATE TABLE object_parts (
    bucket       text COLLATE "C" NOT NULL,
    key          text COLLATE "C" NOT NULL,
    part_number  int NOT NULL,
    blob_id      bigint NOT NULL REFERENCES blobs (id),
    size         bigint NOT NULL CHECK (size >= 0),
    start_offset bigint NOT NULL CHECK (start_offset >= 0),
    etag         text NOT NULL,
    checksum     jsonb,
    PRIMARY KEY (bucket, key, part_number),
    FOREIGN KEY (bucket, key) REFERENCES objects (bucket, key) ON DELETE CASCADE
);
CREATE INDEX object_parts_blob_id ON object_parts (blob_id);

CREATE TABLE uploads (
    upload_id     text PRIMARY KEY,
    bucket        text COLLATE "C" NOT NULL REFERENCES buckets (name),
    key           text COLLATE "C" NOT NULL,
    meta          jsonb NOT NULL DEFAULT '{}',
    checksum_alg  text NOT NULL DEFAULT '',
    checksum_type text NOT NULL DEFAULT '',
    initiated     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX uploads_listing ON uploads (bucket, key, initiated, upload_id);

CREATE TABLE upload_parts (
    upload_id     text NOT NULL REFERENCES uploads (upload_id) ON DELETE CASCADE,
    part_number   int NOT NULL,
    blob_id       bigint NOT NULL REFERENCES blobs (id),
    size          bigint NOT NULL CHECK (size >= 0),
    etag          text NOT NULL,
    checksum      jsonb,
    last_modified timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (upload_id, part_number)
);
CREATE INDEX upload_parts_blob_id ON upload_parts (blob_id);
