-- s3gate schema, version 5: the registry of a fleet's instances and the shared
-- media marker (docs/adr/009-fleet-mode.md).
--
-- In fleet mode (S3GATE_FLEET=true) each instance inserts its row on start,
-- heartbeats it every ttl/3 on its own checked session and deletes it on a
-- clean shutdown; GC's sweeper deletes rows whose heartbeat is older than their
-- ttl. Every time is database time (clock_timestamp()). An instance's id is
-- also the owner of its row pins.
CREATE TABLE instances (
    id           text COLLATE "C" PRIMARY KEY CHECK (id <> ''),
    host         text NOT NULL,
    pid          integer NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ttl          interval NOT NULL CHECK (ttl > interval '0')
);

-- One row at most: the marker that the first fleet instance on local media
-- wrote into its data directory. Every later instance must find the same
-- marker in its own data directory, or the media is not shared and it refuses
-- to start.
CREATE TABLE fleet_media (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    marker     text NOT NULL CHECK (marker <> ''),
    written_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
