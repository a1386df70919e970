-- 0007_memory_keep: memories kept with no age limit.
--
-- Retention (retentionDays) hides memories older than the window from retrieval while they
-- stay listed. A memory written with `keep` is exempt: its age never hides it (a user's name
-- should not expire). Expiry (expires_at) still applies to it.
ALTER TABLE memories ADD COLUMN keep INTEGER NOT NULL DEFAULT 0 CHECK (keep IN (0, 1));
