-- s3gate schema, version 8: a bucket's CORS configuration (PutBucketCors),
-- one JSON document of rules per bucket, which goes with its bucket.
CREATE TABLE bucket_cors (
    bucket     text COLLATE "C" PRIMARY KEY REFERENCES buckets (name) ON DELETE CASCADE,
    rules      jsonb NOT NULL CHECK (jsonb_typeof(rules) = 'array'),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
