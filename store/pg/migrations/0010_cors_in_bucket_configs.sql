-- s3gate schema, version 10: a bucket's CORS rules become one more document
-- of bucket_configs (name 'cors'), so that a bucket's configuration is kept
-- in one place; bucket_cors goes.
INSERT INTO bucket_configs (bucket, name, value, updated_at)
    SELECT bucket, 'cors', rules::text, updated_at FROM bucket_cors
    ON CONFLICT (bucket, name) DO NOTHING;
DROP TABLE bucket_cors;
