-- s3gate embedded schema, version 5: a bucket's CORS rules become one more
-- document of bucket_configs (name 'cors'), so that a bucket's configuration
-- is kept in one place; bucket_cors goes. updated_at is in microseconds since
-- the epoch, as the engine writes it.
INSERT INTO bucket_configs (bucket, name, value, updated_at)
    SELECT bucket, 'cors', rules, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) FROM bucket_cors
    WHERE true ON CONFLICT (bucket, name) DO NOTHING;
DROP TABLE bucket_cors;
