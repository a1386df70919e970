-- 0002_memory_owner_changes: a change log of the memories per owner, for the working sets.
--
-- Each process keeps its owners' working sets in memory (memsvc/working_set/) and ranks an
-- owner's keyword search there. A set is built from one snapshot and then follows the store
-- by applying what changed since its version, so every statement that writes `memories`
-- (insert, any update, delete; the access counters included, so a returned memory carries
-- them as the row does) records the memories it wrote, in its own transaction.
--
-- Why a counter per owner and not a sequence: sequence values are handed out when a
-- statement runs and committed in any order, so "changes after the number I have" could
-- miss a change with a lower number that commits later. Here each statement that writes an
-- owner's memories bumps that owner's row of `memory_owner_versions` (the row lock is held
-- to the commit, so the next writer of the owner waits for it and then counts on from the
-- committed value) and stores the new number with each memory it changed: per owner, commit
-- order is counter order, and a snapshot that sees counter v sees every change numbered ≤ v.
-- Statement-level triggers over transition tables: a batch of a thousand rows is one bump
-- and one insert per owner, not a thousand.
--
-- The log keeps about each owner's newest 10,000 counter values (pruned every 100th); a
-- working set further behind than that rebuilds from a snapshot instead of replaying
-- (memsvc/storage/postgres/working_set_port.py knows the number). TRUNCATE records no rows,
-- so it moves every owner 10,001 ahead: every set then finds the log too short and
-- rebuilds. Expiry needs no entry: it is a time compared on every request.

CREATE TABLE memory_owner_versions (
    api_key_id text PRIMARY KEY,
    seq        bigint NOT NULL
);

CREATE TABLE memory_owner_changes (
    api_key_id text NOT NULL,
    seq        bigint NOT NULL,
    memory_id  bigint NOT NULL,
    PRIMARY KEY (api_key_id, seq, memory_id)
);

-- The memories (owner, memory_id) one statement wrote: one bump per owner, in owner order
-- (two statements locking the same owners never deadlock), one log row per memory.
-- PL/pgSQL, not SQL: its statements' plans are cached per session, where a SQL function's
-- data-modifying CTE is planned again on every call (3× the cost of a single-row insert).
CREATE FUNCTION memsvc_record_owner_changes(owners text[], ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF cardinality(ids) = 0 THEN  -- an upsert fires the UPDATE trigger with no row updated
        RETURN;
    END IF;
    WITH changed AS (
        SELECT DISTINCT c.owner, c.id FROM unnest(owners, ids) AS c(owner, id)
    ), bumped AS (
        INSERT INTO memory_owner_versions AS v (api_key_id, seq)
        SELECT DISTINCT owner, 1 FROM changed ORDER BY owner
        ON CONFLICT (api_key_id) DO UPDATE SET seq = v.seq + 1
        RETURNING v.api_key_id, v.seq
    ), logged AS (
        INSERT INTO memory_owner_changes (api_key_id, seq, memory_id)
        SELECT c.owner, b.seq, c.id FROM changed c JOIN bumped b ON b.api_key_id = c.owner
    )
    DELETE FROM memory_owner_changes o USING bumped b
    WHERE b.seq % 100 = 0 AND o.api_key_id = b.api_key_id AND o.seq <= b.seq - 10000;
END
$$;

CREATE FUNCTION memsvc_memories_owner_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM memsvc_record_owner_changes(ARRAY(SELECT api_key_id FROM new_rows),
                                            ARRAY(SELECT memory_id FROM new_rows));
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM memsvc_record_owner_changes(ARRAY(SELECT api_key_id FROM old_rows),
                                            ARRAY(SELECT memory_id FROM old_rows));
    ELSE
        -- An update that moved a memory to another owner is a change of both owners.
        PERFORM memsvc_record_owner_changes(
            ARRAY(SELECT api_key_id FROM new_rows UNION ALL SELECT api_key_id FROM old_rows),
            ARRAY(SELECT memory_id FROM new_rows UNION ALL SELECT memory_id FROM old_rows));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER memories_owner_inserted AFTER INSERT ON memories REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memsvc_memories_owner_changed();
CREATE TRIGGER memories_owner_updated AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memsvc_memories_owner_changed();
CREATE TRIGGER memories_owner_deleted AFTER DELETE ON memories REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memsvc_memories_owner_changed();

CREATE FUNCTION memsvc_memories_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_owner_versions SET seq = seq + 10001;
    DELETE FROM memory_owner_changes;
    RETURN NULL;
END
$$;

CREATE TRIGGER memories_owner_truncated AFTER TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memsvc_memories_truncated();

-- The memories written so far are in no log: each owner starts at version 1, and a set
-- is only ever built from a snapshot (which holds them).
INSERT INTO memory_owner_versions (api_key_id, seq) SELECT DISTINCT api_key_id, 1 FROM memories;
