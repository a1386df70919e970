-- 0013_memory_lifecycle: every memory's history, facts valid in time, and forgetting.
--
-- memory_history records every change to a memory in the transaction that makes it: created,
-- updated, superseded (a keyed create replaced the fact), merged (a duplicate write touched
-- it), and, written by the store's delete path (memsvc/storage/lifecycle.py), deleted,
-- expired and summarized. `changes` is a JSON object of the fields the change set, by their
-- API names, with their values after it (a creation sets every field). `seq` orders the
-- history; on SQLite, whose writers take turns on one file, it is also the commit order, so
-- it is the change feed's position (WatchMemories): a follower that resumes after seq N
-- misses nothing and sees nothing twice.
--
-- The triggers that write created, updated, superseded and merged entries are not in the
-- schema: memsvc's writer connection creates them as TEMP triggers when it opens the store
-- (memsvc/storage/history_triggers.py), because they read who and why from the write itself
-- (the credential's id, a reason such as 'upsert' or 'merged', the transaction's time)
-- through memsvc_change(name), a Python function only memsvc's connections have. A plain
-- SQLite connection (the sqlite3 shell, a repair script) can still write memories; its
-- writes are not in the history. Touches (access counters) and reindex marks are no changes.
--
-- memory_versions keeps the facts a keyed create superseded, each valid over
-- [valid_from, valid_to): Retrieve and Inject with `asOf` answer with the versions valid
-- then. A memory's current version is valid from memories.valid_from, which a supersede
-- sets; NULL means from when it happened (coalesce(occurred_at, created_at)), so rows
-- stored before this migration need no rewrite. A summary keeps the versions of what it
-- folded (valid until the summary was made). Conversation turns are events: they have no key
-- and never supersede each other.
--
-- Forgetting: deleting a memory (DeleteMemory, ClearMemories, expiry) removes its history and
-- versions in the same transaction, keeping only a 'deleted' (or 'expired') entry that
-- names its id and nothing of what it said; FTS5's secure-delete removes its words from
-- the keyword indexes at once (not at the next merge), and the writer runs with
-- secure_delete, so freed pages are zeroed.

ALTER TABLE memories ADD COLUMN valid_from TEXT;

CREATE TABLE memory_versions (
    memory_id   INTEGER NOT NULL,
    id          TEXT NOT NULL,
    api_key_id  TEXT NOT NULL,
    session_id  TEXT,
    type        TEXT NOT NULL,
    key         TEXT,
    content     TEXT NOT NULL,
    metadata    TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    expires_at  TEXT,
    keep        INTEGER NOT NULL,
    occurred_at TEXT,
    valid_from  TEXT NOT NULL,
    valid_to    TEXT NOT NULL,
    PRIMARY KEY (memory_id, valid_to)
);
-- The versions of one owner valid at an instant: valid_to > t AND valid_from <= t.
CREATE INDEX idx_memory_versions_owner ON memory_versions (api_key_id, valid_to);
CREATE INDEX idx_memory_versions_id ON memory_versions (id);

CREATE TABLE memory_history (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL,
    api_key_id TEXT NOT NULL,
    event      TEXT NOT NULL
               CHECK (event IN ('created', 'updated', 'superseded', 'merged', 'deleted', 'expired', 'summarized')),
    at         TEXT NOT NULL,
    author     TEXT NOT NULL DEFAULT '',
    changes    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(changes)),
    related    TEXT
);
CREATE INDEX idx_memory_history_id ON memory_history (id, seq);
CREATE INDEX idx_memory_history_owner ON memory_history (api_key_id, seq);
-- The memories folded into a summary (a summary's deletion forgets their history too).
CREATE INDEX idx_memory_history_related ON memory_history (related) WHERE related IS NOT NULL;

-- The versions of a memory valid at an instant, and the current ones from when.
CREATE INDEX idx_memories_owner_valid ON memories (api_key_id, coalesce(valid_from, occurred_at, created_at));

-- Forgotten words leave the keyword indexes with the row, not at a later segment merge.
INSERT INTO memory_fts (memory_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO memory_fts_cjk (memory_fts_cjk, rank) VALUES ('secure-delete', 1);
