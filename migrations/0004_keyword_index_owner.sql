-- 0004_keyword_index_owner: the keyword index learns each row's owner, so a search reads one
-- owner's postings instead of every owner's (per-owner latency
-- must not grow with other owners' data).
--
-- Before: `MATCH 'editor OR like'` produced every matching row of every owner (over 100k rows
-- at 1M memories), each joined to `memories` only to be dropped by `api_key_id = ?`. Now the
-- index has a third column, `owner`, holding one token per row derived from api_key_id, and
-- a search is `owner : "<token>" AND {content key} : (...)`: FTS5 intersects the owner's
-- posting list with the terms' before ranking anything.
--
-- The token is 'o' || hex(api_key_id) || '0': hex keeps any owner id (spaces, punctuation,
-- any script) one alphanumeric token for unicode61, and the trailing digit keeps the porter
-- stemmer from touching it (its rules strip letter suffixes only), so distinct owners never
-- share a token. The external content is a view over `memories` that computes the same
-- column, so 'rebuild' and FTS5's integrity check read it like any content table.

DROP TRIGGER memory_fts_ai;
DROP TRIGGER memory_fts_ad;
DROP TRIGGER memory_fts_au;
DROP TABLE memory_fts;

CREATE VIEW memory_fts_source AS
SELECT memory_id, content, key, 'o' || hex(api_key_id) || '0' AS owner FROM memories;

CREATE VIRTUAL TABLE memory_fts USING fts5(
    content,
    key,
    owner,
    content = 'memory_fts_source',
    content_rowid = 'memory_id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_fts_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memory_fts (rowid, content, key, owner)
    VALUES (new.memory_id, new.content, new.key, 'o' || hex(new.api_key_id) || '0');
END;

CREATE TRIGGER memory_fts_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, key, owner)
    VALUES ('delete', old.memory_id, old.content, old.key, 'o' || hex(old.api_key_id) || '0');
END;

-- As in 0001: only when indexed text changes, never on access-count bumps.
-- The owner of a memory never changes (api_key_id is not updatable), but it is part of the
-- indexed row, so it is passed in full.
CREATE TRIGGER memory_fts_au AFTER UPDATE ON memories
WHEN old.content IS NOT new.content OR old.key IS NOT new.key OR old.api_key_id IS NOT new.api_key_id
BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, key, owner)
    VALUES ('delete', old.memory_id, old.content, old.key, 'o' || hex(old.api_key_id) || '0');
    INSERT INTO memory_fts (rowid, content, key, owner)
    VALUES (new.memory_id, new.content, new.key, 'o' || hex(new.api_key_id) || '0');
END;

INSERT INTO memory_fts (memory_fts) VALUES ('rebuild');
