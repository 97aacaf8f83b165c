-- The only statements hosts run against the system of record's tables (version 3). Each is
-- SECURITY DEFINER, owned by the schema's owner, and fenced: a write to a session names the
-- owner epoch its host acquired it at, and the statement that advances the session checks that
-- epoch and the expected next seq and batch in its WHERE clause, so a host whose ownership was
-- taken over (a higher epoch) can never write it again. Each first checks that its caller may
-- act as the host it names (`check_caller`): a host's credentials are its own name's.

-- The functions whose arguments or results differ from a version-1 schema's are dropped first,
-- so `cluster init` upgrades that schema in its one transaction.
DROP FUNCTION IF EXISTS sessionlog.append_batches(text, integer, text[], text[], bigint[],
    bigint[], bigint[], bigint[], bytea[], bigint[], text[], bytea[], boolean[], integer[]);
DROP FUNCTION IF EXISTS sessionlog.acquire(text, text, integer, boolean);
-- And a version-2 schema's purge, which named no host.
DROP FUNCTION IF EXISTS sessionlog.purge(bigint);

-- Refuse (insufficient_privilege, 42501), before anything is read or written, a caller acting as
-- a `host` that is not its login role, unless it acts for every host: the schema's owner, a
-- member of that role, or a superuser (operators' tooling). `session_user` is the role the
-- connection logged in as, which neither SET ROLE nor a SECURITY DEFINER function changes.
CREATE OR REPLACE FUNCTION sessionlog.check_caller(host text)
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF host IS DISTINCT FROM session_user::text AND NOT pg_has_role(
        session_user,
        (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = 'sessionlog'),
        'MEMBER'
    ) THEN
        RAISE EXCEPTION 'role "%" may not act as host "%"', session_user, host
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A host connects as the login role of its own name: sessionlog cluster add-host NAME.';
    END IF;
END
$$;

-- Commit a group of session batches in one transaction: each is refused alone ('fenced',
-- 'stale', 'missing', 'exists', 'deleted') or committed ('ok'). `headers[i]` is not null for a
-- batch that creates its session, which `host` then owns at epoch `epochs[i]`, under lineage
-- root `roots[i]` (its own id, or a fork's parent's root); an id already in `lineage`, under any
-- root, is refused as 'exists'.
CREATE OR REPLACE FUNCTION sessionlog.append_batches(
    host text, lease_seconds integer,
    roots text[], ids text[], epochs bigint[], batches bigint[], first_seqs bigint[],
    events bigint[], bytes bytea[], crcs bigint[], verdicts text[],
    headers bytea[], zstds boolean[], versions integer[], parents text[], seeds bigint[])
RETURNS TABLE (idx integer, outcome text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = sessionlog, pg_temp AS $$
DECLARE
    i integer;
    cur record;
BEGIN
    PERFORM check_caller(host);
    FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
        idx := i;
        IF headers[i] IS NOT NULL THEN
            -- An id is taken once across every root: its routing row is claimed first (a
            -- concurrent creation of the same id waits on it, then finds it taken).
            INSERT INTO lineage (id, root_id) VALUES (ids[i], roots[i])
            ON CONFLICT (id) DO NOTHING;
            IF NOT FOUND THEN
                outcome := 'exists';
                RETURN NEXT;
                CONTINUE;
            END IF;
            -- A session created with no events has no batch yet: its next is batch 1.
            INSERT INTO sessions (root_id, id, version, zstd, header, verdict, next_seq,
                                  next_batch, owner, owner_epoch, lease_until, parent_id, seed)
            VALUES (roots[i], ids[i], versions[i], zstds[i], headers[i], verdicts[i],
                    first_seqs[i] + events[i],
                    batches[i] + CASE WHEN octet_length(bytes[i]) = 0 THEN 0 ELSE 1 END,
                    host, epochs[i], now() + make_interval(secs => lease_seconds),
                    parents[i], seeds[i])
            ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                -- A row left unrouted: the routing just claimed is its own.
                outcome := 'exists';
                RETURN NEXT;
                CONTINUE;
            END IF;
        ELSE
            UPDATE sessions
               SET next_seq = first_seqs[i] + events[i],
                   next_batch = batches[i] + 1,
                   verdict = verdicts[i]
             WHERE root_id = roots[i] AND id = ids[i]
               AND owner = host AND owner_epoch = epochs[i]
               AND next_seq = first_seqs[i] AND next_batch = batches[i]
               AND deleted_at IS NULL;
            IF NOT FOUND THEN
                SELECT s.owner, s.owner_epoch, s.deleted_at INTO cur
                  FROM sessions s WHERE s.root_id = roots[i] AND s.id = ids[i];
                outcome := CASE
                    WHEN NOT FOUND THEN 'missing'
                    WHEN cur.owner IS DISTINCT FROM host OR cur.owner_epoch <> epochs[i]
                        THEN 'fenced'
                    WHEN cur.deleted_at IS NOT NULL THEN 'deleted'
                    ELSE 'stale'
                END;
                RETURN NEXT;
                CONTINUE;
            END IF;
        END IF;
        IF octet_length(bytes[i]) > 0 THEN
            INSERT INTO batches (root_id, session_id, batch, first_seq, events, bytes, crc)
            VALUES (roots[i], ids[i], batches[i], first_seqs[i], events[i], bytes[i], crcs[i]);
            -- Announced to followers on any host when the transaction commits: the lineage
            -- root and the batch number only; they read the batch from its fenced row.
            PERFORM pg_notify('sessionlog_commits', roots[i] || ' ' || batches[i]);
        END IF;
        outcome := 'ok';
        RETURN NEXT;
    END LOOP;
END
$$;

-- Take session `session_id` for `host`, bumping its owner epoch (the fence): allowed when it is
-- unowned, owned by `host` already, its lease has expired, or `force`. Returns the session's
-- state, with `acquired` false (and the current owner) when another host holds a live lease.
CREATE OR REPLACE FUNCTION sessionlog.acquire(
    host text, session_id text, lease_seconds integer, force boolean)
RETURNS TABLE (root_id text, acquired boolean, owner text, owner_epoch bigint,
               lease_left double precision, next_seq bigint, next_batch bigint,
               version integer, zstd boolean, header bytea, verdict text, deleted boolean,
               parent_id text, seed bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = sessionlog, pg_temp AS $$
DECLARE
    root text;
BEGIN
    PERFORM check_caller(host);
    SELECT l.root_id INTO root FROM lineage l WHERE l.id = session_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    UPDATE sessions s
       SET owner = host, owner_epoch = s.owner_epoch + 1,
           lease_until = now() + make_interval(secs => lease_seconds)
     WHERE s.root_id = root AND s.id = session_id
       AND (s.owner IS NULL OR s.owner = host OR s.lease_until < now() OR force)
    RETURNING s.root_id, true, s.owner, s.owner_epoch, lease_seconds::double precision,
              s.next_seq, s.next_batch, s.version, s.zstd, s.header, s.verdict,
              s.deleted_at IS NOT NULL, s.parent_id, s.seed;
    IF NOT FOUND THEN
        RETURN QUERY
        SELECT s.root_id, false, s.owner, s.owner_epoch,
               greatest(extract(epoch FROM s.lease_until - now()), 0)::double precision,
               s.next_seq, s.next_batch, s.version, s.zstd, s.header, s.verdict,
               s.deleted_at IS NOT NULL, s.parent_id, s.seed
          FROM sessions s WHERE s.root_id = root AND s.id = session_id;
    END IF;
END
$$;

-- Extend the leases of the sessions `host` still owns at the given epochs; returns the ids
-- renewed (a session missing from the answer was taken over).
CREATE OR REPLACE FUNCTION sessionlog.renew(
    host text, lease_seconds integer, roots text[], ids text[], epochs bigint[])
RETURNS TABLE (id text)
LANGUAGE sql SECURITY DEFINER SET search_path = sessionlog, pg_temp AS $$
    SELECT check_caller(host);
    UPDATE sessions s
       SET lease_until = now() + make_interval(secs => lease_seconds)
      FROM unnest(roots, ids, epochs) AS t(root_id, id, epoch)
     WHERE s.root_id = t.root_id AND s.id = t.id
       AND s.owner = host AND s.owner_epoch = t.epoch
    RETURNING s.id;
$$;

-- Give up `host`'s ownership of a session it holds at `epoch`; the next acquisition needs no
-- force. Returns whether it held it.
CREATE OR REPLACE FUNCTION sessionlog.release(
    host text, root text, session_id text, epoch bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = sessionlog, pg_temp AS $$
BEGIN
    PERFORM check_caller(host);
    UPDATE sessions s SET owner = NULL, lease_until = NULL
     WHERE s.root_id = root AND s.id = session_id
       AND s.owner = host AND s.owner_epoch = epoch;
    RETURN FOUND;
END
$$;

-- Mark a session `host` holds at `epoch` deleted (hidden, still readable) or restore it.
CREATE OR REPLACE FUNCTION sessionlog.set_deleted(
    host text, root text, session_id text, epoch bigint, deleted boolean)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = sessionlog, pg_temp AS $$
BEGIN
    PERFORM check_caller(host);
    UPDATE sessions s
       SET deleted_at = CASE WHEN deleted THEN coalesce(s.deleted_at, now()) END
     WHERE s.root_id = root AND s.id = session_id
       AND s.owner = host AND s.owner_epoch = epoch;
    RETURN FOUND;
END
$$;

-- Remove for good the sessions deleted more than `older_than_seconds` ago that `host` could
-- acquire without force (unowned, its own, or their lease run out; another holder may still
-- restore them): their batches, their rows and their routing; each id is recorded in `purged`.
-- The operator's retention sweep; a host removes one session it holds with `purge_session`.
-- Returns the ids removed.
CREATE OR REPLACE FUNCTION sessionlog.purge(host text, older_than_seconds bigint)
RETURNS TABLE (id text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = sessionlog, pg_temp AS $$
BEGIN
    PERFORM check_caller(host);
    RETURN QUERY
    WITH doomed AS (
        DELETE FROM sessions s
         WHERE s.deleted_at < now() - make_interval(secs => older_than_seconds)
           AND (s.owner IS NULL OR s.owner = host OR s.lease_until < now())
        RETURNING s.root_id, s.id
    ), gone AS (
        DELETE FROM batches b USING doomed d
         WHERE b.root_id = d.root_id AND b.session_id = d.id
    ), unrouted AS (
        DELETE FROM lineage l USING doomed d WHERE l.id = d.id
    ), buried AS (
        INSERT INTO purged (id, purged_at) SELECT d.id, now() FROM doomed d
        ON CONFLICT ON CONSTRAINT purged_pkey DO UPDATE SET purged_at = now()
    )
    SELECT d.id FROM doomed d;
END
$$;

-- Remove for good the one session `host` holds at `epoch`, deleted or not: its batches, its row
-- and its routing; its id is recorded in `purged`. Returns whether `host` held it (nothing is
-- removed otherwise).
CREATE OR REPLACE FUNCTION sessionlog.purge_session(
    host text, root text, session_id text, epoch bigint)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = sessionlog, pg_temp AS $$
BEGIN
    PERFORM check_caller(host);
    DELETE FROM sessions s
     WHERE s.root_id = root AND s.id = purge_session.session_id
       AND s.owner = host AND s.owner_epoch = epoch;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM batches b
     WHERE b.root_id = root AND b.session_id = purge_session.session_id;
    DELETE FROM lineage l WHERE l.id = purge_session.session_id;
    INSERT INTO purged (id, purged_at) VALUES (purge_session.session_id, now())
    ON CONFLICT ON CONSTRAINT purged_pkey DO UPDATE SET purged_at = now();
    RETURN true;
END
$$;
