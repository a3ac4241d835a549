-- s3gate schema, version 2: access keys managed at run time
-- (`s3gate admin key create|list|delete`), beside the root key from the
-- environment.
--
-- The secret is stored as it is, not hashed: SigV4 derives its signing key
-- from the secret, so the gateway must be able to read it back. Protect this
-- table like a password file: only the gateway's own role (the owner) may read
-- it, and backups of the database carry the secrets.
CREATE TABLE access_keys (
    id         text COLLATE "C" PRIMARY KEY,
    secret     text NOT NULL CHECK (secret <> ''),
    -- Buckets the key may use; empty means every bucket.
    buckets    text[] NOT NULL DEFAULT '{}',
    read_only  boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK (id <> '')
);
REVOKE ALL ON access_keys FROM PUBLIC;
