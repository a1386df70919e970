-- 0009_memory_occurred_at: when the thing a memory records happened.
--
-- created_at is when memsvc stored a memory; occurred_at is when what it records happened,
-- as its writer gave it (the time a chat turn was said, for a history imported long after).
-- NULL means not known. It is the same fixed-width UTC text as created_at
-- (YYYY-MM-DDTHH:MM:SS.ffffffZ), so text order is time order. Where a signal needs when
-- something happened it reads coalesce(occurred_at, created_at): a memory whose time is not
-- known happened, as far as anyone knows, when it was stored. Retention (retentionDays)
-- stays measured on created_at, so an old history imported today is not hidden as old.
ALTER TABLE memories ADD COLUMN occurred_at TEXT;

-- The memories of one owner on a day (or a span) a question names: a range of one owner's
-- effective times, in time order.
CREATE INDEX idx_memories_owner_happened ON memories (api_key_id, coalesce(occurred_at, created_at), memory_id);

-- The neighbouring turns of a session: the memories of one owner's session just before and
-- after a given one, by effective time (memory_id breaks ties between turns of one instant).
CREATE INDEX idx_memories_owner_session_happened ON memories (api_key_id, session_id, coalesce(occurred_at, created_at), memory_id);
