-- 0010_memory_changes: a change sequence of the memories, per owner.
--
-- Each process keeps its owners' working sets in memory (memsvc/working_set/) and ranks a
-- Retrieve's keyword list there instead of asking FTS5. A working set is built from one
-- snapshot and then follows the store by applying only what changed since its version, so
-- every write to `memories` (insert, delete, any update but one of the reindex mark alone;
-- the access counters included, so a returned memory carries them as the row does) appends
-- the memory and its owner here, in the same transaction. `memory_owner_versions` holds each
-- owner's newest change: the one cheap read a request makes to learn whether its owner's
-- working set is current, and it is never pruned.
--
-- The log itself keeps the newest CHANGE_LOG_ROWS (100,000) changes: a working set older
-- than that rebuilds from a snapshot instead of replaying (memsvc/storage/working_set_port.py
-- knows the number). Expiry needs no entry: it is a time compared on every request.

CREATE TABLE memory_changes (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    api_key_id TEXT NOT NULL,
    memory_id  INTEGER NOT NULL
);

CREATE INDEX idx_memory_changes_owner ON memory_changes (api_key_id, seq);

CREATE TABLE memory_owner_versions (
    api_key_id TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TRIGGER memory_changes_version AFTER INSERT ON memory_changes BEGIN
    INSERT INTO memory_owner_versions (api_key_id, seq) VALUES (new.api_key_id, new.seq)
    ON CONFLICT (api_key_id) DO UPDATE SET seq = excluded.seq;
    DELETE FROM memory_changes WHERE seq <= new.seq - 100000;
END;

CREATE TRIGGER memory_changes_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memory_changes (api_key_id, memory_id) VALUES (new.api_key_id, new.memory_id);
END;

CREATE TRIGGER memory_changes_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes (api_key_id, memory_id) VALUES (old.api_key_id, old.memory_id);
END;

-- Every update but one that only marks a memory for reindexing (or clears the mark): no
-- working set reads needs_reindex, and a forced reindex marks every row of the database.
CREATE TRIGGER memory_changes_au AFTER UPDATE ON memories
WHEN old.needs_reindex IS new.needs_reindex
  OR old.id IS NOT new.id OR old.api_key_id IS NOT new.api_key_id OR old.session_id IS NOT new.session_id
  OR old.type IS NOT new.type OR old.key IS NOT new.key OR old.content IS NOT new.content
  OR old.metadata IS NOT new.metadata OR old.created_at IS NOT new.created_at
  OR old.updated_at IS NOT new.updated_at OR old.expires_at IS NOT new.expires_at
  OR old.access_count IS NOT new.access_count OR old.last_accessed_at IS NOT new.last_accessed_at
  OR old.keep IS NOT new.keep OR old.occurred_at IS NOT new.occurred_at
BEGIN
    INSERT INTO memory_changes (api_key_id, memory_id) VALUES (new.api_key_id, new.memory_id);
    INSERT INTO memory_changes (api_key_id, memory_id)
    SELECT old.api_key_id, old.memory_id WHERE old.api_key_id IS NOT new.api_key_id;
END;
