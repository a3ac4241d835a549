-- s3gate embedded schema, version 4: a bucket's CORS configuration
-- (PutBucketCors), one JSON array of rules per bucket, which goes with its
-- bucket.
CREATE TABLE bucket_cors (
    bucket TEXT PRIMARY KEY REFERENCES buckets (name) ON DELETE CASCADE,
    rules  TEXT NOT NULL CHECK (json_valid(rules) AND json_type(rules) = 'array')
);
