-- 0011_credentials_version: a change counter of the credentials.
--
-- Each process keeps the credentials it verified in memory (memsvc/core/credentials.py), so
-- a request's token is checked without reading its row. What keeps that cache honest is this
-- counter: every insert, update (a revocation) or delete of a credential advances the
-- `credentials` row of `sequences` in the same transaction, and a process that reads a number
-- other than the one its cache was filled under drops the cache. A revocation by the CLI or
-- by another process therefore holds from the next request everywhere. An idempotent second
-- revoke changes no row and moves nothing.

INSERT INTO sequences (name, value) VALUES ('credentials', 0);

CREATE TRIGGER credentials_version_ai AFTER INSERT ON credentials BEGIN
    UPDATE sequences SET value = value + 1 WHERE name = 'credentials';
END;

CREATE TRIGGER credentials_version_au AFTER UPDATE ON credentials BEGIN
    UPDATE sequences SET value = value + 1 WHERE name = 'credentials';
END;

CREATE TRIGGER credentials_version_ad AFTER DELETE ON credentials BEGIN
    UPDATE sequences SET value = value + 1 WHERE name = 'credentials';
END;
