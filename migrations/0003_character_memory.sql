-- 0003_character_memory: state of the character-memory API that
-- must survive a restart: the identity generation of every recent-history path, the
-- accepted-but-unflushed appends, and the review's reflections.

-- One row per recent-history path ever seen (path = normcase(abspath(file))). `generation`
-- goes up each time the path is (re)activated: created, reused after a delete, restored by
-- a rollback, or found replaced by someone else. `signature` is the file's
-- dev:inode:ctime:size as last seen or written by memsvc (NULL while the path is active
-- only through pending appends); a different one on disk means another writer replaced it.
CREATE TABLE recent_generations (
    path       TEXT PRIMARY KEY,
    generation INTEGER NOT NULL,
    active     INTEGER NOT NULL CHECK (active IN (0, 1)),
    signature  TEXT,
    updated_at TEXT NOT NULL
);

-- AppendRecentMessages journals each accepted message here before it answers, so a crash
-- loses nothing; the flush writes them to the file in id order and deletes them.
-- `consumed_by` is set just before a write that includes the row, to the fingerprint of
-- what that write puts on disk: after a crash between the write and the delete, recovery
-- sees the file already holds it and drops the row instead of appending it twice.
CREATE TABLE recent_pending (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    character   TEXT NOT NULL,
    role        TEXT NOT NULL,
    text        TEXT NOT NULL,
    accepted_at TEXT NOT NULL,
    consumed_by TEXT
);
CREATE INDEX idx_recent_pending_character ON recent_pending (character, id);

-- Facts the review found in a character's human messages, on their way to long-term memory:
-- pending (seen once) → confirmed (seen again, confirmed_at) → promoted (memory_id set), or
-- denied (contradicted). polarity is +1 ("I love X") or -1 ("I hate X"): both give the
-- same fact_key, which is how a contradiction is recognised.
CREATE TABLE reflections (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    character     TEXT NOT NULL,
    fact_key      TEXT NOT NULL,
    polarity      INTEGER NOT NULL CHECK (polarity IN (-1, 1)),
    category      TEXT NOT NULL,
    type          TEXT NOT NULL,
    content       TEXT NOT NULL,
    evidence      TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'confirmed', 'promoted', 'denied')),
    seen_count    INTEGER NOT NULL DEFAULT 1,
    first_seen_at TEXT NOT NULL,
    last_seen_at  TEXT NOT NULL,
    confirmed_at  TEXT,
    promoted_at   TEXT,
    denied_at     TEXT,
    memory_id     TEXT
);
-- At most one live reflection per (character, fact, polarity); denied ones are history.
CREATE UNIQUE INDEX idx_reflections_live ON reflections (character, fact_key, polarity)
    WHERE status <> 'denied';
CREATE INDEX idx_reflections_confirmed ON reflections (confirmed_at) WHERE status = 'confirmed';
