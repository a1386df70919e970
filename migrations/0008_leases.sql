-- 0008_leases: single-flight jobs across the server processes sharing one database.
--
-- One row per job name (e.g. "reindex"). A process runs the job only while it holds the
-- row's lease: `holder` is that process's id (pid and a random token, new for each
-- acquisition) and `expires_at` (Unix seconds) is pushed forward by the holder's heartbeat.
-- Acquiring inserts the row or takes it over when `expires_at` has passed, in one write
-- transaction, so two processes never both hold it; a killed holder stops renewing and its
-- lease is taken over after it expires. Releasing sets `expires_at` to 0 and keeps the row.
-- `payload` is what the holder publishes for the other processes (the job's latest progress,
-- as JSON), `seq` goes up with each publish so a follower polling the row sees each one.
CREATE TABLE leases (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_at  REAL NOT NULL,
    acquired_at TEXT NOT NULL,
    payload     TEXT,
    seq         INTEGER NOT NULL DEFAULT 0
);
