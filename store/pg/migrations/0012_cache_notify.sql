-- s3gate schema, version 12: every change to what gateways cache (buckets,
-- their configuration documents, access keys) notifies channel
-- s3gate_metadata in the writing transaction, whoever writes (another
-- instance, an admin command, psql). PostgreSQL delivers it at COMMIT, and
-- not at all on ROLLBACK; each gateway LISTENs on a dedicated session and
-- drops the entry named by the payload (docs/adr/018-metadata-cache.md).
-- Payloads: 'b:<bucket>', 'k:<access key id>', '*' (drop everything).
CREATE FUNCTION s3gate_metadata_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM pg_notify('s3gate_metadata', '*');
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        PERFORM pg_notify('s3gate_metadata', TG_ARGV[0] || ':' || (to_jsonb(OLD) ->> TG_ARGV[1]));
    END IF;
    IF TG_OP <> 'DELETE' THEN
        PERFORM pg_notify('s3gate_metadata', TG_ARGV[0] || ':' || (to_jsonb(NEW) ->> TG_ARGV[1]));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER buckets_metadata_notify AFTER INSERT OR UPDATE OR DELETE ON buckets
    FOR EACH ROW EXECUTE FUNCTION s3gate_metadata_notify('b', 'name');
CREATE TRIGGER bucket_configs_metadata_notify AFTER INSERT OR UPDATE OR DELETE ON bucket_configs
    FOR EACH ROW EXECUTE FUNCTION s3gate_metadata_notify('b', 'bucket');
CREATE TRIGGER access_keys_metadata_notify AFTER INSERT OR UPDATE OR DELETE ON access_keys
    FOR EACH ROW EXECUTE FUNCTION s3gate_metadata_notify('k', 'id');
CREATE TRIGGER buckets_metadata_truncate AFTER TRUNCATE ON buckets
    FOR EACH STATEMENT EXECUTE FUNCTION s3gate_metadata_notify();
CREATE TRIGGER bucket_configs_metadata_truncate AFTER TRUNCATE ON bucket_configs
    FOR EACH STATEMENT EXECUTE FUNCTION s3gate_metadata_notify();
CREATE TRIGGER access_keys_metadata_truncate AFTER TRUNCATE ON access_keys
    FOR EACH STATEMENT EXECUTE FUNCTION s3gate_metadata_notify();
