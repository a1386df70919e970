-- 0004_memory_lifecycle: every memory's history, facts valid in time, and forgetting (the
-- SQLite migration 0013 says the same in SQLite's words; what differs is said here).
--
-- memory_history records every change to a memory in the transaction that makes it: row
-- triggers below write created, updated, superseded and merged; the store's delete path
-- (memsvc/storage/lifecycle.py) writes deleted, expired and summarized. Who and why come
-- from transaction-local settings the store sets before its statements (memsvc.author,
-- memsvc.reason, memsvc.related, memsvc.detail through set_config(..., true)).
--
-- The change feed's position: `seq` comes from a sequence, and sequence values are handed
-- out when a statement runs, not when it commits, so "after seq N" could miss a change of a
-- lower number that commits later. Each row also keeps the id of its transaction (`txid`,
-- pg_current_xact_id()), and a follower reads only rows whose transaction is older than every
-- transaction still running (txid < pg_snapshot_xmin(pg_current_snapshot())): those have all
-- committed or rolled back, and every later transaction gets a larger id, so the order
-- (txid, seq) below that bound never grows a row behind a follower's position.
--
-- memory_versions and memories.valid_from: as on SQLite.

ALTER TABLE memories ADD COLUMN valid_from timestamptz;

CREATE TABLE memory_versions (
    memory_id   bigint NOT NULL,
    id          text NOT NULL,
    api_key_id  text NOT NULL,
    session_id  text,
    type        text NOT NULL,
    key         text,
    content     text NOT NULL,
    metadata    jsonb NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    expires_at  timestamptz,
    keep        boolean NOT NULL,
    occurred_at timestamptz,
    valid_from  timestamptz NOT NULL,
    valid_to    timestamptz NOT NULL,
    PRIMARY KEY (memory_id, valid_to)
);
CREATE INDEX idx_memory_versions_owner ON memory_versions (api_key_id, valid_to);
CREATE INDEX idx_memory_versions_id ON memory_versions (id);

CREATE TABLE memory_history (
    seq        bigserial PRIMARY KEY,
    txid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
    id         text NOT NULL,
    api_key_id text NOT NULL,
    event      text NOT NULL
               CHECK (event IN ('created', 'updated', 'superseded', 'merged', 'deleted', 'expired', 'summarized')),
    at         timestamptz NOT NULL DEFAULT now(),
    author     text NOT NULL DEFAULT '',
    changes    jsonb NOT NULL DEFAULT '{}',
    related    text
);
CREATE INDEX idx_memory_history_id ON memory_history (id, seq);
CREATE INDEX idx_memory_history_feed ON memory_history (txid, seq);
CREATE INDEX idx_memory_history_owner_feed ON memory_history (api_key_id, txid, seq);
CREATE INDEX idx_memory_history_related ON memory_history (related) WHERE related IS NOT NULL;

CREATE INDEX idx_memories_owner_valid ON memories (api_key_id, coalesce(valid_from, occurred_at, created_at));

-- The cause the store set for this transaction ('' when none).
CREATE FUNCTION memsvc_change(name text) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT coalesce(current_setting('memsvc.' || name, true), '')
$$;

CREATE FUNCTION memsvc_memory_created() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_history (id, api_key_id, event, author, changes)
    VALUES (NEW.id, NEW.api_key_id, 'created', memsvc_change('author'), jsonb_build_object(
        'type', NEW.type, 'key', NEW.key, 'content', NEW.content, 'sessionId', NEW.session_id,
        'metadata', NEW.metadata, 'expiresAt', NEW.expires_at, 'keep', NEW.keep,
        'occurredAt', NEW.occurred_at));
    RETURN NULL;
END
$$;

CREATE FUNCTION memsvc_memory_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    reason text := memsvc_change('reason');
    set_fields jsonb := '{}';
    old_from timestamptz := coalesce(OLD.valid_from, OLD.occurred_at, OLD.created_at);
    event text := 'updated';
BEGIN
    IF OLD.api_key_id IS DISTINCT FROM NEW.api_key_id THEN
        UPDATE memory_history SET api_key_id = NEW.api_key_id WHERE id = NEW.id;
        UPDATE memory_versions SET api_key_id = NEW.api_key_id WHERE memory_id = NEW.memory_id;
        set_fields := set_fields || jsonb_build_object('apiKeyId', NEW.api_key_id);
    END IF;
    IF OLD.content IS DISTINCT FROM NEW.content THEN
        set_fields := set_fields || jsonb_build_object('content', NEW.content);
        IF reason = 'upsert' THEN
            event := 'superseded';
            IF NEW.valid_from > old_from THEN
                INSERT INTO memory_versions (memory_id, id, api_key_id, session_id, type, key, content, metadata,
                    created_at, updated_at, expires_at, keep, occurred_at, valid_from, valid_to)
                VALUES (OLD.memory_id, OLD.id, NEW.api_key_id, OLD.session_id, OLD.type, OLD.key, OLD.content,
                    OLD.metadata, OLD.created_at, OLD.updated_at, OLD.expires_at, OLD.keep, OLD.occurred_at,
                    old_from, NEW.valid_from);
            END IF;
        END IF;
    END IF;
    IF OLD.type IS DISTINCT FROM NEW.type THEN set_fields := set_fields || jsonb_build_object('type', NEW.type); END IF;
    IF OLD.key IS DISTINCT FROM NEW.key THEN set_fields := set_fields || jsonb_build_object('key', NEW.key); END IF;
    IF OLD.session_id IS DISTINCT FROM NEW.session_id THEN
        set_fields := set_fields || jsonb_build_object('sessionId', NEW.session_id);
    END IF;
    IF OLD.metadata IS DISTINCT FROM NEW.metadata THEN
        set_fields := set_fields || jsonb_build_object('metadata', NEW.metadata);
    END IF;
    IF OLD.expires_at IS DISTINCT FROM NEW.expires_at THEN
        set_fields := set_fields || jsonb_build_object('expiresAt', NEW.expires_at);
    END IF;
    IF OLD.keep IS DISTINCT FROM NEW.keep THEN set_fields := set_fields || jsonb_build_object('keep', NEW.keep); END IF;
    IF OLD.occurred_at IS DISTINCT FROM NEW.occurred_at THEN
        set_fields := set_fields || jsonb_build_object('occurredAt', NEW.occurred_at);
    END IF;
    IF OLD.valid_from IS DISTINCT FROM NEW.valid_from THEN
        set_fields := set_fields || jsonb_build_object('validFrom', NEW.valid_from);
    END IF;
    IF reason = 'merged' THEN
        event := 'merged';
        set_fields := set_fields || jsonb_build_object('mergedContent', memsvc_change('detail'));
    END IF;
    INSERT INTO memory_history (id, api_key_id, event, author, changes, related)
    VALUES (NEW.id, NEW.api_key_id, event, memsvc_change('author'), set_fields,
            CASE WHEN reason = 'merged' THEN nullif(memsvc_change('related'), '') END);
    RETURN NULL;
END
$$;

CREATE TRIGGER memories_history_created AFTER INSERT ON memories
    FOR EACH ROW EXECUTE FUNCTION memsvc_memory_created();

-- A change of what a memory says or how it is kept; not a touch, not a reindex mark.
CREATE TRIGGER memories_history_updated AFTER UPDATE ON memories FOR EACH ROW
    WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.type IS DISTINCT FROM NEW.type
          OR OLD.key IS DISTINCT FROM NEW.key OR OLD.session_id IS DISTINCT FROM NEW.session_id
          OR OLD.metadata IS DISTINCT FROM NEW.metadata OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
          OR OLD.keep IS DISTINCT FROM NEW.keep OR OLD.occurred_at IS DISTINCT FROM NEW.occurred_at
          OR OLD.api_key_id IS DISTINCT FROM NEW.api_key_id
          OR (OLD.updated_at IS DISTINCT FROM NEW.updated_at AND memsvc_change('reason') = 'merged'))
    EXECUTE FUNCTION memsvc_memory_updated();
