-- s3gate embedded schema, version 3: access policies. Per-bucket
-- configuration documents (the bucket policy, Block Public Access), one row
-- per bucket and name; they go with their bucket (ON DELETE CASCADE;
-- foreign keys are on for every connection).
CREATE TABLE bucket_configs (
    bucket     TEXT NOT NULL REFERENCES buckets (name) ON DELETE CASCADE,
    name       TEXT NOT NULL CHECK (name <> ''),
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (bucket, name)
);

-- An access key's own policy document (JSON, without Principal): '' for none.
ALTER TABLE access_keys ADD COLUMN policy TEXT NOT NULL DEFAULT '';
