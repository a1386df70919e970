-- 0001_initial: memories with their keyword index, settings, credentials, leases and the
-- change counter, for a deployment whose memsvc processes share one PostgreSQL.
-- Applied by memsvc.storage.postgres.migrations inside one transaction together with its
-- schema_migrations row (and under the runner's advisory lock); this file must therefore hold
-- no BEGIN/COMMIT of its own. The vectors table is not created here: its dimension is only
-- known at run time.

-- memory_id is the integer id the vector stores join on. It comes from a sequence, which
-- never hands out a value twice (not after the newest row is deleted, not after a rolled-back
-- insert): a vector row or Qdrant point left behind by a failed clean-up must never attach
-- itself to a new memory.
CREATE SEQUENCE memory_id_seq AS bigint;

CREATE TABLE memories (
    id               text PRIMARY KEY,                  -- UUID4, the public id
    memory_id        bigint NOT NULL UNIQUE DEFAULT nextval('memory_id_seq'),
    api_key_id       text NOT NULL,
    session_id       text,
    type             text NOT NULL
                     CHECK (type IN ('factual', 'episodic', 'procedural', 'semantic')),
    key              text,
    content          text NOT NULL,
    metadata         jsonb NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    expires_at       timestamptz,                       -- NULL = never expires
    needs_reindex    boolean NOT NULL DEFAULT false,
    access_count     bigint NOT NULL DEFAULT 0,
    last_accessed_at timestamptz,
    -- Kept with no age limit: retention never hides it (expiry still applies).
    keep             boolean NOT NULL DEFAULT false,
    -- When what the memory records happened, as its writer gave it; NULL = not known, and
    -- coalesce(occurred_at, created_at) is the time a signal reads.
    occurred_at      timestamptz,
    -- The keyword index's document: the content and the key through the english
    -- configuration (stemmed, stop words dropped), computed by the server on every write of
    -- either, so it never disagrees with the row.
    search           tsvector GENERATED ALWAYS AS (
                         to_tsvector('english'::regconfig, content)
                         || to_tsvector('english'::regconfig, coalesce(key, ''))) STORED
);
ALTER SEQUENCE memory_id_seq OWNED BY memories.memory_id;

-- Newest-first listing per owner; its leading column also serves lookups by api_key_id.
CREATE INDEX idx_memories_owner_created ON memories (api_key_id, created_at DESC, memory_id DESC);
CREATE INDEX idx_memories_session ON memories (session_id);
CREATE INDEX idx_memories_type ON memories (type);
-- Most rows never expire: clean-up (expires_at < now) reads this smaller partial index.
CREATE INDEX idx_memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX idx_memories_needs_reindex ON memories (memory_id) WHERE needs_reindex;
-- Upsert target: one row per (owner, key); keyless memories are unconstrained.
CREATE UNIQUE INDEX idx_memories_owner_key ON memories (api_key_id, key) WHERE key IS NOT NULL;
-- One owner's memories on a day (or a span) a question names, in time order.
CREATE INDEX idx_memories_owner_happened ON memories (api_key_id, coalesce(occurred_at, created_at), memory_id);
-- The neighbouring turns of a session, by effective time (memory_id breaks ties).
CREATE INDEX idx_memories_owner_session_happened
    ON memories (api_key_id, session_id, coalesce(occurred_at, created_at), memory_id);
-- Keyword search: the GIN index over the tsvector document.
CREATE INDEX idx_memories_search ON memories USING gin (search);

-- The change counter of memories, one row. Every statement that writes memories bumps it in
-- its own transaction (a statement-level trigger, so a batch of a thousand rows bumps it
-- once), so it moves exactly when such a transaction commits and never for one rolled
-- back: each memsvc process reads it to know when another one changed the rows its caches
-- hold. Writers of memories queue on this row until they commit.
CREATE TABLE memory_changes (
    id      smallint PRIMARY KEY CHECK (id = 1),
    version bigint NOT NULL
);
INSERT INTO memory_changes (id, version) VALUES (1, 0);

CREATE FUNCTION memsvc_memories_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memory_changes SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER memories_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON memories
    FOR EACH STATEMENT EXECUTE FUNCTION memsvc_memories_changed();

-- Named counters (the settings version, which every settings write bumps).
CREATE TABLE sequences (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);

-- Every memory setting, one JSON value per key (json, not jsonb: the value reads back as
-- it was written, objects' key order included).
CREATE TABLE settings (
    key        text PRIMARY KEY,
    value      json NOT NULL,
    updated_at timestamptz
);

-- Bearer-token credentials: `lookup` is public and unique (a token is
-- msk_<lookup>_<secret>), the secret is stored only as its SHA-256. Revoking sets
-- revoked_at and keeps the row. permissions and tenants are JSON arrays (["*"] = every
-- apiKeyId); characters is whether the credential may touch character memory.
CREATE TABLE credentials (
    id            text PRIMARY KEY,
    lookup        text NOT NULL UNIQUE,
    secret_sha256 bytea NOT NULL,
    permissions   jsonb NOT NULL,
    tenants       jsonb NOT NULL,
    characters    boolean NOT NULL,
    created_at    timestamptz NOT NULL,
    revoked_at    timestamptz
);

-- Single-flight jobs across the memsvc processes sharing the database: one row per job
-- name, held by `holder` until `expires_at`, in Unix seconds of the database server's clock
-- (the one clock every replica on every host shares). Releasing sets expires_at to 0 and
-- keeps the row; `payload` is what the holder publishes, `seq` goes up with each publish.
CREATE TABLE leases (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    expires_at  double precision NOT NULL,
    acquired_at timestamptz NOT NULL,
    payload     text,
    seq         bigint NOT NULL DEFAULT 0
);
