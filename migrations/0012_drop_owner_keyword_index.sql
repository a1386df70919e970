-- 0012_drop_owner_keyword_index: one keyword index per row again, with no Python in a trigger.
--
-- 0005 gave every owner its own postings (memory_owner_fts, fed by a trigger that ran a
-- Python tokenizer for each inserted or edited row), so an owner's keyword search read that
-- owner's rows only. Owner-scoped searches are now answered from each process's working set
-- (memsvc/working_set/), built from one read of the owner's rows and kept current through the
-- change sequence of 0010; the store's own keyword search serves only what no working set
-- holds (scope global, an owner larger than MEMORY_WORKING_SET_MB, a budget of 0). The second
-- index and its trigger cost a write about a quarter of its time.
--
-- For those store searches the shared word index gets back the `owner` column of 0004: one
-- token per row, 'o' || hex(api_key_id) || '0' (hex keeps any owner id one alphanumeric
-- token for unicode61; the trailing digit keeps the porter stemmer off it), so an owner's
-- search is `owner : "<token>" AND {content key} : (...)` and FTS5 scores that owner's
-- matches only. Without it, an owner of 10k memories among 1M had every owner's matches of
-- each word scored and joined (150 ms a query, against about 3 ms with the column). The
-- external content is a view over `memories` that computes the column, so 'rebuild' and
-- FTS5's integrity check read it like any content table. Rebuilding takes about a minute
-- for 1M memories, once.
--
-- The SQL functions 0005's triggers called stay registered on every connection: a database
-- older than 0005 runs that migration (and its backfill) before this one.

DROP TRIGGER memory_owner_fts_ai;
DROP TRIGGER memory_owner_fts_ad;
DROP TRIGGER memory_owner_fts_au;
DROP TABLE memory_owner_vocab;
DROP TABLE memory_owner_fts;

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

-- Only when indexed text (or the owner, which is part of the indexed row) changes, never on
-- access-count bumps.
CREATE TRIGGER memory_fts_au AFTER UPDATE ON memories
WHEN old.content IS NOT new.content OR old.key IS NOT new.key OR old.api_key_id IS NOT new.api_key_id
BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, key, owner)
    VALUES ('delete', old.memory_id, old.content, old.key, 'o' || hex(old.api_key_id) || '0');
    INSERT INTO memory_fts (rowid, content, key, owner)
    VALUES (new.memory_id, new.content, new.key, 'o' || hex(new.api_key_id) || '0');
END;

INSERT INTO memory_fts (memory_fts) VALUES ('rebuild');

-- Each term's document count, for the store's search to leave out words too common to
-- select anything (memsvc/storage/keyword.py `selective`).
CREATE VIRTUAL TABLE memory_fts_vocab USING fts5vocab(memory_fts, row);
INSERT INTO memory_fts (memory_fts) VALUES ('optimize');
