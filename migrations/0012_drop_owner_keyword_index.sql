-- 0012_drop_owner_keyword_index: one keyword index per row again.
--
-- 0005 gave every owner its own postings (memory_owner_fts, fed by a trigger that ran a
-- Python tokenizer for each inserted or edited row), so an owner's keyword search read that
-- owner's rows only. Owner-scoped searches are now answered from each process's working set
-- (memsvc/working_set/), built from one read of the owner's rows and kept current through the
-- change sequence of 0010; the store's own keyword search serves only what no working set
-- holds (scope global, an owner larger than MEMORY_WORKING_SET_MB, a budget of 0), and the
-- shared indexes (memory_fts, memory_fts_cjk) with the scope's owner filter answer it. The
-- second index and its trigger cost a write about a quarter of its time.
--
-- The SQL functions 0005's triggers called stay registered on every connection: a database
-- older than 0005 runs that migration (and its backfill) before this one.

DROP TRIGGER memory_owner_fts_ai;
DROP TRIGGER memory_owner_fts_ad;
DROP TRIGGER memory_owner_fts_au;
DROP TABLE memory_owner_vocab;
DROP TABLE memory_owner_fts;
