-- s3gate embedded schema, version 2: access keys managed at run time
-- (`s3gate admin key create|list|delete`), beside the root key.
--
-- The secret is stored as it is, not hashed: SigV4 derives its signing key
-- from the secret, so the gateway must be able to read it back. meta.db lives
-- in the data directory, which only the gateway's user may read.
-- buckets is a JSON array of bucket names; [] means every bucket.
CREATE TABLE access_keys (
    id         TEXT PRIMARY KEY CHECK (id <> ''),
    secret     TEXT NOT NULL CHECK (secret <> ''),
    buckets    TEXT NOT NULL DEFAULT '[]',
    read_only  INTEGER NOT NULL DEFAULT 0 CHECK (read_only IN (0, 1)),
    created_at INTEGER NOT NULL
);
