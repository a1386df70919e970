"""The history triggers of SQLite (the tables are migration 0013's): created, updated,
superseded and merged entries, written by the statement's own transaction.

Why TEMP triggers of memsvc's writer connection and not triggers of the schema: they read
who makes a change and why (memsvc.storage.change_cause) through memsvc_change(), a Python
function only memsvc's connections register. In the schema they would make every other
SQLite connection (the sqlite3 shell, a repair script) fail on its first write to
`memories`; as TEMP triggers such a connection writes as before, and what it writes is not in
the history. Every write memsvc makes goes through its one writer connection per process
(memsvc.storage.database), which installs them once the schema exists (`install`).
"""

from __future__ import annotations

from typing import Any

TRIGGERS = """
CREATE TEMP TRIGGER IF NOT EXISTS memory_history_ai AFTER INSERT ON main.memories BEGIN
    INSERT INTO memory_history (id, api_key_id, event, at, author, changes)
    VALUES (
        new.id, new.api_key_id, 'created', coalesce(memsvc_change('at'), new.created_at),
        coalesce(memsvc_change('author'), ''),
        json_object(
            'type', new.type, 'key', new.key, 'content', new.content, 'sessionId', new.session_id,
            'metadata', json(new.metadata), 'expiresAt', new.expires_at,
            'keep', json(CASE new.keep WHEN 1 THEN 'true' ELSE 'false' END), 'occurredAt', new.occurred_at
        )
    );
END;

CREATE TEMP TRIGGER IF NOT EXISTS memory_history_au AFTER UPDATE ON main.memories
WHEN old.content IS NOT new.content OR old.type IS NOT new.type OR old.key IS NOT new.key
  OR old.session_id IS NOT new.session_id OR old.metadata IS NOT new.metadata
  OR old.expires_at IS NOT new.expires_at OR old.keep IS NOT new.keep
  OR old.occurred_at IS NOT new.occurred_at OR old.api_key_id IS NOT new.api_key_id
  -- A merge: its cause is bound around the merge statement alone, which moves updated_at
  -- only when the memory is older than the transaction (not one created earlier in it).
  OR memsvc_change('reason') = 'merged'
BEGIN
    -- A memory moved to another owner (a character's rename) takes its past along.
    UPDATE memory_history SET api_key_id = new.api_key_id
    WHERE id = new.id AND old.api_key_id IS NOT new.api_key_id;
    UPDATE memory_versions SET api_key_id = new.api_key_id
    WHERE memory_id = new.memory_id AND old.api_key_id IS NOT new.api_key_id;
    -- The fact a keyed create superseded, valid until the new one is.
    INSERT INTO memory_versions (
        memory_id, id, api_key_id, session_id, type, key, content, metadata, created_at,
        updated_at, expires_at, keep, occurred_at, valid_from, valid_to)
    SELECT old.memory_id, old.id, new.api_key_id, old.session_id, old.type, old.key, old.content,
           old.metadata, old.created_at, old.updated_at, old.expires_at, old.keep, old.occurred_at,
           coalesce(old.valid_from, old.occurred_at, old.created_at), new.valid_from
    WHERE old.content IS NOT new.content AND memsvc_change('reason') = 'upsert'
      AND new.valid_from > coalesce(old.valid_from, old.occurred_at, old.created_at);
    INSERT INTO memory_history (id, api_key_id, event, at, author, changes, related)
    SELECT new.id, new.api_key_id,
           CASE WHEN memsvc_change('reason') = 'merged' THEN 'merged'
                WHEN memsvc_change('reason') = 'upsert' AND old.content IS NOT new.content THEN 'superseded'
                ELSE 'updated' END,
           coalesce(memsvc_change('at'), new.updated_at), coalesce(memsvc_change('author'), ''),
           (SELECT json_group_object(f, json(v)) FROM (
                SELECT 'content' AS f, json_quote(new.content) AS v WHERE old.content IS NOT new.content
                UNION ALL SELECT 'type', json_quote(new.type) WHERE old.type IS NOT new.type
                UNION ALL SELECT 'key', json_quote(new.key) WHERE old.key IS NOT new.key
                UNION ALL SELECT 'sessionId', json_quote(new.session_id) WHERE old.session_id IS NOT new.session_id
                UNION ALL SELECT 'metadata', new.metadata WHERE old.metadata IS NOT new.metadata
                UNION ALL SELECT 'expiresAt', json_quote(new.expires_at) WHERE old.expires_at IS NOT new.expires_at
                UNION ALL SELECT 'keep', CASE new.keep WHEN 1 THEN 'true' ELSE 'false' END
                          WHERE old.keep IS NOT new.keep
                UNION ALL SELECT 'occurredAt', json_quote(new.occurred_at) WHERE old.occurred_at IS NOT new.occurred_at
                UNION ALL SELECT 'apiKeyId', json_quote(new.api_key_id) WHERE old.api_key_id IS NOT new.api_key_id
                UNION ALL SELECT 'validFrom', json_quote(new.valid_from) WHERE old.valid_from IS NOT new.valid_from
                UNION ALL SELECT 'mergedContent', json_quote(memsvc_change('detail'))
                          WHERE memsvc_change('reason') = 'merged'
           )),
           CASE WHEN memsvc_change('reason') = 'merged' THEN memsvc_change('related') END;
END;
"""


def install(conn: Any) -> None:
    """Create the triggers on the writer connection `conn` (idempotent)."""
    for _ in conn.execute(TRIGGERS):
        pass
