-- s3gate schema, version 11: object versions (ADR 014). objects stays the
-- table of current versions, which every hot path reads; object_versions
-- holds every other version: noncurrent ones and all delete markers (a key
-- whose latest version is a delete marker has no objects row). seq orders
-- the versions of a key: it is drawn when a row is inserted, i.e. when a
-- version is demoted or a marker created, under the key's object lock.
ALTER TABLE objects ADD COLUMN version_id text COLLATE "C" NOT NULL DEFAULT 'null';

CREATE SEQUENCE version_seqs AS bigint;

-- No cascade from buckets: a bucket with versions is not empty.
CREATE TABLE object_versions (
    seq           bigint PRIMARY KEY DEFAULT nextval('version_seqs'),
    bucket        text COLLATE "C" NOT NULL REFERENCES buckets (name),
    key           text COLLATE "C" NOT NULL,
    version_id    text COLLATE "C" NOT NULL,
    delete_marker boolean NOT NULL DEFAULT false,
    blob_id       bigint REFERENCES blobs (id),
    size          bigint NOT NULL DEFAULT 0 CHECK (size >= 0),
    etag          text NOT NULL DEFAULT '',
    meta          jsonb NOT NULL DEFAULT '{}',
    checksum      jsonb,
    part_count    int NOT NULL DEFAULT 0,
    last_modified timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (bucket, key, version_id),
    CHECK (CASE WHEN delete_marker THEN blob_id IS NULL AND part_count = 0
                ELSE (blob_id IS NULL) = (part_count > 0) END)
);
ALTER SEQUENCE version_seqs OWNED BY object_versions.seq;
-- Key order, newest first within a key: listings and promotion read it.
CREATE INDEX object_versions_listing ON object_versions (bucket, key, seq DESC);
CREATE INDEX object_versions_blob_id ON object_versions (blob_id) WHERE blob_id IS NOT NULL;

-- The manifest of a noncurrent multipart version.
CREATE TABLE version_parts (
    seq          bigint NOT NULL REFERENCES object_versions (seq) ON DELETE CASCADE,
    part_number  int NOT NULL,
    blob_id      bigint NOT NULL REFERENCES blobs (id),
    size         bigint NOT NULL CHECK (size >= 0),
    start_offset bigint NOT NULL CHECK (start_offset >= 0),
    etag         text NOT NULL,
    checksum     jsonb,
    PRIMARY KEY (seq, part_number)
);
CREATE INDEX version_parts_blob_id ON version_parts (blob_id);
