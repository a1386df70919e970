"""Character memory: recent-history files with snapshot tokens,
durable appends, the rename transaction, legacy storage, and the review and Powerful Memory
switches with their reflections. No gRPC and no SQL here: `memsvc.api` converts, and
`memsvc.storage.character_store` / `reflection_store` hold the SQL."""
