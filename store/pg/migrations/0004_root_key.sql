-- s3gate schema, version 4: the generated root key pair, kept in the database
-- so that every instance on it (the owner, its standbys, later a fleet)
-- accepts the same root key. It is used only when the environment sets no
-- root key (S3GATE_ROOT_ACCESS_KEY / S3GATE_ROOT_SECRET_KEY), which wins.
--
-- One row at most: the first instance to start inserts it with ON CONFLICT
-- DO NOTHING and every instance reads it back. Like access_keys, the secret
-- is stored as it is (SigV4 needs it): only the gateway's own role may read
-- this table.
CREATE TABLE root_key (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id         text COLLATE "C" NOT NULL CHECK (id <> ''),
    secret     text NOT NULL CHECK (secret <> ''),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
REVOKE ALL ON root_key FROM PUBLIC;
