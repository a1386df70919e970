"""PostgreSQL's lease store is the shared one (`memsvc.storage.leases`, on the server's clock)."""

from memsvc.storage.leases import SqlLeaseStore as PgLeaseStore

__all__ = ["PgLeaseStore"]
