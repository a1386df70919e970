-- 0003_credentials_version: a change counter of the credentials.
--
-- Each replica keeps the credentials it verified in memory (memsvc/core/credentials.py) and
-- reads this one counter per request instead of the credential's row: every row inserted,
-- updated (a revocation) or deleted advances the `credentials` row of `sequences` in the
-- writing transaction (its row lock is held to the commit, so the number a reader sees is
-- never ahead of the rows), and a replica that reads a number other than the one its cache
-- was filled under drops the cache. A revocation through any replica or the CLI therefore
-- holds from the next request through every other. Row-level, so a second revoke that
-- changes no row moves nothing; TRUNCATE moves it too.

INSERT INTO sequences (name, value) VALUES ('credentials', 0) ON CONFLICT (name) DO NOTHING;

CREATE FUNCTION memsvc_credentials_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sequences SET value = value + 1 WHERE name = 'credentials';
    RETURN NULL;
END
$$;

CREATE TRIGGER credentials_changed AFTER INSERT OR UPDATE OR DELETE ON credentials
    FOR EACH ROW EXECUTE FUNCTION memsvc_credentials_changed();

CREATE TRIGGER credentials_truncated AFTER TRUNCATE ON credentials
    FOR EACH STATEMENT EXECUTE FUNCTION memsvc_credentials_changed();
