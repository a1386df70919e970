-- 0002_cjk_keyword_index: a trigram FTS5 index for Chinese, Japanese and Korean text.
-- unicode61 splits on spaces, and CJK text has none: a whole sentence becomes one token and
-- keyword search finds nothing inside it. The trigram tokenizer indexes every 3-character
-- substring, so "深色模式" is found inside "我喜欢深色模式". Only rows containing CJK
-- characters are indexed (the GLOB below: kana, CJK ideographs, Hangul), which keeps the
-- index small for everyone else. Inserts and deletes carry the same condition, because
-- telling an external-content index to delete a row it never held corrupts it.

CREATE VIRTUAL TABLE memory_fts_cjk USING fts5(
    content,
    key,
    content = 'memories',
    content_rowid = 'memory_id',
    tokenize = 'trigram'
);

CREATE TRIGGER memory_fts_cjk_ai AFTER INSERT ON memories
WHEN new.content GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*' OR COALESCE(new.key, '') GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*'
BEGIN
    INSERT INTO memory_fts_cjk (rowid, content, key) VALUES (new.memory_id, new.content, new.key);
END;

CREATE TRIGGER memory_fts_cjk_ad AFTER DELETE ON memories
WHEN old.content GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*' OR COALESCE(old.key, '') GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*'
BEGIN
    INSERT INTO memory_fts_cjk (memory_fts_cjk, rowid, content, key)
    VALUES ('delete', old.memory_id, old.content, old.key);
END;

-- An update is a delete of the old text (if it was indexed) then an insert of the new one
-- (if it qualifies); like memory_fts_au, nothing happens when only counters change.
CREATE TRIGGER memory_fts_cjk_au_old AFTER UPDATE ON memories
WHEN (old.content IS NOT new.content OR old.key IS NOT new.key)
 AND (old.content GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*' OR COALESCE(old.key, '') GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*')
BEGIN
    INSERT INTO memory_fts_cjk (memory_fts_cjk, rowid, content, key)
    VALUES ('delete', old.memory_id, old.content, old.key);
END;

CREATE TRIGGER memory_fts_cjk_au_new AFTER UPDATE ON memories
WHEN (old.content IS NOT new.content OR old.key IS NOT new.key)
 AND (new.content GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*' OR COALESCE(new.key, '') GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*')
BEGIN
    INSERT INTO memory_fts_cjk (rowid, content, key) VALUES (new.memory_id, new.content, new.key);
END;

INSERT INTO memory_fts_cjk (rowid, content, key)
SELECT memory_id, content, key FROM memories
WHERE content GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*' OR COALESCE(key, '') GLOB '*[぀-ヿ㐀-鿿가-힯豈-﫿]*';
