"""PostgreSQL's credential store is the shared one (`memsvc.storage.credentials`): every
replica reads the change counter on every request (`change_hint` is None there)."""

from memsvc.storage.credentials import SqlCredentialStore as PgCredentialStore

__all__ = ["PgCredentialStore"]
