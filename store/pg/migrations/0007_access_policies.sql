-- s3gate schema, version 7: access policies. Per-bucket configuration
-- documents (the bucket policy, Block Public Access), one row per bucket and
-- name; they go with their bucket (ON DELETE CASCADE): DeleteBucket needs no
-- step of its own.
CREATE TABLE bucket_configs (
    bucket     text COLLATE "C" NOT NULL REFERENCES buckets (name) ON DELETE CASCADE,
    name       text COLLATE "C" NOT NULL CHECK (name <> ''),
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (bucket, name)
);

-- An access key's own policy document (JSON, without Principal): '' for none.
ALTER TABLE access_keys ADD COLUMN policy text NOT NULL DEFAULT '';
