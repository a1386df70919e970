-- 0006_credentials: bearer-token credentials managed by the operator (`memsvc tokens`).
--
-- A token reads msk_<lookup>_<secret>. `lookup` is public and unique, so verifying a token
-- is one indexed read of its row and a constant-time comparison of the secret's SHA-256
-- (`secret_sha256`); the secret itself is never stored. Revoking sets `revoked_at` and keeps
-- the row, so `tokens list` still shows it and a server that ever had a credential keeps
-- requiring tokens. `permissions` and `tenants` are JSON arrays (`["*"]` = every apiKeyId);
-- `characters` is whether the credential may touch character memory.
CREATE TABLE credentials (
    id            TEXT PRIMARY KEY,
    lookup        TEXT NOT NULL UNIQUE,
    secret_sha256 BLOB NOT NULL,
    permissions   TEXT NOT NULL,
    tenants       TEXT NOT NULL,
    characters    INTEGER NOT NULL CHECK (characters IN (0, 1)),
    created_at    TEXT NOT NULL,
    revoked_at    TEXT
);
