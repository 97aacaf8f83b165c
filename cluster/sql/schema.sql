-- sessionlog's fleet schema in PostgreSQL, the system of record (version 3).
--
-- Every session table's primary key starts with the lineage root id (a session's fork-tree
-- root), so a distributed PostgreSQL can place a fork tree on one shard and every session
-- operation is single-shard (Citus: create_distributed_table(table, 'root_id')). `lineage` routes
-- a session id to its root and is keyed by the id alone (a Citus reference table, or
-- distributed by `id`); `schema_version` is one row.
--
-- Hosts never write these tables directly: they run the SECURITY DEFINER functions in
-- functions.sql, which fence every write by the session's owner epoch and act only as the host
-- of the caller's login role.

CREATE SCHEMA IF NOT EXISTS sessionlog;

CREATE TABLE IF NOT EXISTS sessionlog.schema_version (
    version integer NOT NULL
);

CREATE TABLE IF NOT EXISTS sessionlog.sessions (
    root_id     text        NOT NULL,
    id          text        NOT NULL,
    -- The log's format and encoding, and its header's bytes in the file (the header line and
    -- its newline, or its zstd frame).
    version     integer     NOT NULL,
    zstd        boolean     NOT NULL,
    header      bytea       NOT NULL,
    -- DSH's reader verdict on the log after its last batch.
    verdict     text        NOT NULL,
    -- The seq and the batch number the next batch must start at.
    next_seq    bigint      NOT NULL,
    next_batch  bigint      NOT NULL,
    -- The host that may write the session, the epoch it acquired it at (bumped by every
    -- acquisition: the fence), and until when its ownership needs no force to be taken over.
    owner       text,
    owner_epoch bigint      NOT NULL DEFAULT 0,
    lease_until timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz,
    PRIMARY KEY (root_id, id)
);

-- A fork's parent and the events it inherited (null for a session that is no fork). Added to a
-- version-1 schema by `cluster init`.
ALTER TABLE sessionlog.sessions ADD COLUMN IF NOT EXISTS parent_id text;
ALTER TABLE sessionlog.sessions ADD COLUMN IF NOT EXISTS seed bigint;

CREATE TABLE IF NOT EXISTS sessionlog.batches (
    root_id    text    NOT NULL,
    session_id text    NOT NULL,
    -- The batch number (the header is batch 0), its first seq and how many events it carries.
    batch      bigint  NOT NULL,
    first_seq  bigint  NOT NULL,
    events     bigint  NOT NULL,
    -- The bytes the batch adds to the log file (its lines, or its zstd frame) and their crc32.
    bytes      bytea   NOT NULL,
    crc        bigint  NOT NULL,
    PRIMARY KEY (root_id, session_id, batch)
);

-- A batch's bytes (about 2 KB for a typical agent step) pass PostgreSQL's TOAST threshold, so
-- they are compressed as they are stored; pglz, the default, takes about a third of the server's
-- CPU per committed batch, lz4 a small fraction of it for a similar size. Servers built without
-- lz4 keep the default.
DO $$
BEGIN
    ALTER TABLE sessionlog.batches ALTER COLUMN bytes SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value OR undefined_object THEN
    NULL;
END
$$;

CREATE TABLE IF NOT EXISTS sessionlog.lineage (
    id      text PRIMARY KEY,
    root_id text NOT NULL
);

-- The ids ever purged, keyed by the id alone as `lineage` is (added to a version-2 schema by
-- `cluster init`). A host's copy of a session whose id is here may be of an earlier session
-- under the same id, so catch-up compares its bytes with PostgreSQL's before trusting it.
CREATE TABLE IF NOT EXISTS sessionlog.purged (
    id        text PRIMARY KEY,
    purged_at timestamptz NOT NULL
);
