"""SQLite storage: connections, the migration runner and the SQLite MemoryBackend. The only package that knows the SQLite binding (apsw)."""
