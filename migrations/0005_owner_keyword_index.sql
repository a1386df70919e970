-- 0005_owner_keyword_index: keyword postings per owner (an owner's search must not
-- grow with other owners' data).
--
-- 0004 put the owner into the shared index as a column, so FTS5 could intersect the owner's
-- posting list with the terms' — but it still reads each term's whole posting list, every
-- owner's rows, first: an owner's search cost 0.25 ms among 10k rows and 2.9 ms among 1M.
-- Here every token is prefixed with its owner's tag (memsvc/storage/owner_terms.py), so a
-- term's posting list is one owner's rows and nothing else is read.
--
-- The table holds no text of its own (contentless, with delete support): the triggers feed
-- it the prefixed terms computed by SQL functions every memsvc connection registers:
-- memsvc_owner_words (FTS5's porter/unicode61 tokens of the text) and memsvc_owner_grams
-- (the trigrams of its CJK runs). Searches scoped to one owner use this table; searches
-- across owners (scope global) keep using memory_fts and memory_fts_cjk.
--
-- The `owner` column holds the tag alone (memsvc_owner_tag), so the vocabulary table's
-- document count of the tag is the owner's number of memories and that of a tagged term
-- its document frequency within the owner: what a search needs to leave out terms too
-- common to select anything (memsvc/storage/owner_terms.py `selective`).
--
-- memory_fts goes back to its 0001 form: the owner column of 0004 (and the view that fed
-- it) had no other use.

CREATE VIRTUAL TABLE memory_owner_fts USING fts5(
    content,
    key,
    grams,
    owner,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 0'
);

CREATE TRIGGER memory_owner_fts_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memory_owner_fts (rowid, content, key, grams, owner)
    VALUES (new.memory_id, memsvc_owner_words(new.api_key_id, new.content),
            memsvc_owner_words(new.api_key_id, new.key),
            memsvc_owner_grams(new.api_key_id, new.content, new.key), memsvc_owner_tag(new.api_key_id));
END;

CREATE TRIGGER memory_owner_fts_ad AFTER DELETE ON memories BEGIN
    DELETE FROM memory_owner_fts WHERE rowid = old.memory_id;
END;

-- As in 0001: only when indexed text changes, never on access-count bumps.
CREATE TRIGGER memory_owner_fts_au AFTER UPDATE ON memories
WHEN old.content IS NOT new.content OR old.key IS NOT new.key OR old.api_key_id IS NOT new.api_key_id
BEGIN
    DELETE FROM memory_owner_fts WHERE rowid = old.memory_id;
    INSERT INTO memory_owner_fts (rowid, content, key, grams, owner)
    VALUES (new.memory_id, memsvc_owner_words(new.api_key_id, new.content),
            memsvc_owner_words(new.api_key_id, new.key),
            memsvc_owner_grams(new.api_key_id, new.content, new.key), memsvc_owner_tag(new.api_key_id));
END;

INSERT INTO memory_owner_fts (rowid, content, key, grams, owner)
SELECT memory_id, memsvc_owner_words(api_key_id, content), memsvc_owner_words(api_key_id, key),
       memsvc_owner_grams(api_key_id, content, key), memsvc_owner_tag(api_key_id)
FROM memories;

CREATE VIRTUAL TABLE memory_owner_vocab USING fts5vocab(memory_owner_fts, row);

-- The bulk insert leaves several segments, and a query looks each term up in every one of
-- them (at 1M rows: 8 segments, 1.3 ms per query; merged into one: 0.9 ms, 1.5 s once).
INSERT INTO memory_owner_fts (memory_owner_fts) VALUES ('optimize');

DROP TRIGGER memory_fts_ai;
DROP TRIGGER memory_fts_ad;
DROP TRIGGER memory_fts_au;
DROP TABLE memory_fts;
DROP VIEW memory_fts_source;

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

CREATE TRIGGER memory_fts_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, key)
    VALUES ('delete', old.memory_id, old.content, old.key);
END;

CREATE TRIGGER memory_fts_au AFTER UPDATE ON memories
WHEN old.content IS NOT new.content OR old.key IS NOT new.key
BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, key)
    VALUES ('delete', old.memory_id, old.content, old.key);
    INSERT INTO memory_fts (rowid, content, key) VALUES (new.memory_id, new.content, new.key);
END;

INSERT INTO memory_fts (memory_fts) VALUES ('rebuild');
