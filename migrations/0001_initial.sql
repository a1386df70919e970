-- 0001_initial: memories, their FTS5 index, vector metadata and settings.
-- Applied by memsvc.storage.migrations inside one write transaction together with its
-- schema_migrations row; this file must therefore hold no BEGIN/COMMIT of its own.
-- vec_memories is not created here: its dimension is only known at run time.

CREATE TABLE memories (
    id               TEXT PRIMARY KEY,                 -- UUID4, the public id
    -- The integer id FTS5 (content_rowid) and vec0 (rowid) join on. Every insert must set
    -- it: rows without one were invisible to search in the reference.
    memory_id        INTEGER UNIQUE NOT NULL,
    api_key_id       TEXT NOT NULL,
    session_id       TEXT,
    type             TEXT NOT NULL
                     CHECK (type IN ('factual', 'episodic', 'procedural', 'semantic')),
    key              TEXT,
    content          TEXT NOT NULL,
    metadata         TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    -- Timestamps are fixed-width 'YYYY-MM-DDTHH:MM:SS.ffffffZ' UTC text, so comparing the
    -- text compares the instants and indexes on them order correctly.
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    expires_at       TEXT,                             -- NULL = never expires
    needs_reindex    INTEGER NOT NULL DEFAULT 0,
    access_count     INTEGER NOT NULL DEFAULT 0,
    last_accessed_at TEXT
);

-- memory_id is never reused, even after the newest row is deleted: a vector row or Qdrant
-- point left behind by a failed clean-up must never attach itself to a new memory. The
-- insert takes value + 1 and this trigger advances it, in the same transaction.
CREATE TABLE sequences (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT INTO sequences (name, value) VALUES ('memory_id', 0);

CREATE TRIGGER memories_advance_memory_id AFTER INSERT ON memories BEGIN
    UPDATE sequences SET value = max(value, new.memory_id) WHERE name = 'memory_id';
END;

-- Newest-first listing per owner (ORDER BY created_at DESC, memory_id DESC). Its leading
-- column also serves every lookup by api_key_id alone, so no separate single-column index
-- on api_key_id is kept (it would only cost writes).
CREATE INDEX idx_memories_owner_created ON memories (api_key_id, created_at DESC, memory_id DESC);
CREATE INDEX idx_memories_session ON memories (session_id);
CREATE INDEX idx_memories_type ON memories (type);
-- Most rows never expire; a comparison on expires_at implies NOT NULL, so cleanup
-- (expires_at < now) can use this smaller partial index.
CREATE INDEX idx_memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX idx_memories_needs_reindex ON memories (memory_id) WHERE needs_reindex = 1;
-- Upsert target: one row per (owner, key); keyless memories are unconstrained.
CREATE UNIQUE INDEX idx_memories_owner_key ON memories (api_key_id, key) WHERE key IS NOT NULL;

-- Keyword index. External content: the text lives once, in memories; the index is derived
-- and can be rebuilt ('rebuild' command) by a later migration, e.g. to change tokenizer.
CREATE VIRTUAL TABLE memory_fts USING fts5(
    content,
    key,
    content = 'memories',
    content_rowid = 'memory_id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_fts_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memory_fts (rowid, content, key) VALUES (new.memory_id, new.content, new.key);
END;

-- External-content tables must be told the old values to remove ('delete' command); a
-- plain DELETE would read the already-changed row and corrupt the index.
CREATE TRIGGER memory_fts_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, key)
    VALUES ('delete', old.memory_id, old.content, old.key);
END;

-- Only when indexed text changes: bumping access_count on every retrieval must not rewrite
-- the index (the reference grew 175k FTS rows for 962 memories).
-- memory_id is never updated by memsvc, so it is not part of the guard.
CREATE TRIGGER memory_fts_au AFTER UPDATE ON memories
WHEN old.content IS NOT new.content OR old.key IS NOT new.key
BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, key)
    VALUES ('delete', old.memory_id, old.content, old.key);
    INSERT INTO memory_fts (rowid, content, key) VALUES (new.memory_id, new.content, new.key);
END;

-- Single row describing the run-time vec_memories table.
CREATE TABLE memory_vec_meta (
    id                  INTEGER PRIMARY KEY CHECK (id = 1),
    active_dim          INTEGER,
    embedding_signature TEXT,                          -- source:model:dim[:int8]
    last_reset_at       TEXT,
    vec_loaded          INTEGER NOT NULL DEFAULT 0
);
INSERT INTO memory_vec_meta (id) VALUES (1);

-- Every memory setting, one JSON value per key.
CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL CHECK (json_valid(value)),
    updated_at TEXT
);
