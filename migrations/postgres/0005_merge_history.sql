-- 0005_merge_history: a duplicate merged into a memory is recorded even when the memory's
-- updatedAt does not move.
--
-- 0004 recorded a merge when the merging UPDATE moved updated_at under the `merged` reason.
-- A memory created earlier in the same transaction (a batch, or the concurrent creates of one
-- group commit, in which a fact is said twice) already holds the transaction's now(), and so
-- does one merged twice in one transaction: those merges left no entry. A merge is now
-- recognised by what its statement sets rather than by what it changes: the merge statement
-- sets updated_at alone, and an UPDATE OF trigger fires for every statement naming the column
-- in its SET, changed or not. The reason alone would not do: the settings it is read from last
-- to the end of the transaction, and a later statement of it (a reindex mark) is no merge.

DROP TRIGGER memories_history_updated ON memories;

-- A change of what a memory says or how it is kept; not a touch, not a reindex mark.
CREATE TRIGGER memories_history_updated AFTER UPDATE ON memories FOR EACH ROW
    WHEN (OLD.content IS DISTINCT FROM NEW.content OR OLD.type IS DISTINCT FROM NEW.type
          OR OLD.key IS DISTINCT FROM NEW.key OR OLD.session_id IS DISTINCT FROM NEW.session_id
          OR OLD.metadata IS DISTINCT FROM NEW.metadata OR OLD.expires_at IS DISTINCT FROM NEW.expires_at
          OR OLD.keep IS DISTINCT FROM NEW.keep OR OLD.occurred_at IS DISTINCT FROM NEW.occurred_at
          OR OLD.api_key_id IS DISTINCT FROM NEW.api_key_id)
    EXECUTE FUNCTION memsvc_memory_updated();

-- A duplicate's write: it sets updated_at alone (memsvc/storage/memory_store.py, _MERGE).
CREATE TRIGGER memories_history_merged AFTER UPDATE OF updated_at ON memories FOR EACH ROW
    WHEN (memsvc_change('reason') = 'merged'
          AND OLD.content IS NOT DISTINCT FROM NEW.content AND OLD.type IS NOT DISTINCT FROM NEW.type
          AND OLD.key IS NOT DISTINCT FROM NEW.key AND OLD.api_key_id IS NOT DISTINCT FROM NEW.api_key_id)
    EXECUTE FUNCTION memsvc_memory_updated();
