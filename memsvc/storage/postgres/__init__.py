"""PostgreSQL storage for a shared-store deployment: a pooled connection with the same
transaction contract as the SQLite `Database`, its own migration runner, and the settings,
lease and credential stores. Together with `memsvc.storage` the only code that imports
psycopg."""
